"""Records the kernel launches of the process it is loaded into (CUPTI callbacks), for `cutune capture`.

Loaded by the `sitecustomize.py` beside it, in the user's own Python, or by `embed.c` (the injection library of
programs that are not Python) in an embedded one: it imports only the standard library and CUPTI's Python
bindings (`cupti-python`), never cutune (whose dependencies that Python may lack).
Driver calls go through ctypes on the process's own `libcuda`, so no other binding is needed.

Each distinct launch (kernel, grid, block, dynamic shared memory, scalar argument bytes) is one JSON line
with how many times it happened; pointer arguments are recorded as the bytes left in their allocation
(`cuMemGetAddressRange`), the smallest seen. The file is rewritten atomically as new launches appear and at
exit, so a killed program keeps what it launched up to the last write.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import json
import os
import re
import sys
import threading
import time
from typing import Any

FORMAT = "cutune-capture"
VERSION = 1
FLUSH_SECONDS = 1.0

# CUPTI callback ids (cupti_driver_cbid.h / cupti_runtime_cbid.h; ids never change between versions)
DRIVER = {307: "cuLaunchKernel", 442: "cuLaunchKernel_ptsz", 477: "cuLaunchCooperativeKernel",
          652: "cuLaunchKernelEx", 653: "cuLaunchKernelEx_ptsz"}  # fmt: skip
RUNTIME = {211: "cudaLaunchKernel", 214: "cudaLaunchKernel_ptsz", 269: "cudaLaunchCooperativeKernel",
           270: "cudaLaunchCooperativeKernel_ptsz", 430: "cudaLaunchKernelExC", 431: "cudaLaunchKernelExC_ptsz",
           505: "__cudaLaunchKernel", 506: "__cudaLaunchKernel_ptsz"}  # fmt: skip
RUNTIME_KERNEL_HANDLE = {505, 506}  # `<<<>>>` since CUDA 13: the first parameter is a cudaKernel_t (a CUkernel)
RUNTIME_EX = {430, 431}
DRIVER_EX = {652, 653}
DRIVER_NO_EXTRA = {477}

_BUFFER_POINTER, _BUFFER_SIZE = 1, 2  # CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE keys of a launch's `extra`

_u32, _ptr, _size = ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t


class CallbackData(ctypes.Structure):
    """CUpti_CallbackData (cupti_callbacks.h)."""

    _fields_ = [("callbackSite", ctypes.c_int), ("functionName", ctypes.c_char_p), ("functionParams", _ptr),
                ("functionReturnValue", _ptr), ("symbolName", ctypes.c_char_p), ("context", _ptr),
                ("contextUid", _u32), ("correlationData", _ptr), ("correlationId", _u32)]  # fmt: skip


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class RuntimeLaunch(ctypes.Structure):
    """cudaLaunchKernel_v7000_params (also cooperative and `__cudaLaunchKernel`, whose func is a kernel handle)."""

    _fields_ = [("func", _ptr), ("grid", Dim3), ("block", Dim3), ("args", _ptr), ("smem", _size), ("stream", _ptr)]


class RuntimeLaunchEx(ctypes.Structure):
    """cudaLaunchKernelExC_v11060_params."""

    _fields_ = [("config", _ptr), ("func", _ptr), ("args", _ptr)]


class RuntimeConfig(ctypes.Structure):
    """cudaLaunchConfig_t."""

    _fields_ = [("grid", Dim3), ("block", Dim3), ("smem", _size), ("stream", _ptr), ("attrs", _ptr),
                ("numAttrs", ctypes.c_uint)]  # fmt: skip


class DriverLaunch(ctypes.Structure):
    """cuLaunchKernel_params (cooperative launches have the same fields without `extra`)."""

    _fields_ = [("f", _ptr), ("gx", _u32), ("gy", _u32), ("gz", _u32), ("bx", _u32), ("by", _u32), ("bz", _u32),
                ("smem", _u32), ("stream", _ptr), ("params", _ptr), ("extra", _ptr)]  # fmt: skip


class DriverLaunchEx(ctypes.Structure):
    """cuLaunchKernelEx_params."""

    _fields_ = [("config", _ptr), ("f", _ptr), ("params", _ptr), ("extra", _ptr)]


class DriverConfig(ctypes.Structure):
    """CUlaunchConfig."""

    _fields_ = [("gx", _u32), ("gy", _u32), ("gz", _u32), ("bx", _u32), ("by", _u32), ("bz", _u32),
                ("smem", _u32), ("stream", _ptr), ("attrs", _ptr), ("numAttrs", ctypes.c_uint)]  # fmt: skip


class Launch:
    """One launch as read from a callback: what a log line needs, before counting."""

    def __init__(self, api: str, func: int | None, name: str, grid: tuple[int, ...], block: tuple[int, ...],
                 smem: int, params: int, extra: int, stream: int | None = None) -> None:  # fmt: skip
        self.api, self.func, self.name = api, func, name
        self.grid, self.block, self.smem = grid, block, smem
        self.params, self.extra = params, extra  # kernelParams (void**) and extra (void**) addresses, 0 if none
        self.stream = stream or 0
        self.served = False  # a runtime launch: whether a driver launch it made was recorded in its place


def read_launch(cbid: int, runtime: bool, address: int) -> Launch:
    """The launch a callback's `functionParams` (at `address`) describes; `func` is a CUfunction for driver
    launches, a kernel handle for `__cudaLaunchKernel`, a host stub for the other runtime launches."""
    if runtime and cbid in RUNTIME_EX:
        ex = RuntimeLaunchEx.from_address(address)
        c = RuntimeConfig.from_address(ex.config)
        return Launch(RUNTIME[cbid], ex.func, "", _dims(c.grid), _dims(c.block), c.smem, ex.args or 0, 0, c.stream)
    if runtime:
        r = RuntimeLaunch.from_address(address)
        return Launch(RUNTIME[cbid], r.func, "", _dims(r.grid), _dims(r.block), r.smem, r.args or 0, 0, r.stream)
    if cbid in DRIVER_EX:
        dx = DriverLaunchEx.from_address(address)
        d = DriverConfig.from_address(dx.config)
        grid, block = (d.gx, d.gy, d.gz), (d.bx, d.by, d.bz)
        return Launch(DRIVER[cbid], dx.f, "", grid, block, d.smem, dx.params or 0, dx.extra or 0, d.stream)
    dl = DriverLaunch.from_address(address)
    extra = 0 if cbid in DRIVER_NO_EXTRA else (dl.extra or 0)
    grid, block = (dl.gx, dl.gy, dl.gz), (dl.bx, dl.by, dl.bz)
    return Launch(DRIVER[cbid], dl.f, "", grid, block, dl.smem, dl.params or 0, extra, dl.stream)


def _dims(d: Dim3) -> tuple[int, int, int]:
    return (d.x, d.y, d.z)


def param_bytes(launch: Launch, layout: list[tuple[int, int]]) -> list[bytes]:
    """Each parameter's bytes, from `kernelParams` (one pointer per parameter) or the packed `extra` buffer."""
    if launch.params:
        pointers = (ctypes.c_void_p * len(layout)).from_address(launch.params)
        if not all(pointers):  # a launch that lists fewer arguments than the function has: not read
            return []
        return [ctypes.string_at(pointers[i] or 0, size) for i, (_, size) in enumerate(layout)]
    buffer = _extra_buffer(launch.extra) if launch.extra else None
    if buffer is None:
        return []
    base, length = buffer
    return [ctypes.string_at(base + off, size) for off, size in layout if off + size <= length]


def _extra_buffer(extra: int) -> tuple[int, int] | None:
    """The (address, size) of the argument buffer a launch's `extra` list points to."""
    items = ctypes.cast(extra, ctypes.POINTER(ctypes.c_void_p))
    base = length = None
    for i in range(0, 64, 2):  # key/value pairs ending with CU_LAUNCH_PARAM_END (0)
        key = items[i] or 0
        if key == 0:
            break
        if key == _BUFFER_POINTER:
            base = items[i + 1]
        elif key == _BUFFER_SIZE:
            length = ctypes.c_size_t.from_address(items[i + 1]).value
    return (base, length if length is not None else 1 << 30) if base else None


class Driver:
    """The few driver calls the recorder makes, through ctypes on libcuda."""

    def __init__(self) -> None:
        self.cuda = ctypes.CDLL("libcuda.so.1")

    def function_of(self, launch: Launch, cbid: int, runtime: bool) -> int | None:
        """The CUfunction a launch runs, or None where only the runtime could tell. Only driver calls: a runtime
        call made from a callback would set that runtime's last error, which the program's launch check reads."""
        if not runtime:
            return launch.func
        if cbid not in RUNTIME_KERNEL_HANDLE or not launch.func:
            return None
        f = ctypes.c_void_p()
        return f.value if self.cuda.cuKernelGetFunction(ctypes.byref(f), ctypes.c_void_p(launch.func)) == 0 else None

    def name(self, func: int) -> str:
        name = ctypes.c_char_p()
        ok = self.cuda.cuFuncGetName(ctypes.byref(name), ctypes.c_void_p(func)) == 0
        return name.value.decode("utf-8", "replace") if ok and name.value else ""

    def layout(self, func: int) -> list[tuple[int, int]]:
        """(offset, size) of every parameter of a function: `cuFuncGetParamInfo`, or `cuKernelGetParamInfo` where
        the launch passed a CUkernel as its CUfunction (as the CUDA 13 runtime does for the kernels it registers)."""
        return self._params(self.cuda.cuFuncGetParamInfo, func) or self._params(self.cuda.cuKernelGetParamInfo, func)

    @staticmethod
    def _params(get: Any, handle: int) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        offset, size = ctypes.c_size_t(), ctypes.c_size_t()
        while (
            len(out) < 4096
            and get(ctypes.c_void_p(handle), ctypes.c_size_t(len(out)), ctypes.byref(offset), ctypes.byref(size)) == 0
        ):
            out.append((offset.value, size.value))
        return out

    def extent(self, address: int) -> int | None:
        """Bytes from `address` to the end of its device allocation; None when it is no device address."""
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        if self.cuda.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(address)) != 0:
            return None
        return base.value + size.value - address

    def copy(self, address: int, size: int) -> bytes | None:
        """`size` bytes of device memory, after the work queued before it finished; None on failure."""
        self.cuda.cuCtxSynchronize()
        buffer = ctypes.create_string_buffer(size)
        return (
            buffer.raw
            if self.cuda.cuMemcpyDtoH_v2(buffer, ctypes.c_uint64(address), ctypes.c_size_t(size)) == 0
            else None
        )

    def capturing(self, stream: int) -> bool:
        """Whether `stream` is being captured into a CUDA graph (a synchronisation would break the capture)."""
        status = ctypes.c_int()
        if self.cuda.cuStreamIsCapturing(ctypes.c_void_p(stream), ctypes.byref(status)) != 0:
            return True  # unknown: do not risk the program's capture
        return status.value != 0

    def device_name(self) -> str:
        dev, name = ctypes.c_int(), ctypes.create_string_buffer(256)
        if self.cuda.cuCtxGetDevice(ctypes.byref(dev)) != 0 or self.cuda.cuDeviceGetName(name, 256, dev) != 0:
            return ""
        return name.value.decode("utf-8", "replace")


class Recorder:
    """Counts distinct launches of the wanted kernels and writes them as JSON lines."""

    def __init__(self, out: str, kernels: list[str], data_dir: str | None, data_cap: int, driver: Any) -> None:
        self.out, self.data_dir, self.data_cap, self.driver = out, data_dir, data_cap, driver
        # a kernel `k` appears in a mangled name as its length and name (`_ZN4vllm8rms_normIfEEv...`), or as is
        self.wanted = [re.compile(rf"(?<![0-9]){len(k)}{re.escape(k)}|^{re.escape(k)}$") for k in kernels]
        self.entries: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.local = threading.local()
        self.last_flush = 0.0
        self.device = ""
        self.errors: list[str] = []
        self.runtime_domain = -1  # CUPTI's id of the runtime API domain, set by `start`

    def wants(self, name: str) -> bool:
        return not self.wanted or any(w.search(name) for w in self.wanted)

    def on_callback(self, cbid: int, address: int, runtime: bool) -> None:
        """A launch callback: record at entry (before the kernel runs, so snapshots hold its inputs).

        A runtime launch is recorded from the driver launch it makes (which names the function and lists the
        arguments), under the runtime call's name; one that makes none is recorded at its exit from what the
        runtime call itself says."""
        data = CallbackData.from_address(address)
        stack: list[Launch] = self.local.__dict__.setdefault("runtime", [])
        symbol = (data.symbolName or b"").decode("utf-8", "replace")
        if runtime:
            if data.callbackSite == 0:
                launch = read_launch(cbid, True, data.functionParams)
                launch.name = symbol
                stack.append(launch)
                _trace("runtime enter", cbid, symbol, launch)
            elif stack:
                pending = stack.pop()
                _trace("runtime exit", cbid, symbol, pending)
                if not pending.served and self.wants(pending.name or symbol):
                    func = self.driver.function_of(pending, cbid, True)
                    pending.name = pending.name or (self.driver.name(func) if func else "")
                    if pending.name and self.wants(pending.name):
                        with self.lock:
                            self.record(pending, func, snapshot=False)  # the kernel may have run: no inputs to keep
            return
        if data.callbackSite != 0:
            return
        caller = stack[-1] if stack else None
        if caller is not None:
            caller.served = True
        if symbol and not self.wants(symbol):  # the program's other kernels cost no more than this
            return
        launch = read_launch(cbid, False, data.functionParams)
        launch.name = symbol or (self.driver.name(launch.func) if launch.func else "")
        if caller is not None:
            launch.api = caller.api
        _trace("driver", cbid, symbol, launch)
        if launch.name and self.wants(launch.name):
            with self.lock:
                self.record(launch, launch.func)

    def record(self, launch: Launch, func: int | None, *, snapshot: bool = True) -> None:
        layout = self.driver.layout(func) if func else []
        values = param_bytes(launch, layout) if layout else []
        params: list[dict[str, Any]] | None = None
        key_params: tuple[Any, ...] = ("unknown",)
        if values and len(values) == len(layout):
            params, key_parts = [], []
            for (offset, size), raw in zip(layout, values, strict=True):
                extent = self.driver.extent(int.from_bytes(raw, "little")) if size == 8 and any(raw) else None
                params.append({"offset": offset, "size": size, "hex": raw.hex(), "extent": extent})
                key_parts.append("ptr" if extent is not None else raw.hex())
            key_params = tuple(key_parts)
        key = (launch.name, launch.grid, launch.block, launch.smem, key_params)
        entry = self.entries.get(key)
        if entry is None:
            if not self.device:
                self.device = self.driver.device_name()
            entry = {"name": launch.name, "api": launch.api, "grid": list(launch.grid), "block": list(launch.block),
                     "smem": launch.smem, "layout": "cuFuncGetParamInfo" if params is not None else None,
                     "params": params, "count": 0}  # fmt: skip
            if params is None:
                entry["why"] = (
                    "no parameter layout (the launched function was not found)" if not func
                    else "the driver gave no parameter layout for the function" if not layout
                    else "the launch passed no argument list"
                )  # fmt: skip
            self.entries[key] = entry
            if self.data_dir and params is not None and snapshot and not self.driver.capturing(launch.stream):
                entry["data"] = self.snapshot(key, params)
            self.flush(force=time.monotonic() - self.last_flush > FLUSH_SECONDS)
        elif params is not None:
            for kept, new in zip(entry["params"], params, strict=True):  # the smallest allocation seen bounds the array
                if kept["extent"] is not None and new["extent"] is not None:
                    kept["extent"] = min(kept["extent"], new["extent"])
        entry["count"] += 1

    def snapshot(self, key: tuple[Any, ...], params: list[dict[str, Any]]) -> dict[str, Any]:
        """Copy every pointer argument's buffer (up to the cap) before the launch: the kernel's real inputs."""
        assert self.data_dir is not None
        problem = hashlib.sha1(repr(key).encode()).hexdigest()[:16]
        folder = os.path.join(self.data_dir, problem)
        os.makedirs(folder, exist_ok=True)
        files: dict[str, Any] = {"dir": problem, "files": {}, "cap": self.data_cap}
        for i, p in enumerate(params):
            if p["extent"] is None:
                continue
            size = min(p["extent"], self.data_cap)
            raw = self.driver.copy(int.from_bytes(bytes.fromhex(p["hex"]), "little"), size)
            if raw is None:
                continue
            name = f"{i}.bin"
            with open(os.path.join(folder, name), "wb") as f:
                f.write(raw)
            files["files"][str(i)] = {"file": name, "bytes": size}
        return files

    def flush(self, force: bool = True) -> None:
        """Rewrite the file: a header line, then one line per distinct launch."""
        if not force:
            return
        self.last_flush = time.monotonic()
        argv = list(getattr(sys, "argv", []))  # not yet set while sitecustomize runs, in some Pythons
        header = {"format": FORMAT, "version": VERSION, "pid": os.getpid(), "device": self.device,
                  "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "argv": argv,
                  "errors": self.errors}  # fmt: skip
        tmp = f"{self.out}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(header) + "\n")
            for entry in self.entries.values():
                f.write(json.dumps(entry) + "\n")
        os.replace(tmp, self.out)


_RECORDER: list[Recorder] = []  # the process's recorder, once started


_TRACE = [int(os.environ.get("CUTUNE_CAPTURE_TRACE", "0") or 0)]


def _trace(what: str, cbid: int, symbol: str, launch: Launch) -> None:
    """With CUTUNE_CAPTURE_TRACE=N, the first N callbacks on stderr (what a launch path passes, for diagnosis)."""
    if _TRACE[0] > 0:
        _TRACE[0] -= 1
        print(f"cutune capture: {what} cbid={cbid} symbol={symbol[:60]!r} api={launch.api} func={launch.func or 0:#x} "
              f"grid={launch.grid} params={launch.params:#x} extra={launch.extra:#x}", file=sys.stderr)  # fmt: skip


def flush() -> None:
    """Write the recorder's counts now (the injection library calls this at exit: an embedded interpreter never
    runs Python's exit handlers)."""
    for recorder in _RECORDER:
        recorder.flush()


def start() -> Recorder | None:
    """Subscribe to the launch callbacks as `CUTUNE_CAPTURE_*` says; None where capture is not asked for."""
    prefix = os.environ.get("CUTUNE_CAPTURE_OUT")
    if not prefix:
        return None
    out = f"{prefix}.{os.getpid()}.jsonl"
    kernels = [k for k in os.environ.get("CUTUNE_CAPTURE_KERNELS", "").split(",") if k]
    data_dir = os.environ.get("CUTUNE_CAPTURE_DATA") or None
    cap = int(os.environ.get("CUTUNE_CAPTURE_DATA_CAP", str(64 << 20)))
    try:
        from cupti import cupti  # type: ignore[import-not-found]  # in the program's environment, not cutune's

        recorder = Recorder(out, kernels, data_dir, cap, Driver())
        subscriber = cupti.subscribe(_callback, recorder)
        for domain, ids in ((cupti.CallbackDomain.DRIVER_API, DRIVER), (cupti.CallbackDomain.RUNTIME_API, RUNTIME)):
            for cbid in ids:
                try:
                    cupti.enable_callback(1, subscriber, domain, cbid)
                except Exception as e:  # an id this CUPTI does not know: that launch path does not exist there
                    recorder.errors.append(f"{ids[cbid]}: {e}")
        recorder.runtime_domain = int(cupti.CallbackDomain.RUNTIME_API)
    except Exception as e:  # report it to `cutune capture` instead of breaking the user's program
        _write_failure(out, f"{type(e).__name__}: {e}")
        return None
    _RECORDER.append(recorder)
    atexit.register(recorder.flush)
    recorder.flush()
    return recorder


def _callback(recorder: Recorder, domain: int, cbid: int, cbdata: Any) -> None:
    try:
        address = cbdata.ptr if isinstance(getattr(cbdata, "ptr", None), int) else int(cbdata)
        recorder.on_callback(int(cbid), address, int(domain) == recorder.runtime_domain)
    except Exception as e:  # never break the user's program; the first few reasons reach the log
        if len(recorder.errors) < 20:
            recorder.errors.append(f"{type(e).__name__}: {e}")


def _write_failure(out: str, message: str) -> None:
    header = {"format": FORMAT, "version": VERSION, "pid": os.getpid(), "errors": [message], "failed": True}
    with open(out, "w", encoding="utf-8") as f:
        f.write(json.dumps(header) + "\n")
