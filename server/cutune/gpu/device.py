"""The live device's limits, read from its CUDA properties through CuPy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cutune.errors import NoGpuError
from cutune.limits import BUILTIN, DeviceLimits

# cudaDeviceProp field → DeviceLimits field
PROPERTY_FIELDS: dict[str, str] = {
    "multiProcessorCount": "sm_count",
    "warpSize": "warp_size",
    "maxThreadsPerBlock": "max_threads_per_block",
    "maxThreadsPerMultiProcessor": "max_threads_per_sm",
    "maxBlocksPerMultiProcessor": "max_blocks_per_sm",
    "regsPerMultiprocessor": "regs_per_sm",
    "regsPerBlock": "max_regs_per_block",
    "sharedMemPerMultiprocessor": "smem_per_sm",
    "sharedMemPerBlock": "max_smem_per_block",
    "sharedMemPerBlockOptin": "max_smem_per_block_optin",
    "reservedSharedMemPerBlock": "reserved_smem_per_block",
    "l2CacheSize": "l2_bytes",
}


def limits_from_properties(props: Mapping[str, Any]) -> DeviceLimits:
    """DeviceLimits from a cudaDeviceProp dict; what it lacks (allocation units) comes from the built-ins."""
    arch = f"sm_{props['major']}{props['minor']}"
    name = props.get("name", arch)
    if isinstance(name, bytes):
        name = name.decode(errors="replace")
    values = {field: int(props[key]) for key, field in PROPERTY_FIELDS.items() if key in props}
    return BUILTIN.get(arch, DeviceLimits(arch=arch)).with_overrides(arch=arch, name=str(name), **values)


def device_limits(device: int = 0) -> DeviceLimits:
    """The limits of CUDA device `device`, read live."""
    import cupy

    return limits_from_properties(cupy.cuda.runtime.getDeviceProperties(device))


def driver_version() -> str:
    """The CUDA version the installed driver supports, e.g. '13.0'."""
    import cupy

    version = cupy.cuda.runtime.driverGetVersion()
    return f"{version // 1000}.{version % 1000 // 10}"


def device_count() -> int:
    """How many CUDA devices CuPy sees; NoGpuError saying why when it cannot look."""
    try:
        import cupy
    except ImportError:
        raise NoGpuError("CuPy is not installed: pip install 'cutune[gpu]'") from None
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except cupy.cuda.runtime.CUDARuntimeError as e:
        raise NoGpuError(f"CUDA is not usable here: {e}") from None


def gpu_available() -> bool:
    """Whether CuPy imports and sees at least one CUDA device."""
    try:
        return device_count() > 0
    except Exception:  # no CuPy, no driver or no device: all mean "not here"
        return False
