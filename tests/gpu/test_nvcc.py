from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cutune.errors import CompileError, SourceError
from cutune.gpu.compile import CompileJob, compile_many, compile_resources, first_error
from cutune.gpu.nvcc import have_nvcc, nvcc_version
from cutune.gpu.resources import ResourceUsage, parse_ptxas, pick_entry

DATA = Path(__file__).parent.parent / "data" / "gpu"

MULTI_DEMANGLED = {
    "_Z12tiled_kernelIdLi64EEvPT_": "void tiled_kernel<double, 64>(double*)",
    "_Z12tiled_kernelIfLi128EEvPT_": "void tiled_kernel<float, 128>(float*)",
    "_Z12scale_kernelPffi": "scale_kernel(float*, float, int)",
}

SCALE = """\
__global__ void scale_kernel(float* x, float a, int n) {
  __shared__ float buf[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (i < n) x[i] = a * buf[255 - threadIdx.x];
}
"""

# A buffer of N floats: N comes from a define, so each N is a different compile.
SIZED = """\
__global__ void sized_kernel(float* x) {
  __shared__ float buf[N];
  buf[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = buf[N - 1 - threadIdx.x];
}
"""


def _parsed(name: str) -> list[ResourceUsage]:
    return parse_ptxas((DATA / name).read_text())


# --- parsing captured reports ---------------------------------------------------------------------


def test_parse_a_multi_kernel_report_in_report_order():
    entries = _parsed("multi.sm_90.ptxas.txt")
    assert [(e.function, e.registers, e.barriers, e.shared_bytes) for e in entries] == [
        ("_Z12tiled_kernelIdLi64EEvPT_", 12, 1, 512),  # 64 doubles
        ("_Z12tiled_kernelIfLi128EEvPT_", 10, 1, 512),  # 128 floats
        ("add_coeffs", 8, 0, 0),
        ("_Z12scale_kernelPffi", 8, 1, 1024),  # 256 floats
    ]
    assert not any(e.spills or e.stack_bytes or e.constant_bytes for e in entries)


def test_parse_constant_banks_where_ptxas_reports_them():
    by_name = {e.function: e for e in _parsed("multi.sm_80.ptxas.txt")}
    assert by_name["add_coeffs"].constant_bytes == 364  # "364 bytes cmem[0]"
    assert by_name["_Z12scale_kernelPffi"].constant_bytes == 368


def test_parse_spills():
    [entry] = _parsed("spill.sm_90.ptxas.txt")
    assert entry.function == "_Z12spill_kernelPKfPfi"
    assert (entry.registers, entry.spill_store_bytes, entry.spill_load_bytes) == (32, 508, 512)
    assert entry.stack_bytes == 272
    assert entry.spills


def test_parse_takes_the_cumulative_stack_and_skips_device_functions():
    [entry] = _parsed("callee.sm_90.ptxas.txt")
    assert (entry.function, entry.registers, entry.stack_bytes) == ("_Z13caller_kernelPfi", 32, 128)
    # With -rdc the callee's 136-byte frame is reported before the entry; it is not the kernel's.
    [rdc] = _parsed("callee.sm_90.rdc.ptxas.txt")
    assert (rdc.function, rdc.registers, rdc.stack_bytes) == ("_Z13caller_kernelPfi", 24, 0)


def test_parse_an_empty_report():
    assert parse_ptxas("") == []


# --- picking the kernel ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kernel", "expected"),
    [
        ("scale_kernel", "_Z12scale_kernelPffi"),
        ("add_coeffs", "add_coeffs"),
        ("tiled_kernel<float, 128>", "_Z12tiled_kernelIfLi128EEvPT_"),
        ("tiled_kernel<double,64>", "_Z12tiled_kernelIdLi64EEvPT_"),
        ("_Z12scale_kernelPffi", "_Z12scale_kernelPffi"),
        ("scale", "_Z12scale_kernelPffi"),  # a substring, when no name matches exactly
    ],
)
def test_pick_entry_by_name(kernel, expected):
    assert pick_entry(_parsed("multi.sm_90.ptxas.txt"), kernel, MULTI_DEMANGLED).function == expected


def test_pick_entry_prefers_an_exact_name_over_substrings():
    entries = [ResourceUsage("_Z12scale_kernelPf", 8), ResourceUsage("_Z5scalePf", 9)]
    demangled = {"_Z12scale_kernelPf": "scale_kernel(float*)", "_Z5scalePf": "scale(float*)"}
    assert pick_entry(entries, "scale", demangled).registers == 9


def test_pick_entry_without_demangled_names_matches_mangled_substrings():
    entries = _parsed("multi.sm_90.ptxas.txt")
    assert pick_entry(entries, "scale_kernel").function == "_Z12scale_kernelPffi"


def test_pick_entry_reports_ambiguity_with_the_candidates():
    with pytest.raises(SourceError, match=r"matches 2 kernels.*tiled_kernel<double, 64>.*tiled_kernel<float, 128>"):
        pick_entry(_parsed("multi.sm_90.ptxas.txt"), "tiled_kernel", MULTI_DEMANGLED)


def test_pick_entry_reports_a_missing_kernel_with_the_ones_there():
    with pytest.raises(SourceError, match=r"no kernel named 'rmsnorm'.*scale_kernel\(float\*, float, int\)"):
        pick_entry(_parsed("multi.sm_90.ptxas.txt"), "rmsnorm", MULTI_DEMANGLED)


def test_pick_entry_without_a_name_needs_a_single_kernel():
    [only] = _parsed("spill.sm_90.ptxas.txt")
    assert pick_entry([only], None) is only
    with pytest.raises(SourceError, match="has 4 kernels"):
        pick_entry(_parsed("multi.sm_90.ptxas.txt"), None)
    with pytest.raises(SourceError, match="has 0 kernels"):
        pick_entry([], None)


@pytest.mark.parametrize("root", ["/work/main", "/check/work/main/deeper/still/deeper"])
def test_first_error_cuts_the_message_never_its_location(root):
    # a deep header's path once pushed the message past the cut ("has no member" lost what it had no member of)
    message = 'error: namespace "std" has no member "x"'
    said = first_error(f"{root}/include/flashinfer/attention/../exception.h(74): {message}")
    assert said == f"{root}/include/flashinfer/exception.h(74): {message}"
    assert first_error("k.cu(3): error: " + "y" * 400) == "k.cu(3): " + ("error: " + "y" * 400)[:160]
    assert first_error("nvcc fatal   : Unknown option '-foo'\nmore") == "nvcc fatal   : Unknown option '-foo'"


def test_a_missing_nvcc_is_a_compile_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not have_nvcc()
    assert nvcc_version() is None
    with pytest.raises(CompileError, match="nvcc is not on PATH"):
        compile_resources(SCALE)


# --- real compiles --------------------------------------------------------------------------------


@pytest.mark.nvcc
def test_nvcc_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", nvcc_version() or "")


@pytest.mark.nvcc
def test_compile_a_small_kernel():
    usage = compile_resources(SCALE, arch="sm_90")
    print(f"one nvcc compile: {usage.compile_seconds:.2f} s")
    assert usage.function == "_Z12scale_kernelPffi"
    assert usage.registers > 0
    assert usage.shared_bytes == 256 * 4
    assert not usage.spills
    assert not usage.cached
    assert usage.compile_seconds > 0
    assert "Compiling entry function '_Z12scale_kernelPffi' for 'sm_90'" in usage.log


@pytest.mark.nvcc
def test_compile_picks_a_template_instance():
    source = """\
template <typename T, int N>
__global__ void tiled(T* x) {
  __shared__ T tile[N];
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = tile[N - 1 - threadIdx.x];
}
static auto* p = &tiled<float, 128>;
static auto* q = &tiled<double, 256>;
"""
    floats = compile_resources(source, kernel="tiled<float, 128>")
    doubles = compile_resources(source, kernel="tiled<double, 256>")
    assert (floats.function, floats.shared_bytes) == ("_Z5tiledIfLi128EEvPT_", 128 * 4)
    assert (doubles.function, doubles.shared_bytes) == ("_Z5tiledIdLi256EEvPT_", 256 * 8)
    with pytest.raises(SourceError, match="matches 2 kernels"):
        compile_resources(source, kernel="tiled")


@pytest.mark.nvcc
def test_compile_with_defines_includes_and_flags(tmp_path):
    (tmp_path / "tile.h").write_text("#define N 64\n")
    usage = compile_resources('#include "tile.h"\n' + SIZED, include_dirs=[tmp_path], flags=["-maxrregcount=16"])
    assert usage.shared_bytes == 64 * 4
    assert usage.registers <= 16
    assert compile_resources(SIZED, defines={"N": "512"}).shared_bytes == 512 * 4


@pytest.mark.nvcc
def test_a_user_std_flag_replaces_the_default():
    source = (
        "template <typename T> concept Small = sizeof(T) <= 4;\n"
        "template <Small T> __global__ void k(T* x) { x[0] = T(1); }\n"
        "template __global__ void k<float>(float*);\n"
    )
    usage = compile_resources(source, flags=["-std=c++20"])
    assert usage.function == "_Z1kIfEvPT_"
    assert "redefinition" not in usage.log


@pytest.mark.nvcc
def test_a_syntax_error_is_a_compile_error_with_its_line():
    source = "__global__ void k(float* x) {\n  int unused = 1;\n  x[0] = 1.f\n}\n"
    with pytest.raises(CompileError) as caught:
        compile_resources(source)
    message = str(caught.value)
    assert "unit.cu(4): error" in message  # the missing ';' is found at the next line's '}'
    assert "could not compile" in message
    assert "warning" not in caught.value.log  # the unused variable's warning is filtered out


@pytest.mark.nvcc
def test_a_compile_past_its_timeout_is_a_compile_error():
    with pytest.raises(CompileError, match=r"timed out after 0\.01 s"):
        compile_resources(SCALE, timeout=0.01)


@pytest.mark.nvcc
def test_the_cache_answers_repeated_checks_across_processes(tmp_path):
    first = compile_resources(SCALE, cache_dir=tmp_path)
    again = compile_resources(SCALE, cache_dir=tmp_path)
    assert (first.cached, again.cached) == (False, True)
    assert (again.registers, again.shared_bytes, again.log) == (first.registers, 1024, first.log)
    assert again.compile_seconds == first.compile_seconds  # the original compile's time is kept
    assert not compile_resources(SCALE, arch="sm_80", cache_dir=tmp_path).cached  # a different key
    assert len(list(tmp_path.glob("*.json"))) == 2

    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from cutune.gpu.compile import compile_resources\n"
        "u = compile_resources(sys.argv[1], cache_dir=Path(sys.argv[2]))\n"
        "print(json.dumps([u.cached, u.registers]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, SCALE, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(done.stdout) == [True, first.registers]


@pytest.mark.nvcc
def test_compile_many_keeps_order_and_returns_errors():
    sizes = [32, 64, 96, 128, 160, 192, 224, 256]
    jobs = [CompileJob(SIZED, defines=(("N", str(n)),)) for n in sizes]
    jobs.append(CompileJob("__global__ void broken( {}\n"))
    finished: list[int] = []

    start = time.perf_counter()
    results = compile_many(jobs, on_done=lambda i, _: finished.append(i))
    parallel = time.perf_counter() - start
    start = time.perf_counter()
    sequential = compile_many(jobs, workers=1)
    print(f"{len(jobs)} compiles: {parallel:.2f} s in parallel, {time.perf_counter() - start:.2f} s one by one")

    assert [r.shared_bytes for r in results[:8] if isinstance(r, ResourceUsage)] == [4 * n for n in sizes]
    assert isinstance(results[8], CompileError)
    assert "unit.cu(1)" in str(results[8])
    assert sorted(finished) == list(range(9))
    assert [getattr(r, "shared_bytes", None) for r in sequential] == [getattr(r, "shared_bytes", None) for r in results]
