"""Each canonical rewrite of the shapes tested here compiles with nvcc and with NVRTC, as the tuner compiles it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutune.cuda.extract import extract_kernel
from cutune.cuda.parse import parse_source
from cutune.template.variants.canonical import canonicalise
from tests.cuda.test_extract import needs_nvrtc, nvcc_compiled_functions, nvrtc_lowered_names

from .test_counted import COUNTED
from .test_exits import GATHER
from .test_guard import EARLY, ENCLOSING
from .test_index_locals import INDEXED
from .test_loop_macros import LOOPED
from .test_pack_rounds import WARPS
from .test_scaled import PACKED
from .test_thread_count import REDUCED
from .test_while_loops import RESTARTED, ROWS

CASES = [
    (EARLY, "k<float>", "grid_stride_guard"),
    (ENCLOSING, "k", "grid_stride_guard"),
    (COUNTED, "k", "counted_loops"),
    (GATHER, "k<float>", "loop_exits"),
    (ROWS, "k", "while_loops"),
    (RESTARTED, "k", "while_loops"),
    (PACKED, "k<float>", "scaled_loops"),
    (LOOPED, "k<float>", "loop_macros"),
    (REDUCED, "k<256>", "thread_count"),
    (INDEXED, "k<float>", "index_locals"),
    (WARPS.replace("LAUNCH", "k<4, float><<<1, dim3(32, 2)>>>(out, in, n, 1e-6f);"), "k<4, float>", "pack_rounds"),
]


@pytest.mark.nvcc
@needs_nvrtc
@pytest.mark.parametrize(("source", "name", "step"), CASES)
def test_the_canonical_form_compiles_with_nvcc_and_nvrtc(source: str, name: str, step: str, tmp_path: Path) -> None:
    canonical = canonicalise(parse_source(source), "k")
    assert canonical.applied == (step,)
    nvcc_unit = extract_kernel(canonical.model, "k", instantiations=[name])
    assert len(nvcc_compiled_functions(nvcc_unit, tmp_path)) == 1
    nvrtc_unit = extract_kernel(canonical.model, "k", instantiations=[name], for_nvrtc=True)
    assert set(nvrtc_lowered_names(nvrtc_unit)) == {name}
