"""The fused device checks: compiled by NVRTC here, and equal to the element-wise path on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

from cutune.gpu.device_checks import _COMPARE, _OPTIONS, _SOURCE, device_checks, plain_reductions
from cutune.gpu.harness import bf16_from_float32, compare
from cutune.gpu.nvrtc import compile_program, find_libnvrtc
from cutune.spec import Tolerance


@pytest.mark.skipif(find_libnvrtc() is None, reason="NVRTC (libnvrtc) is not installed")
def test_the_fused_checks_compile_with_nvrtc_for_both_compare_types() -> None:
    out = compile_program(_SOURCE, [*_OPTIONS, "--gpu-architecture=compute_80"], list(_COMPARE.values()))
    assert set(out.lowered) == set(_COMPARE.values())
    assert out.binary


def test_numpy_keeps_the_elementwise_path_and_its_reductions() -> None:
    assert device_checks(np) is None
    with plain_reductions(np):  # nothing to switch on the host
        got = compare(np.array([1.0, np.nan]), np.array([1.5, np.nan]), "float64", Tolerance(rtol=0.0, atol=0.1), np)
    assert (got.mismatches, got.max_scaled, got.worst_index) == (1, 5.0, (0,))


TOLERANCES = (Tolerance(rtol=1e-3, atol=1e-3), Tolerance(rtol=0.0, atol=0.0), Tolerance(rtol=0.25, atol=0.5))


def _awkward(dtype: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Values whose comparison is hard to get right: NaN, ±inf, ties at the tolerance, zeros of both signs."""
    values = rng.standard_normal(n).astype(np.float32)
    values[::7] = np.nan
    values[1::11] = np.inf
    values[2::13] = -np.inf
    values[3::17] = -0.0
    if dtype == "bfloat16":
        return bf16_from_float32(values, np)
    if dtype in ("int8", "int32", "int64", "uint8"):
        return np.nan_to_num(values * 50, posinf=7, neginf=-7).astype(dtype)
    return values.astype(dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int32", "int64", "uint8"])
def test_fused_compare_equals_the_elementwise_one_on_the_device(dtype: str) -> None:
    import cupy as cp

    rng = np.random.default_rng(3)
    fused = device_checks(cp)
    assert fused is not None
    for n in (0, 1, 31, 1000, 100_003):
        want = _awkward(dtype, n, rng)
        got = want.copy()
        if n:
            got.view(np.uint8)[rng.integers(0, got.nbytes, size=max(1, n // 50))] ^= np.uint8(4)  # small errors
        for tolerance in TOLERANCES:
            on_host = compare(got, want, dtype, tolerance, np)
            on_device = compare(cp.asarray(got), cp.asarray(want), dtype, tolerance, cp)
            assert (on_device.mismatches, on_device.total) == (on_host.mismatches, on_host.total), (n, tolerance)
            assert on_device.max_scaled == on_host.max_scaled, (n, tolerance)
            if on_host.mismatches:  # a failure names an element (CuPy's element-wise search flushes denormals)
                assert len(on_device.worst_index) == 1 and 0 <= on_device.worst_index[0] < n


@pytest.mark.gpu
def test_differing_bytes_counts_every_changed_byte_at_any_alignment() -> None:
    import cupy as cp

    fused = device_checks(cp)
    assert fused is not None
    rng = np.random.default_rng(5)
    base = rng.integers(0, 256, size=70_001, dtype=np.uint8)
    for start, length in ((0, 70_001), (1, 4097), (3, 10), (2, 0)):  # words where aligned, bytes elsewhere
        a = base[start : start + length].copy()
        b = a.copy()
        hits = np.unique(rng.integers(0, max(length, 1), size=min(length, 37)))
        b[hits] ^= 0x81
        da, db = cp.asarray(base), cp.asarray(base)
        da[start : start + length] = cp.asarray(a)
        db[start : start + length] = cp.asarray(b)
        counts = fused.differing_bytes([(da[start : start + length], db[start : start + length]), (da, da)])
        assert counts == [len(hits) if length else 0, 0]


@pytest.mark.gpu
def test_plain_reductions_switch_cub_off_inside_and_restore_it() -> None:
    import cupy as cp

    before = (list(cp._core.get_routine_accelerators()), list(cp._core.get_reduction_accelerators()))
    with plain_reductions(cp):
        assert (cp._core.get_routine_accelerators(), cp._core.get_reduction_accelerators()) == ([], [])
        assert int(cp.count_nonzero(cp.arange(10))) == 9
    assert (list(cp._core.get_routine_accelerators()), list(cp._core.get_reduction_accelerators())) == before
