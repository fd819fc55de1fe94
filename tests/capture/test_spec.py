"""Specs from recorded capture logs: sizes and weights, launch fitting, template arguments, merging, extents."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from cutune.capture.log import CaptureError, read_log
from cutune.capture.run import specs_from_log
from cutune.spec import Role, load_spec
from tests.capture.logs import RMS_BF16, RMS_HALF, Arg, f32, i32, launch, ptr, rms_launch, write_log

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "vllm_style" / "layernorm_kernels.cu"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    shutil.copy(SAMPLE, tmp_path)
    return tmp_path


def _bf16_log(tmp_path: Path) -> Path:
    return write_log(
        tmp_path / "launches.jsonl",
        [rms_launch(RMS_BF16, 1, 4096, 120), rms_launch(RMS_BF16, 512, 4096, 7), rms_launch(RMS_BF16, 4096, 8192, 2)],
    )


def test_a_drafted_spec_gets_the_captured_sizes_weights_launch_and_types(workspace: Path) -> None:
    outcome = specs_from_log(read_log(_bf16_log(workspace)), workspace, kernels=["rms_norm_kernel"])
    assert outcome.errors == ()
    spec = load_spec(workspace / "layernorm_kernels.tune.toml").kernel("rms_norm_kernel")
    assert spec.sizes == (
        {"num_tokens": 1, "hidden_size": 4096},
        {"num_tokens": 512, "hidden_size": 4096},
        {"num_tokens": 4096, "hidden_size": 8192},
    )
    assert spec.weights == (120.0, 7.0, 2.0)
    assert spec.grid == ("num_tokens",)
    assert spec.block == ("min(hidden_size, BLOCK_THREADS)",)  # the drafted expression fits: it stays tunable
    assert spec.template_args == {"scalar_t": "__nv_bfloat16"}
    assert {a.name: a.dtype for a in spec.args}["out"] == "bfloat16"
    assert {a.name: a.value for a in spec.args}["epsilon"] == "1e-06"
    assert "TODO" not in (workspace / "layernorm_kernels.tune.toml").read_text()


def test_the_most_launched_instantiation_is_kept_and_the_other_named(workspace: Path) -> None:
    log = write_log(
        workspace / "l.jsonl",
        [rms_launch(RMS_BF16, 8, 4096, 3), rms_launch(RMS_HALF, 8, 4096, 30), rms_launch(RMS_HALF, 64, 4096, 5)],
    )
    [result] = specs_from_log(read_log(log), workspace, kernels=["rms_norm_kernel"]).kernels
    assert result.spec.template_args["scalar_t"] == "__half"
    assert result.spec.weights == (30.0, 5.0)
    assert any("c10::BFloat16" in n or "__nv_bfloat16" in n for n in result.notes)


def test_capture_merges_into_an_existing_spec_and_keeps_other_tables(workspace: Path) -> None:
    spec_path = workspace / "layernorm_kernels.tune.toml"
    shutil.copy(SAMPLE.with_suffix(".tune.toml"), spec_path)
    before = load_spec(spec_path)
    fused = spec_path.read_text().split("[kernel.fused_add_rms_norm_kernel]")[1]
    specs_from_log(read_log(_bf16_log(workspace)), workspace)
    after = load_spec(spec_path)
    assert spec_path.read_text().split("[kernel.fused_add_rms_norm_kernel]")[1] == fused
    merged = after.kernel("rms_norm_kernel")
    assert merged.weights == (120.0, 7.0, 2.0)
    assert merged.space == before.kernel("rms_norm_kernel").space  # the hand-kept params survive
    assert spec_path.read_text().count("[kernel.rms_norm_kernel]") == 1
    specs_from_log(read_log(_bf16_log(workspace)), workspace)  # capturing again replaces, never duplicates
    assert spec_path.read_text().count("[kernel.rms_norm_kernel]") == 1
    assert spec_path.read_text().count("# captured") == 1


def test_a_shape_larger_than_its_allocation_is_an_error_naming_the_argument(workspace: Path) -> None:
    log = write_log(workspace / "l.jsonl", [rms_launch(RMS_BF16, 4, 4096, 1, weight_extent=4096)])  # 2048 elements
    outcome = specs_from_log(read_log(log), workspace, kernels=["rms_norm_kernel"])
    assert outcome.kernels == ()
    [error] = outcome.errors
    assert "'weight'" in error and "8192 bytes" in error and "4096 bytes" in error
    assert not (workspace / "layernorm_kernels.tune.toml").exists()


GEOMETRY = """
template <int VEC>
__global__ void scale_kernel(float* __restrict__ out, const float* __restrict__ in, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = 2.0f * in[i];
}

void launch(float* out, const float* in, int n, int blocks, cudaStream_t stream) {
  scale_kernel<4><<<blocks, 256, 0, stream>>>(out, in, n);
}
"""
SCALE = "_Z12scale_kernelILi4EEvPfPKfi"


def test_geometry_no_expression_fits_becomes_per_size_literals(tmp_path: Path) -> None:
    (tmp_path / "scale.cu").write_text(GEOMETRY)
    n_grid = [(1000, 7), (4096, 3), (100000, 5)]  # a grid chosen by a heuristic the sizes do not show
    log = write_log(
        tmp_path / "l.jsonl",
        [launch(SCALE, (g,), (256,), [ptr(0x1000, n * 4), ptr(0x9000, n * 4), i32(n)], 1 + g) for n, g in n_grid],
    )
    [result] = specs_from_log(read_log(log), tmp_path).kernels
    spec = result.spec
    assert spec.grid == ("grid_x",)
    assert spec.block == ("BLOCK_THREADS",)  # drafted from the launch: it gives 256 at its default
    assert [s["grid_x"] for s in spec.sizes] == [7, 3, 5]
    assert [s["n"] for s in spec.sizes] == [1000, 4096, 100000]
    assert spec.template_args == {"VEC": "4"}
    assert any("grid_x" in note for note in result.notes)
    assert load_spec(tmp_path / "scale.tune.toml").kernel("scale_kernel").sizes == spec.sizes


def test_a_fitting_expression_is_found_over_the_sizes(tmp_path: Path) -> None:
    (tmp_path / "scale.cu").write_text(GEOMETRY)
    log = write_log(
        tmp_path / "l.jsonl",
        [
            launch(SCALE, (-(-n // 256),), (256,), [ptr(0x1000, n * 4), ptr(0x9000, n * 4), i32(n)], 2)
            for n in (1000, 70000)
        ],
    )
    [result] = specs_from_log(read_log(log), tmp_path).kernels
    assert result.spec.grid == ("ceil_div(n, 256)",)


def test_a_guessed_length_the_allocations_contradict_becomes_their_bound_and_an_output_inout(tmp_path: Path) -> None:
    (tmp_path / "scale.cu").write_text(GEOMETRY)  # one integer parameter: the drafter guesses every array is n long
    # `out` is allocated 2 MB per call (a caching allocator's block), `in` exactly n; 5 launches at each n
    lines = [
        launch(SCALE, (-(-n // 256),), (256,), [ptr(0x1000 + k, 2 << 20), ptr(0x9000, n * 4), i32(n)], 1)
        for n in (1000, 70000)
        for k in range(5)
    ]
    [result] = specs_from_log(read_log(write_log(tmp_path / "l.jsonl", lines)), tmp_path).kernels
    spec = load_spec(tmp_path / "scale.tune.toml").kernel("scale_kernel")
    out, in_ = spec.args[0], spec.args[1]
    assert (out.shape, out.bound, out.role) == (("n_out",), True, Role.INOUT)
    assert (in_.shape, in_.bound, in_.role) == (("n",), False, Role.IN)  # the allocation matches the guess
    # launches differing only in the allocation are one size; no launch expression and no dispatch reads one
    assert [s["n"] for s in spec.sizes] == [1000, 70000] and spec.weights == (5.0, 5.0)
    assert [s["n_out"] for s in spec.sizes] == [(2 << 20) // 4] * 2
    assert spec.grid == ("ceil_div(n, 256)",) and spec.keyed_sizes() == ({"n": 1000}, {"n": 70000})
    assert spec.moved_bytes(spec.sizes[0]) is None  # the bytes it moves are unknown: no floor is claimed
    assert any("n_out, an upper bound" in note and "inout" in note for note in result.notes)


def test_a_malformed_log_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "cutune-capture"}\n{"name": 1}\n')
    with pytest.raises(CaptureError, match=r"bad.jsonl:2: malformed launch record"):
        read_log(bad)
    bad.write_text("not json\n")
    with pytest.raises(CaptureError, match=r"bad.jsonl:1: not JSON"):
        read_log(bad)


def test_launches_of_other_kernels_are_left_out(workspace: Path) -> None:
    other = launch("_Z17some_torch_kernelPfi", (1,), (32,), [ptr(0x10, 64), i32(3)], 9)
    log = write_log(workspace / "l.jsonl", [other, rms_launch(RMS_BF16, 2, 1024, 1)])
    [result] = specs_from_log(read_log(log), workspace).kernels
    assert result.kernel == "rms_norm_kernel" and result.launches == 1
    assert f32(1.0).raw  # the helpers build the recorder's byte layout


PATHS = Path(__file__).resolve().parents[2] / "benchmarks" / "capture" / "launch_paths.cu"
BF16 = "13__nv_bfloat16"


def _paths_log(tmp_path: Path, gelu_grid: Callable[[int], int]) -> Path:
    lines = []
    for (rows, cols), calls in zip(((8, 4096), (512, 4096), (4096, 8192)), (12, 4, 1), strict=True):
        n, pointers = rows * cols, [ptr(0x1000, rows * cols * 2), ptr(0x2000, rows * cols * 2)]
        scale = f"_ZN5paths17scale_rows_kernelI{BF16}EEvPT_PKS2_PKfii"
        bias = f"_ZN5paths15add_bias_kernelI{BF16}EEvPT_PKS2_S5_ii"
        gelu = f"_ZN5paths11gelu_kernelI{BF16}EEvPT_PKS2_i"
        lines += [
            launch(scale, (rows,), (512,), [*pointers, ptr(0x3000, rows * 4), i32(rows), i32(cols)], calls),
            launch(bias, (-(-n // 256),), (256,), [*pointers, ptr(0x3000, cols * 2), i32(n), i32(cols)], calls),
            launch(gelu, (gelu_grid(n),), (256,), [*pointers, i32(n)], calls),
        ]
    return write_log(tmp_path / "l.jsonl", lines)


def test_launches_through_launch_ex_a_helper_template_and_a_dispatch_macro_leave_nothing_todo(tmp_path: Path) -> None:
    shutil.copy(PATHS, tmp_path)
    log = _paths_log(tmp_path, lambda n: min(-(-n // 256), 65535))
    outcome = specs_from_log(read_log(log), tmp_path)
    assert outcome.errors == ()
    specs = {k.kernel: k.spec for k in outcome.kernels}
    assert specs["scale_rows_kernel"].grid == ("rows",)  # cudaLaunchKernelEx: the drafter saw no launch at all
    assert specs["add_bias_kernel"].grid == ("ceil_div(n, 256)",)  # through launch_kernel(...)
    # the macro's own launch, written with `paths::` helpers: the drafter's quote, checked against every launch
    assert specs["gelu_kernel"].grid[0].startswith("((min(ceil_div(n, (BLOCK_THREADS)), MAX_BLOCKS))")
    assert specs["scale_rows_kernel"].weights == (12.0, 4.0, 1.0)
    text = (tmp_path / "launch_paths.tune.toml").read_text()
    assert "TODO" not in text
    assert set(load_spec(tmp_path / "launch_paths.tune.toml").kernels) == set(specs)


def test_launch_params_no_fitted_launch_uses_are_no_longer_searched(tmp_path: Path) -> None:
    shutil.copy(PATHS, tmp_path)
    log = _paths_log(tmp_path, lambda n: 132 * 4 if n > 100_000 else 7)  # a grid sized by the SM count
    outcome = specs_from_log(read_log(log), tmp_path, kernels=["gelu_kernel"])
    [gelu] = outcome.kernels
    assert gelu.spec.grid == ("grid_x",)
    assert gelu.spec.space is not None and "MAX_BLOCKS" not in {p.name for p in gelu.spec.space.params}
    assert any("MAX_BLOCKS" in n for n in gelu.notes)
    load_spec(tmp_path / "launch_paths.tune.toml")  # still a valid spec


def test_data_snapshots_are_listed_as_the_real_inputs_of_each_size(workspace: Path) -> None:
    line = rms_launch(RMS_BF16, 8, 1024, 5)
    line["data"] = {"dir": "abc", "files": {str(i): {"file": f"{i}.bin", "bytes": 64} for i in range(3)}, "cap": 64}
    log = write_log(workspace / "l.jsonl", [line])
    header = json.loads((workspace / "l.jsonl").read_text().splitlines()[0])
    header["data_dir"] = str(workspace / ".cutune" / "capture" / "data")
    text = (workspace / "l.jsonl").read_text().splitlines()
    (workspace / "l.jsonl").write_text("\n".join([json.dumps(header), *text[1:]]) + "\n")
    data = workspace / ".cutune" / "capture" / "data" / "abc"
    data.mkdir(parents=True)
    for i in range(3):
        (data / f"{i}.bin").write_bytes(bytes(range(i, i + 64)))
    [result] = specs_from_log(read_log(log), workspace).kernels
    assert set(result.real_inputs[0]) == {"input", "weight"}  # `out` is written, not read
    manifest = json.loads(
        (workspace / ".cutune" / "capture" / "layernorm_kernels.rms_norm_kernel.inputs.json").read_text()
    )
    assert manifest["sizes"][0]["size"] == {"num_tokens": 8, "hidden_size": 1024}
    assert manifest["sizes"][0]["inputs"]["input"].endswith("abc/1.bin")
    # the spec names them per size (relative to itself), and tuning fills those arrays from them
    text = (workspace / "layernorm_kernels.tune.toml").read_text(encoding="utf-8")
    assert 'data = [".cutune/capture/data/abc/1.bin"]' in text
    spec = load_spec(workspace / "layernorm_kernels.tune.toml").kernels["rms_norm_kernel"]
    by_name = {a.name: a for a in spec.args}
    assert by_name["input"].data == (str(data / "1.bin"),) and not by_name["out"].data


ACTIVATION = SAMPLE.with_name("activation_kernels.cu")
SILU = "_ZN4vllm18act_and_mul_kernelIN3c108BFloat16EXadL_ZNS_11silu_kernelIS2_EET_RKS4_EEEEvPS4_PS5_i"
GELU = "_ZN4vllm18act_and_mul_kernelIN3c108BFloat16EXadL_ZNS_16gelu_tanh_kernelIS2_EET_RKS4_EEEEvPS4_PS5_i"


def test_a_device_function_template_argument_is_written_as_the_source_names_it(tmp_path: Path) -> None:
    shutil.copy(ACTIVATION, tmp_path)
    lines = [
        launch(SILU, (tokens,), (min(d, 1024),), [ptr(0x10, tokens * d * 2), ptr(0x20, tokens * d * 4), i32(d)], n)
        for tokens, d, n in ((4, 14336, 30), (512, 14336, 3))
    ] + [launch(GELU, (4,), (1024,), [ptr(0x10, 4 * 4096 * 2), ptr(0x20, 4 * 4096 * 4), i32(4096)], 2)]
    [result] = specs_from_log(read_log(write_log(tmp_path / "l.jsonl", lines)), tmp_path).kernels
    assert result.spec.template_args == {"scalar_t": "__nv_bfloat16", "ACT_FN": "vllm::silu_kernel<__nv_bfloat16>"}
    assert [s["d"] for s in result.spec.sizes] == [14336, 14336]
    assert any("gelu_tanh_kernel" in n for n in result.notes)  # the other instantiation is named


def test_a_launch_whose_parameter_sizes_differ_from_the_source_is_named(workspace: Path) -> None:
    line = rms_launch(RMS_BF16, 8, 1024, 5)
    line["params"][5]["size"] = 8  # hidden_size launched as 8 bytes: a build of other source than this
    line["params"][5]["hex"] = "0004000000000000"
    log = write_log(workspace / "l.jsonl", [line])
    outcome = specs_from_log(read_log(log), workspace)
    assert outcome.kernels == ()
    assert "hidden_size is 8 bytes at the launch, 4 as `const int`" in outcome.errors[0]


def test_a_kernel_name_defined_in_two_files_matches_the_one_with_the_launched_parameters(tmp_path: Path) -> None:
    # a training copy and an inference copy of one op, as projects keep them: same name, other parameters
    (tmp_path / "a_training.cu").write_text(
        "__global__ void fused_bias_act(const float* in, const float* bias, float* out, int n, int iters) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = in[i] + bias[i % iters];\n}\n"
        "void launch_a(const float* in, const float* b, float* out, int n) {\n"
        "  fused_bias_act<<<(n + 255) / 256, 256>>>(in, b, out, n, 4);\n}\n",
        encoding="utf-8",
    )
    (tmp_path / "b_inference.cu").write_text(
        "__global__ void fused_bias_act(float* inout, const float* bias, int n, int width) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) inout[i] += bias[i % width];\n}\n"
        "void launch_b(float* io, const float* b, int n, int width) {\n"
        "  fused_bias_act<<<(n + 255) / 256, 256>>>(io, b, n, width);\n}\n",
        encoding="utf-8",
    )
    name = "_Z14fused_bias_actPfPKfii"
    lines = [
        launch(name, (-(-n // 256),), (256,), [ptr(0x1000, n * 4), ptr(0x2000, 4096 * 4), i32(n), i32(4096)], 3)
        for n in (4096 * 8, 4096 * 64)
    ]
    outcome = specs_from_log(read_log(write_log(tmp_path / "l.jsonl", lines)), tmp_path)
    [result] = outcome.kernels
    assert result.path.name == "b_inference.cu" and not outcome.errors


STRUCT = """
struct Ranges { float low, high; };
struct Table { const float* values; int n; };
__global__ void clamp_kernel(float* __restrict__ out, const float* __restrict__ in, Ranges r, Table t, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fminf(fmaxf(in[i], r.low), r.high) + (t.n ? t.values[0] : 0.f);
}
"""
CLAMP = "_Z12clamp_kernelPfPKf6Ranges5Tablei"


def test_a_struct_by_value_is_its_bytes_unless_it_holds_a_pointer(tmp_path: Path) -> None:
    (tmp_path / "clamp.cu").write_text(STRUCT)
    ranges = Arg(struct.pack("<ff", -1.0, 2.5))  # the bytes of Ranges{-1, 2.5}
    table = Arg(struct.pack("<Qi4x", 0x7F00_1000_2000, 7))  # a pointer into the region `in` lies in
    args = [ptr(0x7F00_0000_1000, 4 * 4096), ptr(0x7F00_0001_1000, 4 * 4096), ranges, table, i32(4096)]
    log = write_log(tmp_path / "l.jsonl", [launch(CLAMP, (16,), (256,), args, 3)])
    [result] = specs_from_log(read_log(log), tmp_path).kernels
    r, t = result.spec.args[2], result.spec.args[3]
    assert (r.dtype, r.value) == ("bytes8", "0x40200000bf800000")  # little-endian: high's bytes first
    pointer = "t: the `Table` passed by value holds what looks like a device pointer"
    assert t.dtype.startswith("TODO") and t.value == t.dtype and any(pointer in n for n in result.notes)
    assert int(r.value or "0", 16).to_bytes(8, "little") == ranges.raw
