"""The in-process recorder on launch records built in memory as CUPTI hands them over; the driver is a stand-in
(no GPU here): these tests check the struct layouts, both argument paths (`kernelParams` and the packed `extra`
buffer), the config structs of the `Ex` launches, counting, and the runtime launch that waits for its driver call."""

from __future__ import annotations

import ctypes
import importlib.util
import shutil
import struct
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from cutune.capture.log import read_log
from cutune.capture.run import INJECT_DIR

NAME = b"_Z12scale_kernelILi4EEvPfPKfi"
OUT, IN, N = 0x7F00_0000_0000, 0x7F00_0100_0000, 4096
LAYOUT = [(0, 8), (8, 8), (16, 4)]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cutune_intercept", INJECT_DIR / "cutune_intercept.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


m = _module()


class StandInDriver:
    """Answers as the CUDA driver would for two allocations, and knows one CUfunction."""

    def __init__(self, *, resolves_runtime: bool = True) -> None:
        self.resolves_runtime = resolves_runtime
        self.copies: list[tuple[int, int]] = []

    def function_of(self, launch: Any, cbid: int, runtime: bool) -> int | None:
        return launch.func if not runtime or self.resolves_runtime else None

    def name(self, func: int) -> str:
        return NAME.decode()

    def layout(self, func: int) -> list[tuple[int, int]]:
        return LAYOUT

    def extent(self, address: int) -> int | None:
        return {OUT: 1 << 20, IN: N * 4}.get(address)

    def copy(self, address: int, size: int) -> bytes:
        self.copies.append((address, size))
        return bytes(size)

    def capturing(self, stream: int) -> bool:
        return False

    def device_name(self) -> str:
        return "stand-in"


class Memory:
    """Keeps the ctypes objects a launch points into alive for the test."""

    def __init__(self) -> None:
        self.keep: list[Any] = []

    def __call__(self, obj: Any) -> int:
        self.keep.append(obj)
        return ctypes.addressof(obj)


def _kernel_params(mem: Memory, n: int = N) -> int:
    values = [ctypes.c_uint64(OUT), ctypes.c_uint64(IN), ctypes.c_int32(n)]
    return mem((ctypes.c_void_p * 3)(*[mem(v) for v in values]))


def _extra(mem: Memory, n: int = N) -> int:
    packed = ctypes.create_string_buffer(struct.pack("<QQi", OUT, IN, n), 20)
    size = ctypes.c_size_t(20)
    return mem((ctypes.c_void_p * 5)(m._BUFFER_POINTER, mem(packed), m._BUFFER_SIZE, mem(size), 0))


def _callback(mem: Memory, params: Any, *, site: int = 0, symbol: bytes | None = NAME) -> int:
    return mem(m.CallbackData(callbackSite=site, functionParams=mem(params), symbolName=symbol))


def _driver_launch(mem: Memory, *, extra: bool = False, grid: int = 16) -> int:
    params = m.DriverLaunch(f=0xF00, gx=grid, gy=1, gz=1, bx=256, by=1, bz=1, smem=0)
    if extra:
        params.extra = _extra(mem)
    else:
        params.params = _kernel_params(mem)
    return _callback(mem, params)


def test_driver_launches_by_kernel_params_and_by_extra_buffer_count_as_one_problem_with_stand_in_driver(
    tmp_path: Path,
) -> None:
    mem = Memory()
    rec = m.Recorder(str(tmp_path / "p.jsonl"), ["scale_kernel"], None, 1 << 20, StandInDriver())
    rec.on_callback(307, _driver_launch(mem), False)
    rec.on_callback(307, _driver_launch(mem, extra=True), False)
    config = m.DriverConfig(gx=16, gy=1, gz=1, bx=256, by=1, bz=1, smem=0)
    ex = m.DriverLaunchEx(config=mem(config), f=0xF00, params=0, extra=_extra(mem))
    rec.on_callback(652, _callback(mem, ex), False)
    rec.on_callback(307, _driver_launch(mem, grid=32), False)
    rec.flush()
    log = read_log(tmp_path / "p.jsonl")
    assert [(x.grid, x.count) for x in log.launches] == [((16, 1, 1), 3), ((32, 1, 1), 1)]
    first = log.launches[0]
    assert first.params is not None
    assert [p.extent for p in first.params] == [1 << 20, N * 4, None]
    assert struct.unpack("<i", first.params[2].raw) == (N,)


def test_a_runtime_launch_is_recorded_from_the_driver_launch_it_makes_under_its_own_name_with_stand_in_driver(
    tmp_path: Path,
) -> None:
    mem = Memory()
    rec = m.Recorder(str(tmp_path / "p.jsonl"), ["scale_kernel"], None, 1 << 20, StandInDriver(resolves_runtime=False))
    r = m.RuntimeLaunch(func=0xBAD, grid=m.Dim3(16, 1, 1), block=m.Dim3(256, 1, 1), args=_kernel_params(mem))
    for cbid in (211, 505):
        rec.on_callback(cbid, _callback(mem, r), True)
        rec.on_callback(
            307, _driver_launch(mem), False
        )  # the runtime's own driver call: recorded once, as the runtime's
        rec.on_callback(cbid, _callback(mem, r, site=1), True)
    rec.flush()
    [launch] = read_log(tmp_path / "p.jsonl").launches
    assert (launch.api, launch.count, launch.params is not None) == ("cudaLaunchKernel", 2, True)


def test_a_runtime_launch_without_a_driver_launch_reads_its_own_config_and_args_at_exit(tmp_path: Path) -> None:
    mem = Memory()
    rec = m.Recorder(str(tmp_path / "p.jsonl"), ["scale_kernel"], None, 1 << 20, StandInDriver())
    r = m.RuntimeLaunch(func=0xF00, grid=m.Dim3(8, 2, 1), block=m.Dim3(128, 1, 1), args=_kernel_params(mem), smem=64)
    rec.on_callback(505, _callback(mem, r), True)
    rec.on_callback(505, _callback(mem, r, site=1), True)
    config = m.RuntimeConfig(grid=m.Dim3(8, 2, 1), block=m.Dim3(128, 1, 1), smem=64)
    ex = m.RuntimeLaunchEx(config=mem(config), func=0xF00, args=_kernel_params(mem))
    rec.on_callback(430, _callback(mem, ex), True)
    rec.on_callback(430, _callback(mem, ex, site=1), True)
    rec.flush()
    [launch] = read_log(tmp_path / "p.jsonl").launches
    assert (launch.grid, launch.block, launch.smem, launch.count) == ((8, 2, 1), (128, 1, 1), 64, 2)
    assert launch.params is not None


def test_a_runtime_launch_the_driver_cannot_name_is_counted_without_arguments_with_stand_in_driver(
    tmp_path: Path,
) -> None:
    mem = Memory()
    rec = m.Recorder(str(tmp_path / "p.jsonl"), ["scale_kernel"], None, 1 << 20, StandInDriver(resolves_runtime=False))
    r = m.RuntimeLaunch(func=0xBAD, grid=m.Dim3(16, 1, 1), block=m.Dim3(256, 1, 1), args=_kernel_params(mem))
    rec.on_callback(211, _callback(mem, r), True)
    rec.on_callback(211, _callback(mem, r, site=1), True)
    rec.flush()
    [launch] = read_log(tmp_path / "p.jsonl").launches
    assert (launch.api, launch.count, launch.params is None) == ("cudaLaunchKernel", 1, True)


def test_data_snapshots_each_problems_buffers_once_before_it_runs_with_stand_in_driver(tmp_path: Path) -> None:
    mem = Memory()
    driver = StandInDriver()
    rec = m.Recorder(str(tmp_path / "p.jsonl"), ["scale_kernel"], str(tmp_path / "data"), 1024, driver)
    for _ in range(3):
        rec.on_callback(307, _driver_launch(mem), False)
    rec.flush()
    [launch] = read_log(tmp_path / "p.jsonl").launches
    assert driver.copies == [(OUT, 1024), (IN, 1024)]  # capped, and only at the problem's first launch
    assert launch.data is not None and sorted(launch.data.files) == [0, 1]
    assert (tmp_path / "data" / launch.data.folder / "0.bin").stat().st_size == 1024


def test_other_kernels_are_not_recorded(tmp_path: Path) -> None:
    mem = Memory()
    rec = m.Recorder(str(tmp_path / "p.jsonl"), ["cale_kernel"], None, 1, StandInDriver())
    rec.on_callback(307, _driver_launch(mem), False)
    assert rec.entries == {}


@pytest.mark.parametrize("cls", ["RuntimeLaunch", "DriverLaunch", "DriverConfig", "RuntimeConfig", "CallbackData"])
def test_struct_layouts_match_the_cuda_13_headers(cls: str) -> None:
    sizes = {"RuntimeLaunch": 56, "DriverLaunch": 64, "DriverConfig": 56, "RuntimeConfig": 56, "CallbackData": 72}
    assert ctypes.sizeof(getattr(m, cls)) == sizes[cls]


def test_the_recorder_loads_into_a_python_program_and_reports_what_keeps_it_from_starting(tmp_path: Path) -> None:
    """The injection path with no GPU: sitecustomize loads the recorder, which says why it cannot record
    (no cupti-python or no driver here), and the program runs as it would without capture."""
    import os
    import subprocess
    import sys

    from cutune.capture.log import merge_parts

    env = {**os.environ, "PYTHONPATH": str(INJECT_DIR), "CUTUNE_CAPTURE_OUT": str(tmp_path / "launches")}
    done = subprocess.run(
        [sys.executable, "-c", "import sys; print('ran', sys.argv)"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.startswith("ran"), done.stderr
    [part] = tmp_path.glob("launches.*.jsonl")
    log = merge_parts([part], command=["python"], data_dir=None)
    assert log.launches == () and log.failed and ("cupti" in log.failed[0] or "libcuda" in log.failed[0])


HARNESS = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 3; }
  int (*init)(void) = (int (*)(void))dlsym(lib, "InitializeInjection");
  printf("injected %d\n", init());
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_a_native_program_runs_the_same_recorder_in_an_embedded_python_called_as_the_driver_would(
    tmp_path: Path,
) -> None:
    """The injection library, called as the CUDA driver calls it at cuInit (here by a small C program: no driver
    on this machine), starts the recorder in an embedded Python, which says why it cannot record here."""
    import os
    import subprocess

    from cutune.capture.log import merge_parts
    from cutune.capture.run import injection_env, shared_libpython

    if shared_libpython() is None:
        pytest.skip("this Python has no shared libpython to embed")
    env = {**os.environ, **injection_env(tmp_path / "build"), "CUTUNE_CAPTURE_OUT": str(tmp_path / "launches")}
    (tmp_path / "harness.c").write_text(HARNESS)
    subprocess.run(["cc", "-o", str(tmp_path / "harness"), str(tmp_path / "harness.c"), "-ldl"], check=True)
    done = subprocess.run(
        [str(tmp_path / "harness"), env["CUDA_INJECTION64_PATH"]], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and "injected 1" in done.stdout, done.stderr
    [part] = tmp_path.glob("launches.*.jsonl")
    log = merge_parts([part], command=["harness"], data_dir=None)
    assert log.failed and ("cupti" in log.failed[0] or "libcuda" in log.failed[0])
