"""torch's scalar types in device code (`at::Half`, `at::BFloat16`, `c10::BFloat16`: what torch's dtype
dispatch hands kernels as `scalar_t`), made to compile in a unit without torch's host headers.

Where torch is installed and nvcc compiles, its own headers declare them (its include folders are added);
otherwise (no torch, or NVRTC, which cannot read them) they are mapped to CUDA's `__half` and
`__nv_bfloat16`. Either way the unit's notes say which was done.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Set
from dataclasses import dataclass
from pathlib import Path

_NAMESPACES = frozenset(("at", "c10"))
_TYPES = frozenset(("Half", "BFloat16"))

_MAPPED = """\
// cutune: torch's scalar types mapped to CUDA's ({why})
namespace c10 {{
using Half = __half;
using BFloat16 = __nv_bfloat16;
}}  // namespace c10
namespace at {{
using c10::BFloat16;
using c10::Half;
}}  // namespace at
"""
_REAL = """\
// cutune: torch's own scalar types, from its installed headers
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
namespace at {
using c10::BFloat16;
using c10::Half;
}  // namespace at
"""


@dataclass(frozen=True)
class TorchScalars:
    """What a unit needs for torch's scalar types: generated code, include folders, and a note."""

    prelude: str = ""
    include_dirs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def torch_scalars(names: Set[str], *, for_nvrtc: bool) -> TorchScalars:
    """How a unit whose code uses `names` gets torch's scalar types; empty when it uses none."""
    if not (names & _NAMESPACES and names & _TYPES):
        return TorchScalars()
    folders = torch_include_dirs()
    if folders and not for_nvrtc:
        return TorchScalars(_REAL, folders, ("at::Half/at::BFloat16 from torch's installed headers",))
    why = "NVRTC cannot read torch's headers" if folders else "torch is not installed"
    return TorchScalars(_MAPPED.format(why=why), (), (f"at::Half/at::BFloat16 mapped to __half/__nv_bfloat16 ({why})",))


@functools.cache
def torch_include_dirs() -> tuple[str, ...]:
    """The include folders of an installed torch (found without importing it), or () without torch."""
    spec = importlib.util.find_spec("torch")
    for location in (spec.submodule_search_locations or []) if spec else []:
        root = Path(location) / "include"
        if (root / "c10" / "util" / "Half.h").is_file():
            return (str(root), str(root / "torch" / "csrc" / "api" / "include"))
    return ()
