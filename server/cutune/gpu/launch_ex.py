"""Launches with a launch attribute, through the driver's cuLaunchKernelEx (CuPy launches with cuLaunchKernel,
which takes none): programmatic stream serialization, for programmatic dependent launch."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

# CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (cuda.h): the kernel may start before the one before
# it in the stream ends; it waits for it where it executes griddepcontrol.wait
_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class _Attribute(ctypes.Structure):
    # CUlaunchAttribute: a 4-byte id, then the 64-byte value union at offset 8
    _fields_ = [("id", ctypes.c_int), ("value", ctypes.c_uint64 * 8)]


class _Config(ctypes.Structure):
    # CUlaunchConfig
    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_mem", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(_Attribute)),
        ("num_attrs", ctypes.c_uint),
    ]


_NOT_SUPPORTED = 801  # CUDA_ERROR_NOT_SUPPORTED: a driver without cuLaunchKernelEx (before CUDA 12.0)


@functools.cache
def _launch_kernel_ex() -> Any:
    """The driver's cuLaunchKernelEx, or None where the driver has none."""
    try:
        function = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.POINTER(_Config), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function


class DependentLaunch:
    """One kernel launch with programmatic stream serialization on, its argument buffers built once."""

    def __init__(
        self, function: Any, grid: Sequence[int], block: Sequence[int], smem: int, args: Sequence[Any]
    ) -> None:
        self._function = ctypes.c_void_p(getattr(function, "kernel", function).ptr)  # a RawKernel's Function
        self._buffers = [_argument(a) for a in args]  # kept alive for the driver's reads at each launch
        self._params = (ctypes.c_void_p * max(len(args), 1))(*(ctypes.addressof(b) for b in self._buffers))
        self._attribute = _Attribute(_PROGRAMMATIC_STREAM_SERIALIZATION)
        self._attribute.value[0] = 1  # programmaticStreamSerializationAllowed
        self._config = _Config((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block), smem)
        self._config.attrs = ctypes.pointer(self._attribute)
        self._config.num_attrs = 1

    def __call__(self, stream: int) -> None:
        """Launch on `stream` (a CUstream handle); a driver error, or a driver without the call, raises CuPy's
        CUDADriverError."""
        self._config.stream = stream or None
        launch = _launch_kernel_ex()
        status = (
            _NOT_SUPPORTED if launch is None else launch(ctypes.byref(self._config), self._function, self._params, None)
        )
        if status != 0:  # the backend's guard makes it this configuration's launch failure
            import cupy

            raise cupy.cuda.driver.CUDADriverError(status)


def _argument(value: Any) -> ctypes.Array[ctypes.c_char]:
    """A kernel argument's bytes as the driver reads them: a device array's pointer, a scalar's value."""
    data = getattr(value, "data", None)
    if data is not None and hasattr(data, "ptr"):  # a CuPy array
        raw = np.uint64(data.ptr).tobytes()
    elif isinstance(value, np.generic):
        raw = np.asarray(value).tobytes()
    else:
        raise TypeError(f"cannot pass a {type(value).__name__} to a kernel launched with attributes")
    return ctypes.create_string_buffer(raw, len(raw))
