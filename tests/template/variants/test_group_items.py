"""group_items: GROUP_ITEMS consecutive elements per thread of a kernel reducing groups of lanes by warp
butterflies. Checked on the quantiser sample and llama.cpp's quantize_q8_1 (proposed, its reductions read in the
order that keeps the bits), through the launch it asks for, by compiling every GROUP_ITEMS with nvcc and NVRTC, by
the reasons it refuses, equal to the original bit for bit at every GROUP_ITEMS on warps emulated on the host (the
float sum's order included), and on the GPU."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest
from benchmarks.corpus_variants import TABLE, opened

from cutune.cuda.extract import extract_kernel
from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.gpu.backend import TimingOptions
from cutune.gpu.registry import create_backend
from cutune.limits import limits_for
from cutune.project import build_job, open_kernel
from cutune.spec import load_spec
from cutune.template.model import Config
from cutune.template.recipes.index_bits import narrowed
from cutune.template.variants import TRANSFORMS, VARIANT, GroupItems, combine_all, propose_variants, with_variants
from cutune.template.variants.group_items import ITEMS, KEEP, STRIDED
from tests.corpus.sources import LLAMA, corpus_dir
from tests.cuda.test_extract import needs_nvrtc

from .compile import compile_both, measured_failures, name_expressions, variant_alone

SAMPLE = Path(__file__).resolve().parents[3] / "samples" / "group_quant.cu"
EMULATOR = Path(__file__).resolve().parents[2] / "data" / "template" / "variants" / "warp_emulator.h"
KERNELS = ("group_quant_int8_kernel", "group_quant_sum_kernel")
QUANTIZE = corpus_dir() / LLAMA / "vendor" / "llama.cpp" / "ggml" / "src" / "ggml-cuda" / "quantize.cu"
KERNEL = """
__global__ void k(float* __restrict__ out, float* __restrict__ scales, const float* __restrict__ x, int n) {{
  {body}
}}
"""
INDEX = "const int i = blockIdx.x * blockDim.x + threadIdx.x;"
MAX = "for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffff, a, o));"


def _refusal(body: str) -> str:
    with pytest.raises(TransformRefused) as caught:
        GroupItems().apply(parse_source(KERNEL.format(body=body)), "k", None)
    return caught.value.reason


def _variant(path: Path, kernel: str):  # type: ignore[no-untyped-def]
    variants, refusals = propose_variants(parse_source(path.read_text(), str(path)), kernel, None)
    found = [v for v in variants if v.name == "group_items"]
    assert found, [r for r in refusals if r.recipe == "group_items"]
    return found[0]


def test_registered_last_so_the_other_transforms_keep_their_numbers() -> None:
    assert list(TRANSFORMS)[5:7] == ["block_items", "group_items"]  # online_merge came after them


def test_the_quantiser_sample_reduces_its_values_before_the_groups_shuffles() -> None:
    int8 = _variant(SAMPLE, "group_quant_int8_kernel")  # its helper's butterfly, inlined by the canonical step
    flat = " ".join(int8.body.split())
    assert f"* {ITEMS} + cutune_p;" in flat and "if (i >= n) { continue; }" in flat  # an element leaves alone
    assert "cutune_g0_all = fmaxf(cutune_g0_all, cutune_g0[cutune_gq]);" in flat  # the thread's own values first
    # the locals the rest reads kept per element (GROUP_KEEP 1), or the part before computed again (0)
    assert f"if constexpr ({KEEP}) {{" in flat and "const float v = cutune_gc1[cutune_p];" in flat
    assert [(p.name, p.values, p.default) for p in int8.params] == [(ITEMS, (1, 2, 4, 8), 1), (KEEP, (0, 1), 0)]
    summed = _variant(SAMPLE, "group_quant_sum_kernel")
    # a float sum keeps the butterfly's order: each value shuffled between threads, then paired within the thread
    assert "cutune_g1[cutune_gq] = cutune_g1[cutune_gq] + (__shfl_xor_sync(" in summed.body
    assert "cutune_gt[cutune_gq] = cutune_g1[cutune_gq] + (cutune_g1[cutune_gq ^ cutune_go]);" in summed.body
    assert "in the original's order" in summed.provenance.note
    # ... or, at GROUP_STRIDED 1, lanes 32 / GROUP_ITEMS apart: the thread's own values paired first, one shuffle a step
    assert (STRIDED, (0, 1), 0) in [(p.name, p.values, p.default) for p in summed.params]
    flat = " ".join(summed.body.split())
    thread = "(static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x)"
    apart = f"{thread} / (32 / {ITEMS}) * 32 + {thread} % (32 / {ITEMS}) + cutune_p * (32 / {ITEMS})"
    assert f"({STRIDED} ? {apart} : {thread} * {ITEMS} + cutune_p)" in flat
    strided = flat[flat.index(f"if constexpr ({STRIDED}) {{") :]
    within, between = strided.index("// within the thread"), strided.index("// between threads, one value")
    assert within < between and "cutune_g1_all = cutune_g1_all + (__shfl_xor_sync(" in strided
    assert STRIDED not in int8.body  # extrema combine in any order: the consecutive lanes shuffle once a step already


@pytest.mark.skipif(not QUANTIZE.is_file(), reason="the llama.cpp corpus is not unpacked (scripts/corpus.sh)")
def test_llama_cpp_quantize_q8_1_gets_it_through_its_header_helpers() -> None:
    variant = _variant(QUANTIZE, "quantize_q8_1")  # warp_reduce_max / warp_reduce_sum, read from common.cuh
    assert "warp_reduce_max of amax, warp_reduce_sum of sum (in the original's order)" in variant.provenance.note
    assert "y[ib].qs[iqs] = q;" in variant.body and "warp_reduce" not in variant.body


def test_the_launch_divides_the_grid_rounding_up() -> None:
    model = parse_source(SAMPLE.read_text(), str(SAMPLE))
    spec = load_spec(SAMPLE.with_suffix(".tune.toml")).kernel("group_quant_int8_kernel")
    variant = GroupItems().apply(model, "group_quant_int8_kernel", spec)
    assert variant.constraints == ("(BLOCK_THREADS) % 32 == 0",)
    _, combined = with_variants(model, "group_quant_int8_kernel", [variant], spec)
    assert combined is not None
    names = {**limits_for("sm_90").as_names(), "tokens": 16, "hidden": 4096, "VARIANT": 1}
    names |= {"BLOCK_THREADS": 256, "ITEMS_PER_THREAD": 1}
    assert combined.launch({**names, ITEMS: 4})[:2] == ((64, 1, 1), (256, 1, 1))
    assert combined.launch({**names, ITEMS: 1})[:2] == ((256, 1, 1), (256, 1, 1))
    # a ragged size (127 blocks of the original): the last, partial block's elements are not lost
    assert combined.launch({**names, "tokens": 127, "hidden": 256, ITEMS: 2})[:2] == ((64, 1, 1), (256, 1, 1))


def test_an_index_without_a_bound_right_after_it_is_refused() -> None:
    text = SAMPLE.read_text().replace("  if (i >= n) {\n    return;\n  }\n", "", 1)
    with pytest.raises(TransformRefused, match=r"no bound on the thread index right after it"):
        GroupItems().apply(parse_source(text, str(SAMPLE)), "group_quant_int8_kernel", None)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("const int i = threadIdx.x; float a = x[i]; " + MAX, "no global thread index"),
        (f"{INDEX} float a = x[i]; a = fmaxf(a, __shfl_xor_sync(0xffffffff, a, 16));", "no warp reduction"),
        (
            f"{INDEX} float a = x[i]; for (int o = 16; o > 0; o >>= 1) a += __shfl_down_sync(0xffffffff, a, o);",
            "not an xor butterfly",
        ),
        (f"{INDEX} float a = x[i]; " + MAX.replace("0xffffffff", "0x0000ffff"), "is not the whole warp"),
        (f"{INDEX} float a = x[i]; " + MAX.replace("16", "n / 2"), "not a power of two below 32 known"),
        (f"{INDEX} float a = x[i]; " + MAX.replace("a, o))", "a, o)) * x[0]"), "more than its partner's value"),
        (f"{INDEX} float a = x[i]; {MAX} out[threadIdx.x] = a;", "reads threadIdx.x beside the thread index"),
        (f"{INDEX} float a = x[i]; out[i] = a; {MAX}", "writes `out[i]` before the reduction"),
        (f"{INDEX} float a = x[i]; float b = a; {MAX} b = 1.f; {MAX.replace('a', 'b')}", "work between the reductions"),
        (f"{INDEX} float a = x[i]; {MAX} if (__ballot_sync(0xffffffff, a > 0.f)) out[i] = a;", "through __ballot_sync"),
        (f"{INDEX} __shared__ float s[32]; float a = x[i]; {MAX} s[0] = a;", "cooperate through __shared__"),
        (f"{INDEX} float a = x[i]; {MAX} for (int j = 0; j < n; ++j) {{ if (j == i) return; }}", "inside a loop"),
        (f"{INDEX} float a = x[i]; {MAX} a = block_reduce_sum(a); out[i] = a;", "not found here: it may exchange"),
        (
            "for (int u = 0; u < 4; ++u) { const int i = (blockIdx.x * 4 + u) * blockDim.x + threadIdx.x;"
            f" if (i >= n) break; float a = x[i]; {MAX} out[i] = a; }}",
            "leaves the loop over its chunks with `break`",
        ),
    ],
)
def test_refuses_where_more_elements_per_thread_could_change_the_result(body: str, reason: str) -> None:
    assert reason in _refusal(body)


@pytest.mark.nvcc
@needs_nvrtc
@pytest.mark.parametrize("kernel", KERNELS)
def test_every_group_items_compiles_with_nvcc_and_nvrtc(kernel: str, tmp_path: Path) -> None:
    ctx = open_kernel(SAMPLE, kernel)  # as `tune` reads it: the recipes' template (the int8 one in chunks), its spec
    combined = combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)
    assert combined.spec is not None
    k = 1 + [v.name for v in combined.variants].index("group_items")
    default = combined.template.space.default()
    configs = [{**default, VARIANT: k, ITEMS: p} for p in (1, 2, 4, 8)]
    configs.append({**default, VARIANT: k, ITEMS: 8, KEEP: 1})
    if STRIDED in default:
        configs.append({**default, VARIANT: k, ITEMS: 4, STRIDED: 1})
        configs.append({**default, VARIANT: k, ITEMS: 8, KEEP: 1, STRIDED: 1})
    if "ITEMS_PER_THREAD" in default:
        configs.append({**default, VARIANT: k, ITEMS: 8, "ITEMS_PER_THREAD": 4})
    expressions = name_expressions(combined.template, combined.spec, configs)
    entries, lowered = compile_both(combined.template, expressions, tmp_path, SAMPLE)
    # one instantiation each (int64_t mangles as long for nvcc's host compiler, as long long in NVRTC)
    assert len(set(entries)) == len(configs) and len(set(lowered.values())) == len(configs), (entries, lowered)


# the quantisers run on the host (warp_emulator.h): the original and the variant at every GROUP_ITEMS, outputs compared
# byte for byte; for the sum, how many groups a sequential sum would round differently (the data tells orders apart)
HARNESS = """
#include <random>
int main() {{
  const int64_t n = 1024;  // blocks of 64: 16 at GROUP_ITEMS 1, 2 at 8
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-3.f, 3.f);
  std::vector<float> x(n);
  for (auto& v : x) v = uniform(rng) * std::pow(10.f, static_cast<int>(rng() % 7) - 3);  // magnitudes far apart
  for (int i = 0; i < 32; ++i) x[i] = 0.f;  // an all-zero group
  std::vector<{stats}> stats;
  auto run = [&](auto kernel, unsigned grid) {{
    std::vector<int8_t> out(n);
    stats.assign(n / 32, {stats}{{}});
    launch(grid, 64, [&] {{ kernel(out.data(), stats.data(), x.data(), n); }});
    std::vector<unsigned char> bytes(n + stats.size() * sizeof({stats}));
    std::memcpy(bytes.data(), out.data(), n);
    std::memcpy(bytes.data() + n, stats.data(), stats.size() * sizeof({stats}));
    return bytes;
  }};
  const auto original = run({original}, n / 64);
  {reordered}
{runs}
}}
"""
REORDERED = """int reordered = 0;
  for (int64_t g = 0; g < n / 32; ++g) {
    float sum = 0.f;
    for (int j = 0; j < 32; ++j) sum += x[g * 32 + j];
    reordered += sum != stats[g].y;
  }
  std::printf("reordered %d\\n", reordered);"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("kernel", KERNELS)
def test_every_group_items_equals_the_original_bit_for_bit_on_emulated_warps(kernel: str, tmp_path: Path) -> None:
    ctx = open_kernel(SAMPLE, kernel)
    combined = combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)
    assert combined.spec is not None
    k = 1 + [v.name for v in combined.variants].index("group_items")
    default = combined.template.space.default()
    strides = (0, 1) if STRIDED in default else (0,)
    values = [(p, keep, apart) for apart in strides for keep in (0, 1) for p in (1, 2, 4, 8)]
    configs = [default, *({**default, VARIANT: k, ITEMS: p, KEEP: keep, STRIDED: a} for p, keep, a in values)]
    if len(strides) == 1:
        configs = [{n: v for n, v in c.items() if n != STRIDED} for c in configs]
    expressions = name_expressions(combined.template, combined.spec, configs)
    unit = extract_kernel(parse_source(combined.template.source, str(SAMPLE)), kernel, instantiations=expressions)
    (tmp_path / "cuda_runtime.h").write_text(f'#include "{EMULATOR}"\n')  # the unit's one CUDA header
    runs = "\n".join(
        f'  std::printf("%d %d %d %s\\n", {p}, {keep}, {a}, '
        f'run({e}, n / 64 / {p}) == original ? "equal" : "different");'
        for (p, keep, a), e in zip(values, expressions[1:], strict=True)
    )
    summed = kernel == "group_quant_sum_kernel"
    main = HARNESS.format(
        stats="float2" if summed else "float", original=expressions[0], reordered=REORDERED if summed else "", runs=runs
    )
    (tmp_path / "emulated.cpp").write_text(unit.source + main)
    build = ["g++", "-std=c++20", "-O1", "-pthread", "-w", f"-I{tmp_path}", str(tmp_path / "emulated.cpp")]
    done = subprocess.run([*build, "-o", str(tmp_path / "emulated")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    ran = subprocess.run([str(tmp_path / "emulated")], capture_output=True, text=True, timeout=60, check=True)
    lines = ran.stdout.split("\n")
    assert [line for line in lines if line.endswith("equal") or line.endswith("different")] == [
        f"{p} {keep} {a} equal" for p, keep, a in values
    ], ran.stdout
    if summed:  # the sum's order shows in its bits: the variant keeps the butterfly's
        assert int(next(line for line in lines if line.startswith("reordered")).split()[1]) > 0


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_the_variant_equals_the_original_on_the_gpu_at_every_group_items(kernel: str) -> None:
    ctx = open_kernel(SAMPLE, kernel)
    spec = ctx.require_spec()
    job = variant_alone(ctx, kernel, GroupItems().apply(ctx.template_model, kernel, spec))
    # GROUP_ITEMS 1, 2, 4, 8 by GROUP_KEEP 0, 1 (by GROUP_STRIDED 0, 1 where a sum keeps its order) at every size,
    # each checked against the original's output
    passed, failed = measured_failures(job, spec, {"VARIANT", ITEMS, KEEP, STRIDED})
    assert passed >= 8 and not failed, failed


@pytest.mark.gpu
@pytest.mark.skipif(not QUANTIZE.is_file(), reason="the llama.cpp corpus is not unpacked (scripts/corpus.sh)")
def test_quantize_q8_1_equals_the_original_on_the_gpu_at_every_group_items() -> None:
    ctx = opened(next(e for e in TABLE if e.kernel == "quantize_q8_1"))
    combined = combine_all(ctx.template_model, "quantize_q8_1", ctx.template, ctx.spec)
    k = 1 + [v.name for v in combined.variants].index("group_items")
    ctx = dataclasses.replace(ctx, template=combined.template, template_model=combined.model, spec=combined.spec)
    backend = create_backend("cupy")
    backend.open(build_job(ctx, timing=TimingOptions(warmup=1, reps=3, min_time_ms=0.0)))
    default = ctx.space.default()
    try:  # every size of its spec, each checked against the original's bytes (its sum in half: the order kept)
        configs = [
            Config.of({**default, VARIANT: k, ITEMS: p, KEEP: keep, STRIDED: apart})
            for apart in (0, 1)
            for keep in (0, 1)
            for p in (1, 2, 4, 8)
        ]
        for config in [*configs, narrowed(configs[-1])]:  # and with 32-bit indices
            measured = backend.evaluate(config)
            assert measured.ok, f"{dict(config)}: {measured.failure} {measured.detail}"
    finally:
        backend.close()
