"""Live device limits from CUDA properties, and the speed-of-light floor."""

from __future__ import annotations

import pytest

from cutune.gpu.backend import DeviceInfo
from cutune.gpu.device import limits_from_properties
from cutune.gpu.sol import sol_floor_us
from cutune.limits import BUILTIN

# cudaGetDeviceProperties of an H100 80GB HBM3 (as CuPy returns it), trimmed to what cutune reads
H100 = {
    "name": b"NVIDIA H100 80GB HBM3", "major": 9, "minor": 0, "multiProcessorCount": 132, "warpSize": 32,
    "maxThreadsPerBlock": 1024, "maxThreadsPerMultiProcessor": 2048, "maxBlocksPerMultiProcessor": 32,
    "regsPerMultiprocessor": 65536, "regsPerBlock": 65536, "sharedMemPerMultiprocessor": 233472,
    "sharedMemPerBlock": 49152, "sharedMemPerBlockOptin": 232448, "reservedSharedMemPerBlock": 1024,
    "l2CacheSize": 52428800, "totalGlobalMem": 85_045_395_456,
}  # fmt: skip


def test_limits_come_from_the_properties() -> None:
    limits = limits_from_properties(H100)
    assert limits.arch == "sm_90" and limits.name == "NVIDIA H100 80GB HBM3"
    assert (limits.sm_count, limits.l2_bytes, limits.max_smem_per_block_optin) == (132, 50 << 20, 232448)
    assert limits.reg_alloc_unit == BUILTIN["sm_90"].reg_alloc_unit  # not a property: built in


def test_missing_properties_fall_back_to_the_built_in_limits() -> None:
    limits = limits_from_properties({"major": 8, "minor": 0, "name": "A100-SXM4-40GB", "l2CacheSize": 41943040})
    assert limits.max_threads_per_sm == BUILTIN["sm_80"].max_threads_per_sm
    assert limits.name == "A100-SXM4-40GB" and limits.l2_bytes == 41943040


def test_unknown_architectures_get_generic_limits() -> None:
    limits = limits_from_properties({**H100, "major": 12, "minor": 0})
    assert limits.arch == "sm_120" and limits.sm_count == 132


def test_sol_floor_is_bytes_over_bandwidth_plus_an_empty_launch() -> None:
    info = DeviceInfo(
        name="H200",
        arch="sm_90",
        sm_count=132,
        l2_bytes=60 << 20,
        copy_bandwidth_gbs=4260.0,
        empty_launch_us=2.9,
    )
    assert sol_floor_us(0, info) == 2.9
    assert sol_floor_us(818_000_000, info) == pytest.approx(818e6 / 4.26e12 * 1e6 + 2.9)
    unmeasured = DeviceInfo(name="?", arch="sm_90", sm_count=1, l2_bytes=0, empty_launch_us=3.0)
    assert sol_floor_us(10**9, unmeasured) == 3.0
