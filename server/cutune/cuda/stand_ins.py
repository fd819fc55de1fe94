"""Headers a stand-alone device unit's project headers include but its compiler cannot read, stood in for.

A project header kept for the kernel's sake often includes headers for its host code too. Where the compiler
cannot read those (torch's under NVRTC or without torch: `torch_types.py`; under NVRTC, which has no C or C++
library, the CUDA host API's `<cuda.h>`, `<cuda_runtime.h>` and the standard ones, `<stdint.h>`, `<type_traits>`),
the unit's include path starts with a folder holding a stand-in of each: what device code may read of it (CCCL's
`<cuda/std/...>` for a standard header that has one) and nothing else. Where a header's code needs more (a host
helper taking `std::vector`), NVRTC fails and `auto` compiles with nvcc, saying why. The folder is named by its
content, so processes share it and a changed stand-in never meets an old one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Mapping, Set
from pathlib import Path

from cutune.cuda.includes import device_includes

STOOD_IN = "stood in for"  # in a unit's notes: what replaced a header its compiler cannot read (every stand-in's)
# <math.h>'s INFINITY and NAN, which nvcc's headers define (the runtime's through <math.h>) and NVRTC lacks
MATH_MACROS = """\
#if defined(__CUDACC_RTC__) && !defined(INFINITY)
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
#endif
"""
_MATH_HEADERS = frozenset(("cmath", "math.h"))
# the CUDA host API's version macros (`#if CUDA_VERSION >= 12000` in project headers), from NVRTC's own version
_HOST_API = (
    """\
// cutune: stands in for <{target}> under NVRTC, which cannot read the CUDA host API's headers: their version
// macros, from the compiler's own version (device code calls none of the host API), and <math.h>'s INFINITY, NAN
#pragma once
#ifndef CUDA_VERSION
#define CUDA_VERSION (__CUDACC_VER_MAJOR__ * 1000 + __CUDACC_VER_MINOR__ * 10)
#endif
#ifndef CUDART_VERSION
#define CUDART_VERSION CUDA_VERSION
#endif
"""
    + MATH_MACROS
)


def stood_in(texts: Mapping[str, str], note: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The include folder holding each target of `texts` with that text, and the unit's `note`; where the temporary
    folder cannot be written (read-only, full), no folder and a note saying why: the compile then goes as without
    stand-ins (NVRTC fails and `auto` takes nvcc), and its error says so."""
    try:
        return (_folder(texts),), (note,)
    except OSError as e:
        return (), (f"not done, {tempfile.gettempdir()} cannot be written ({e.strerror or e}): {note}",)


def _folder(texts: Mapping[str, str]) -> str:
    """A folder holding each include target of `texts` with that text (shared between processes)."""
    digest = hashlib.sha256(repr(sorted(texts.items())).encode()).hexdigest()[:16]
    root = Path(tempfile.gettempdir()) / "cutune-stand-ins" / digest
    for target, text in texts.items():
        path = root / target
        if path.is_file():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)  # readers see no file or the whole one
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return str(root)


def nvrtc_stand_ins(
    host_api: Set[str], standard: Set[str], *, for_nvrtc: bool
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The include folder standing in, under NVRTC, for the CUDA host API headers and the C/C++ standard headers
    project headers reach, and the unit's notes; nothing where none is reached or nvcc compiles (it reads them)."""
    if not for_nvrtc or not (host_api or standard):
        return (), ()
    texts = {t: _HOST_API.format(target=t) for t in host_api}
    texts |= {t: _standard(t) for t in standard}
    notes = []
    if host_api:
        shown = ", ".join(f"<{t}>" for t in sorted(host_api))
        notes.append(f"{shown} {STOOD_IN} by their version macros: NVRTC cannot read the host API's headers")
    if standard:
        shown = ", ".join(f"<{t}>" for t in sorted(standard))
        notes.append(
            f"{shown}, included by project headers, {STOOD_IN} by CCCL's where it has them: NVRTC has no C++ library"
        )
    return stood_in(texts, "; ".join(notes))


def _standard(target: str) -> str:
    """A standard header's stand-in: the CCCL header a unit's own `#include` of it becomes under NVRTC, its names
    reachable as `std::` (as the unit's own trait prelude makes them), empty where CCCL has none; the math
    headers' INFINITY and NAN."""
    mapped = device_includes(target, True, for_nvrtc=True, names=frozenset())
    lines = [f"// cutune: stands in for <{target}> under NVRTC, which has no C or C++ standard library", "#pragma once"]
    for header in mapped:
        lines += [f"#include <{header}>", "namespace std {", "using namespace cuda::std;", "}  // namespace std"]
    return "\n".join(lines) + "\n" + (MATH_MACROS if target in _MATH_HEADERS else "")
