"""The weighted geometric mean: how cutune sums speedups over problem sizes (selection and results alike)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def weighted_geomean(values: Sequence[float], weights: Sequence[float] | None = None) -> float:
    """exp(Σ w·log v / Σ w); equal weights when `weights` is None."""
    w = [1.0] * len(values) if weights is None else list(weights)
    return math.exp(sum(wi * math.log(v) for wi, v in zip(w, values, strict=True)) / sum(w))
