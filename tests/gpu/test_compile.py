"""One compiler rule: what `check` compiles is what tune's backend compiles (same compiler, unit and options),
on the failure shapes of production files: a project header that includes <cuda.h>, `std::enable_if_t` in a
return type, <cub/cub.cuh> under nvcc, torch reached only through a project header (with and without
PyTorch), a 16-byte-pack kernel. Real tree-sitter, real nvcc and NVRTC; the backend's compile path runs in
its compile-only form (`JobBuilder`: CuPy only loads what it returns)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cutune.check import check_kernel
from cutune.cuda.torch_types import TORCH_ENV, UNDEFINES, torch_include_dirs
from cutune.gpu.build import JobBuilder, kernel_request
from cutune.gpu.compile import compile_kernel
from cutune.gpu.compile_cache import CompileCache
from cutune.gpu.compiler import Compiled, KernelRequest, Target
from cutune.gpu.resources import parse_ptxas
from cutune.project import KernelContext, build_job, open_kernel
from cutune.spec.ragged import ragged_sizes
from cutune.template.model import Config

pytestmark = pytest.mark.nvcc

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "compile"
# a CPU build of PyTorch kept apart from the test environment (scripts/test.sh installs it there)
TORCH_SITE = ROOT / ".cutune" / "torch-site" / "torch"
SHAPES = {
    "driver_header": ("silu.cu", "silu_kernel"),
    "driver_types_header": ("twice.cu", "twice_kernel"),
    "enable_if": ("convert.cu", "to_float_kernel"),
    "cub_nvcc": ("row_sum.cu", "row_sum_kernel"),
    "torch_header": ("scale_bf16.cu", "scale_bf16_kernel"),
    "torch_tensor_header": ("channel_scale.cuh", "channel_scale_kernel"),
    "ragged_packs": ("pack_scale.cu", "pack_scale_kernel"),
    "overloads": ("dequantize.cu", "dequantize_kernel"),
}


def shape(name: str) -> KernelContext:
    file, kernel = SHAPES[name]
    return open_kernel(DATA / name / file, kernel)


@pytest.fixture
def without_torch(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Build as where PyTorch is not importable (whether or not this environment has it)."""
    monkeypatch.setenv(TORCH_ENV, "")
    torch_include_dirs.cache_clear()
    yield
    torch_include_dirs.cache_clear()


@pytest.fixture
def with_torch(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Build with PyTorch's headers: the CPU build beside the repository, else the importable one."""
    if TORCH_SITE.is_dir():
        monkeypatch.setenv(TORCH_ENV, str(TORCH_SITE))
    torch_include_dirs.cache_clear()
    if not torch_include_dirs():
        pytest.skip("PyTorch is not installed (scripts/test.sh puts a CPU build in .cutune/torch-site)")
    yield
    torch_include_dirs.cache_clear()


def backend_compile(
    ctx: KernelContext, config: Config, compiler: str, cache: CompileCache | None = None
) -> tuple[Compiled, str]:
    """What tune's worker compiles for `config` (the spec's sizes and the ragged ones, as the backend checks
    them), and the name expression of the first size (the one `check` compiles)."""
    job = build_job(ctx)
    builder = JobBuilder(job, arch="sm_90", compiler=compiler, cache=cache)
    sizes = [*job.spec.sizes, *(r.size for r in ragged_sizes(job.spec))]
    key, per_size = builder.key(config, sizes)
    return builder.compile(key), per_size[0]


def assert_both_compile(ctx: KernelContext) -> None:
    """NVRTC and nvcc each compile the kernel's default configuration to a kernel that uses registers."""
    for compiler in ("nvrtc", "nvcc"):
        compiled, first = backend_compile(ctx, ctx.space.default(), compiler)
        assert compiled.kernel(first).resources.registers > 0, compiler


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_what_check_compiles_is_what_the_backend_compiles(name: str, without_torch: None, tmp_path: Path) -> None:
    ctx = shape(name)
    report = check_kernel(ctx, limit=2, cache_dir=tmp_path)  # one cache: an identical compile is not repeated
    assert report.rows and all(r.feasible for r in report.rows), [r.problem for r in report.rows]
    for row in report.rows:
        compiled, first = backend_compile(ctx, row.config, "auto", CompileCache(tmp_path))
        assert compiled.compiler == row.compiler
        assert compiled.kernel(first).build == row.build  # same compiler, options and unit source
        assert compiled.kernel(first).resources.registers == row.usage.registers  # type: ignore[union-attr]


def test_a_header_that_includes_cuda_h_and_standard_headers_compiles_with_nvrtc_through_stand_ins(
    without_torch: None,
) -> None:
    # NVRTC cannot read <cuda.h> (it needs <stdlib.h>) nor the standard headers: stand-ins give the header its
    # CUDA_VERSION (the helper the kernel uses is defined under it), INFINITY, uint32_t and std::is_floating_point
    ctx = shape("driver_header")
    report = check_kernel(ctx, limit=1)
    assert report.rows[0].compiler == "nvrtc" and not report.fallback
    notes = " ".join(build_request(ctx).make_unit((), True).notes)
    assert "<cuda.h>, <cuda_runtime.h> stood in for by their version macros" in notes
    assert "<stdint.h>, <type_traits>, included by project headers, stood in for by CCCL's" in notes
    assert compile_kernel(build_request(ctx), Target("sm_90"), "nvcc").kernels[0].resources.registers > 0


def test_stand_ins_that_cannot_be_written_leave_the_compile_to_nvcc_saying_why(
    without_torch: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a file where the stand-ins' folder goes: the temporary folder cannot take them (as when read-only or full)
    (tmp_path / "cutune-stand-ins").write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ctx = shape("driver_header")
    notes = " ".join(build_request(ctx).make_unit((), True).notes)
    assert f"not done, {tmp_path} cannot be written" in notes and "stood in for by their version macros" in notes
    compiled, _ = backend_compile(ctx, ctx.space.default(), "auto")
    assert compiled.compiler == "nvcc" and "cannot be written" in compiled.fallback


def test_a_header_whose_code_takes_the_driver_apis_types_compiles_with_nvcc_saying_why(without_torch: None) -> None:
    ctx = shape("driver_types_header")
    compiled, _ = backend_compile(ctx, ctx.space.default(), "auto")
    assert compiled.compiler == "nvcc" and "CUresult" in compiled.fallback


def test_enable_if_t_in_a_return_type_compiles_with_nvrtc(without_torch: None) -> None:
    ctx = shape("enable_if")
    (row,) = check_kernel(ctx, limit=1, compiler="nvrtc").rows
    assert row.feasible and row.compiler == "nvrtc", row.problem
    assert check_kernel(ctx, limit=1).fallback == ""  # auto keeps NVRTC


def test_cub_under_nvcc_loads_the_target_by_its_mangled_name(without_torch: None, tmp_path: Path) -> None:
    """The unit holds cub's EmptyKernel too: the target is found by name, its resources read for it."""
    ctx = shape("cub_nvcc")
    compiled, first = backend_compile(ctx, ctx.space.default(), "nvcc", CompileCache(tmp_path))
    kernel = compiled.kernel(first)
    entries = {e.function: e for e in parse_ptxas(kernel.resources.log)}
    assert any("EmptyKernel" in name for name in entries) and len(entries) == 2
    assert kernel.function.startswith("_Z") and "row_sum_kernel" in kernel.function
    assert kernel.function.encode() in kernel.binary  # the cubin's symbol CuPy's get_function looks up
    assert kernel.resources.registers == entries[kernel.function].registers
    (row,) = check_kernel(ctx, limit=1, compiler="nvcc", cache_dir=tmp_path).rows
    assert row.feasible and row.usage is not None and row.usage.function == kernel.function


def test_an_overloaded_kernel_compiles_under_nvcc(without_torch: None) -> None:
    """`&dequantize_kernel<float, 128>` names one function only when the unit holds one overload (else nvcc:
    "cannot deduce auto type"); the one extracted is the one cutune names, the first definition."""
    ctx = shape("overloads")
    (row,) = check_kernel(ctx, limit=1, compiler="nvcc").rows
    assert row.feasible, row.problem
    unit = build_request(ctx).make_unit(("dequantize_kernel<float, 128>",), False)
    assert (
        unit.source.count("__global__ void dequantize_kernel") == 1
        and "const float* __restrict__ scales" in unit.source
    )


def test_torch_through_a_project_header_without_pytorch_gets_cudas_types(without_torch: None) -> None:
    ctx = shape("torch_header")
    assert_both_compile(ctx)
    unit = build_request(ctx).make_unit((), False)
    assert "<torch/headeronly/util/BFloat16.h> stood in for by CUDA's types (torch is not installed)" in unit.notes
    assert unit.undefines == ()


def test_an_extension_header_naming_torchs_tensor_compiles_without_pytorch(without_torch: None) -> None:
    # `using at::Tensor;` beside the kernels (host code's type): the stand-ins declare it, `at::Half` is `__half`
    ctx = shape("torch_tensor_header")
    assert_both_compile(ctx)
    unit = build_request(ctx).make_unit((), False)
    assert any("<ATen/ATen.h>" in note and "stood in for by CUDA's types" in note for note in unit.notes)


def test_torch_through_a_project_header_with_pytorch_uses_its_headers(with_torch: None) -> None:
    ctx = shape("torch_header")
    unit = build_request(ctx).make_unit((), False)
    assert "<torch/headeronly/util/BFloat16.h> from torch's installed headers" in unit.notes
    assert set(torch_include_dirs()) <= set(unit.include_dirs) and unit.undefines == UNDEFINES
    compiled, first = backend_compile(ctx, ctx.space.default(), "nvcc")
    build = compiled.kernel(first).build
    assert "-U__CUDA_NO_HALF_OPERATORS__" in build.options
    assert any(option == f"-I{torch_include_dirs()[0]}" for option in build.options)
    # NVRTC cannot read torch's headers: they are stood in for there, and it compiles too
    nvrtc_unit = build_request(ctx).make_unit((), True)
    assert any("NVRTC cannot read torch's headers" in note for note in nvrtc_unit.notes)
    assert compile_kernel(build_request(ctx), Target("sm_90"), "nvrtc").kernels[0].resources.registers > 0


def build_request(ctx: KernelContext) -> KernelRequest:
    job = build_job(ctx)
    builder = JobBuilder(job, arch="sm_90")
    key, _ = builder.key(ctx.space.default(), job.spec.sizes)
    return kernel_request(builder.model, ctx.kernel.name, job.spec, key)
