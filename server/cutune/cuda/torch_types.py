"""torch in device code: its scalar types (`at::Half`, `at::BFloat16`, `c10::BFloat16`: what torch's dtype
dispatch hands kernels as `scalar_t`) and its headers reached through project headers, made to compile
as a real build sees them.

Where torch is installed and nvcc compiles, its own headers serve (its include folders are added, with the
`-U__CUDA_NO_HALF_OPERATORS__`-style undefines serving projects build with). Otherwise (no torch, or NVRTC,
which cannot read them) the scalar types are mapped to CUDA's `__half` and `__nv_bfloat16`, and each torch
header a project header includes is stood in for by one that brings CUDA's half and bfloat16 types and that
mapping, and declares `at::Tensor` (which such headers name in a using-declaration for their host code). Either way
the unit's notes say which was done.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Set
from dataclasses import dataclass
from pathlib import Path

from cutune.cuda.stand_ins import STOOD_IN, stood_in

TORCH_ENV = "CUTUNE_TORCH"
_NAMESPACES = frozenset(("at", "c10"))
_TYPES = frozenset(("Half", "BFloat16"))
# what PyTorch's extension builder defines and serving projects undefine again (their kernels need the
# half/bfloat16 operators and conversions)
UNDEFINES = (
    "__CUDA_NO_HALF_OPERATORS__",
    "__CUDA_NO_HALF_CONVERSIONS__",
    "__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "__CUDA_NO_HALF2_OPERATORS__",
)

_SCALARS = """\
#ifndef CUTUNE_TORCH_SCALARS
#define CUTUNE_TORCH_SCALARS
namespace c10 {
using Half = __half;
using BFloat16 = __nv_bfloat16;
}  // namespace c10
namespace at {
using c10::BFloat16;
using c10::Half;
}  // namespace at
#endif
"""
_MAPPED = "// cutune: torch's scalar types mapped to CUDA's ({why})\n"
_REAL = """\
// cutune: torch's own scalar types, from its installed headers
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
namespace at {
using c10::BFloat16;
using c10::Half;
}  // namespace at
"""
_STAND_IN = """\
// cutune: stands in for <{target}> ({why}): CUDA's half and bfloat16 types, torch's scalar types mapped to them
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
// named, not used, by extension headers beside their kernels (`using at::Tensor;`): host code only
namespace at {{
class Tensor;
}}  // namespace at
"""


@dataclass(frozen=True)
class TorchScalars:
    """What a unit needs for torch's scalar types: generated code, include folders, and a note."""

    prelude: str = ""
    include_dirs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TorchHeaders:
    """How the torch headers a unit's project headers include are found: folders, undefines and a note."""

    include_dirs: tuple[str, ...] = ()
    undefines: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def torch_scalars(names: Set[str], *, for_nvrtc: bool) -> TorchScalars:
    """How a unit whose code uses `names` gets torch's scalar types; empty when it uses none."""
    if not (names & _NAMESPACES and names & _TYPES):
        return TorchScalars()
    folders = torch_include_dirs()
    if folders and not for_nvrtc:
        return TorchScalars(_REAL, folders, ("at::Half/at::BFloat16 from torch's installed headers",))
    why = _why_not(folders)
    note = f"at::Half/at::BFloat16 mapped to __half/__nv_bfloat16 ({why})"
    return TorchScalars(_MAPPED.format(why=why) + _SCALARS, (), (note,))


def torch_headers(reached: Set[str], *, for_nvrtc: bool) -> TorchHeaders:
    """How the torch headers `reached` through project headers are found; empty when none is."""
    if not reached:
        return TorchHeaders()
    folders = torch_include_dirs()
    shown = ", ".join(f"<{t}>" for t in sorted(reached))
    if folders and not for_nvrtc:
        return TorchHeaders(folders, UNDEFINES, (f"{shown} from torch's installed headers",))
    why = _why_not(folders)
    texts = {t: _STAND_IN.format(target=t, why=why) + _SCALARS for t in sorted(reached)}
    found, notes = stood_in(texts, f"{shown} {STOOD_IN} by CUDA's types ({why})")
    return TorchHeaders(found, (), notes)


def _why_not(folders: tuple[str, ...]) -> str:
    return "NVRTC cannot read torch's headers" if folders else "torch is not installed"


@functools.cache
def torch_include_dirs() -> tuple[str, ...]:
    """The include folders of an installed torch (found without importing it), or () without torch.

    $CUTUNE_TORCH names the torch package folder to take them from instead (one outside this environment);
    set but empty, it has cutune build as where torch is not installed."""
    chosen = os.environ.get(TORCH_ENV)
    spec = importlib.util.find_spec("torch") if chosen is None else None
    locations = [chosen] if chosen else list((spec.submodule_search_locations or []) if spec else [])
    for location in locations:
        root = Path(location) / "include"
        if (root / "c10" / "util" / "Half.h").is_file():
            return (str(root), str(root / "torch" / "csrc" / "api" / "include"))
    return ()
