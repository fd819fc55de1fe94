"""extract_kernel: stand-alone units from files whose host code needs torch, compiled for real."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cutune.cuda import SourceModel, parse_source
from cutune.cuda.extract import CompileUnit, extract_kernel, kernel_hash, qualified_name
from cutune.errors import SourceError

from .nvrtc import compile_ptx, find_libnvrtc

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
DATA = ROOT / "tests" / "data" / "cuda"
CUDA_INCLUDE = Path("/usr/local/cuda/include")

needs_nvrtc = pytest.mark.skipif(find_libnvrtc() is None, reason="libnvrtc not found (CUDA toolkit or wheel)")


def load(path: Path) -> SourceModel:
    return parse_source(path.read_text(encoding="utf-8"), str(path))


def nvcc_compiled_functions(unit: CompileUnit, tmp_path: Path, *flags: str) -> list[str]:
    """Compile with `nvcc -cubin -Xptxas -v`; the mangled names ptxas reports compiling."""
    source = tmp_path / "unit.cu"
    source.write_text(unit.source)
    cmd = ["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", *flags, *unit.options(), str(source)]
    done = subprocess.run([*cmd, "-o", str(tmp_path / "unit.cubin")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr + "\n" + unit.source
    return re.findall(r"Compiling entry function '(\w+)'", done.stderr)


def nvrtc_lowered_names(unit: CompileUnit) -> dict[str, str]:
    """Compile with NVRTC (no GPU needed); name expression → mangled name."""
    return nvrtc_compiled(unit)[1]


def nvrtc_compiled(unit: CompileUnit) -> tuple[str, dict[str, str]]:
    """Compile with NVRTC as the GPU backend does: (PTX, name expression → mangled name)."""
    options = [
        "-arch=compute_90",
        "-std=c++17",
        f"-I{CUDA_INCLUDE}",
        f"-I{CUDA_INCLUDE / 'cccl'}",
        *unit.options(),
    ]
    return compile_ptx(unit.source, options, unit.name_expressions)


@pytest.mark.nvcc
def test_silu_sample_compiles_without_torch(tmp_path: Path) -> None:
    unit = extract_kernel(
        load(SAMPLES / "silu_and_mul.cu"),
        "silu_and_mul_kernel",
        instantiations=["silu_and_mul_kernel<__nv_bfloat16>"],
    )
    assert unit.kernel == "serving::silu_and_mul_kernel"
    assert unit.name_expressions == ("serving::silu_and_mul_kernel<__nv_bfloat16>",)
    assert "torch" not in unit.source and "ATen" not in unit.source
    assert "void silu_and_mul(" not in unit.source and "getCurrentCUDAStream" not in unit.source
    assert "&serving::silu_and_mul_kernel<__nv_bfloat16>;" in unit.source
    assert nvcc_compiled_functions(unit, tmp_path) == ["_ZN7serving19silu_and_mul_kernelI13__nv_bfloat16EEvPT_PKS2_i"]


@pytest.mark.nvcc
def test_merge_sample_compiles_without_torch(tmp_path: Path) -> None:
    unit = extract_kernel(
        load(SAMPLES / "merge_attn_states.cu"),
        "merge_attn_states_kernel",
        instantiations=["merge_attn_states_kernel<__nv_bfloat16, 128>"],
    )
    assert "torch" not in unit.source and "void merge_attn_states(" not in unit.source
    assert "to_float" in unit.source
    # std::numeric_limits<float>::infinity() is a host constexpr: nvcc needs the flag the original build uses
    (compiled,) = nvcc_compiled_functions(unit, tmp_path, "--expt-relaxed-constexpr")
    assert compiled.startswith("_Z24merge_attn_states_kernelI13__nv_bfloat16Lj128E")


@pytest.mark.nvcc
def test_exactly_the_needed_declarations(tmp_path: Path) -> None:
    unit = extract_kernel(load(DATA / "deps.cu"), "affine_kernel", instantiations=["affine_kernel<float>"])
    source = unit.source
    for needed in (
        "#define SCALE_FACTOR",
        "struct Coeffs",
        "acc_t apply(",
        "constexpr int kUnroll",
        "namespace ops {",
    ):
        assert needed in source
    # both branches of the #ifndef come along, each under its own condition
    assert "#if (!defined(USE_ROCM))\ntypedef float acc_t;\n#endif" in source
    assert "#if (!(!defined(USE_ROCM)))\ntypedef double acc_t;\n#endif" in source
    for left_out in (
        "UNUSED_MACRO",
        "NotNeeded",
        "debug_dump",
        "std::cout",
        "iostream",
        "torch",
        "void affine(",
    ):
        assert left_out not in source
    assert nvcc_compiled_functions(unit, tmp_path) == ["_ZN3ops13affine_kernelIfEEvPT_PKS1_NS_6CoeffsEi"]


@pytest.mark.nvcc
def test_namespaces_linkage_and_local_includes(tmp_path: Path) -> None:
    model = load(DATA / "structure.cu")
    nested = extract_kernel(model, "nested_kernel", instantiations=["nested_kernel<float, 8>"])
    assert "namespace outer {\nnamespace inner {\nusing index_t = long long;" in nested.source
    assert "struct Pair" not in nested.source and "twice" not in nested.source
    assert f"-I{DATA}" in nested.options()  # the file's own folder, for "local_helpers.cuh"
    assert nvcc_compiled_functions(nested, tmp_path) == ["_ZN5outer5inner13nested_kernelIfLi8ELb1EEEvPT_PKS2_x"]

    c_block = extract_kernel(model, "c_block_kernel")
    assert 'extern "C" {\n__global__ void c_block_kernel(float* x) { x[0] = 2; }\n}' in c_block.source
    assert nvcc_compiled_functions(c_block, tmp_path) == ["c_block_kernel"]


def test_units_for_nvrtc_name_their_instantiations_instead_of_forcing_them() -> None:
    model = load(SAMPLES / "silu_and_mul.cu")
    unit = extract_kernel(
        model, "silu_and_mul_kernel", instantiations=["serving::silu_and_mul_kernel<__half>"], for_nvrtc=True
    )
    assert unit.for_nvrtc and unit.name_expressions == ("serving::silu_and_mul_kernel<__half>",)
    assert "cutune_inst" not in unit.source
    assert "#include <cuda/std/cstdint>" in unit.source  # int64_t & co.
    # silu uses no `std::`: the heavy std prelude (about a second of NVRTC time) is left out
    assert "using cuda::std::numeric_limits;" not in unit.source
    assert "<algorithm>" not in unit.source  # a host standard header: NVRTC has none
    merge = extract_kernel(load(SAMPLES / "merge_attn_states.cu"), "merge_attn_states_kernel", for_nvrtc=True)
    assert "#ifdef __CUDACC_RTC__" in merge.source and "using cuda::std::numeric_limits;" in merge.source


def test_cub_umbrella_header_becomes_device_only_headers_for_nvrtc() -> None:
    model = load(DATA / "cub_reduce.cu")
    for_nvrtc = extract_kernel(model, "row_sum", instantiations=["row_sum<256>"], for_nvrtc=True)
    assert "#include <cub/block/block_reduce.cuh>" in for_nvrtc.source and "cub/cub.cuh" not in for_nvrtc.source
    for_nvcc = extract_kernel(model, "row_sum", instantiations=["row_sum<256>"])
    assert "#include <cub/cub.cuh>" in for_nvcc.source and "torch" not in for_nvcc.source


@needs_nvrtc
@pytest.mark.parametrize(
    ("sample", "kernel", "expression", "mangled"),
    [
        (
            SAMPLES / "silu_and_mul.cu",
            "silu_and_mul_kernel",
            "silu_and_mul_kernel<__nv_bfloat16>",
            "_ZN7serving19silu_and_mul_kernelI13__nv_bfloat16EEvPT_PKS2_i",
        ),
        (
            SAMPLES / "merge_attn_states.cu",
            "merge_attn_states_kernel",
            "merge_attn_states_kernel<__nv_bfloat16, 128>",
            "_Z24merge_attn_states_kernelI13__nv_bfloat16Lj128EEvPT_PfPKS1_PKfS5_S7_jjj",
        ),
        (DATA / "cub_reduce.cu", "row_sum", "row_sum<256>", "_Z7row_sumILi256EEvPKfPfi"),
    ],
)
def test_units_compile_with_nvrtc(sample: Path, kernel: str, expression: str, mangled: str) -> None:
    unit = extract_kernel(load(sample), kernel, instantiations=[expression], for_nvrtc=True)
    assert list(nvrtc_lowered_names(unit).values()) == [mangled]


def test_qualified_names_and_missing_kernels() -> None:
    model = load(DATA / "structure.cu")
    assert qualified_name(model, "nested_kernel") == "outer::inner::nested_kernel"
    assert qualified_name(model, "c_kernel") == "c_kernel"
    unit = extract_kernel(model, "cpp17_kernel", instantiations=["a::b::cpp17_kernel"])
    assert unit.name_expressions == ("a::b::cpp17_kernel",)
    with pytest.raises(SourceError, match="no __global__ kernel named 'nope'"):
        extract_kernel(model, "nope")


def test_line_map_points_back_to_the_original_lines() -> None:
    model = load(DATA / "deps.cu")
    unit = extract_kernel(model, "affine_kernel", defines={"USE_FAST": "1", "NDEBUG": ""})
    original = model.text.splitlines()
    unit_lines = unit.source.splitlines()
    kernel_line = next(i for i, line in enumerate(unit_lines) if "__global__ void affine_kernel" in line)
    assert original[unit.source_line(kernel_line)] == unit_lines[kernel_line]
    mapped = [i for i in range(len(unit_lines)) if unit.source_line(i) is not None]
    assert all(original[unit.source_line(i)] == unit_lines[i] for i in mapped)
    assert unit.source_line(0) is None  # the generated header line
    assert unit.options()[-2:] == ("-DUSE_FAST=1", "-DNDEBUG")


def test_kernel_hash_changes_with_the_kernel_not_with_host_code() -> None:
    text = (SAMPLES / "silu_and_mul.cu").read_text()
    base = kernel_hash(parse_source(text), "silu_and_mul_kernel")
    host_edit = text.replace("dim3 grid(num_tokens);", "dim3 grid(num_tokens);  // one block per token")
    assert kernel_hash(parse_source(host_edit), "silu_and_mul_kernel") == base
    device_edit = text.replace("return x / (1.0f + __expf(-x));", "return x / (1.0f + expf(-x));")
    assert kernel_hash(parse_source(device_edit), "silu_and_mul_kernel") != base  # a device function it calls
