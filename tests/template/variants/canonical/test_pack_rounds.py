"""pack_rounds: counted loops over the block's rounds of W-element packs, the bounds check inside, read as stride loops
over packs (a 1-D block, or a (32, warps) block its launches show), refused with the reason where they cannot be."""

from __future__ import annotations

import pytest

from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.template.variants.canonical import canonicalise
from cutune.template.variants.canonical.pack_rounds import pack_rounds
from cutune.template.variants.row_reduce import RowReduce

from .samples import SAMPLES

# a (32, warps) block numbered in order, a pack type, the offset written whole in the calls; `LAUNCH` is replaced
WARPS = """
template <typename T, int N>
struct Pack {
  T v[N];
  __device__ void fill(float x) { for (int k = 0; k < N; ++k) v[k] = T(x); }
  __device__ void load(const T* p) { *this = *reinterpret_cast<const Pack*>(p); }
  __device__ void store(T* p) const { *reinterpret_cast<Pack*>(p) = *this; }
  __device__ T& operator[](int k) { return v[k]; }
};

__host__ __device__ constexpr unsigned ceil_div(unsigned a, unsigned b) { return (a + b - 1) / b; }

template <unsigned W, typename T>
__global__ void k(T* __restrict__ out, const T* __restrict__ in, unsigned n, float eps) {
  constexpr unsigned kWarp = 32;
  const unsigned tx = threadIdx.x, ty = threadIdx.y;
  const unsigned t = tx + ty * kWarp;
  const unsigned threads = blockDim.y * kWarp;
  const unsigned rounds = ceil_div(n, W * threads);
  __shared__ float partial[32];
  float ss = 0.f;
  for (unsigned r = 0; r < rounds; r++) {
    Pack<T, W> x;
    x.fill(0.f);
    if ((r * threads + t) * W < n) x.load(in + blockIdx.x * n + r * threads * W + t * W);
    for (unsigned j = 0; j < W; j++) ss += float(x[j]) * float(x[j]);
  }
  for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (tx == 0) partial[ty] = ss;
  __syncthreads();
  if (ty == 0) {
    ss = tx < blockDim.y ? partial[tx] : 0.f;
    for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (tx == 0) partial[0] = ss;
  }
  __syncthreads();
  const float inv = rsqrtf(partial[0] / n + eps);
  for (unsigned r = 0; r < rounds; r++) {
    Pack<T, W> x, y;
    x.fill(0.f);
    if ((r * threads + t) * W < n) x.load(in + blockIdx.x * n + (r * threads + t) * W);
    for (unsigned j = 0; j < W; j++) y[j] = T(float(x[j]) * inv);
    if ((r * threads + t) * W < n) y.store(out + blockIdx.x * n + (r * threads + t) * W);
  }
}

void launch(float* out, const float* in, unsigned rows, unsigned n, cudaStream_t stream) {
  LAUNCH
}
"""
EX = """cudaLaunchConfig_t config = {};
  config.gridDim = dim3(rows);
  config.blockDim = dim3(X, 8);
  config.stream = stream;
  cudaLaunchKernelEx(&config, k<4, float>, out, in, n, 1e-6f);"""
CHEVRONS = "dim3 block(X, 8);\n  k<4, float><<<rows, block, 0, stream>>>(out, in, n, 1e-6f);"


def _source(launch: str = EX, x: str = "32") -> str:
    return WARPS.replace("LAUNCH", launch.replace("X", x))


def _body(source: str) -> str:
    result = pack_rounds(parse_source(source), "k")
    assert result is not None and not isinstance(result, str), result
    k = result.kernel("k")
    return "".join(result.text[k.body_span.start_byte : k.body_span.end_byte].split())


@pytest.mark.parametrize("launch", [EX, CHEVRONS])
def test_rounds_over_a_warps_block_its_launch_shows_become_flat_stride_loops_over_packs(launch: str) -> None:
    body = _body(_source(launch))
    header = (
        "for(unsignedcutune_packs{}=threadIdx.y*blockDim.x+threadIdx.x;cutune_packs{}<((n)+(W)-1)/(W);"
        "cutune_packs{}+=blockDim.x*blockDim.y)"
    )
    assert header.format(*"000") in body and header.format(*"111") in body
    # both spellings of the offset, in the check and in the address, are the pack's
    assert "if(cutune_packs0*W<n)x.load(in+blockIdx.x*n+cutune_packs0*W);" in body
    assert "y.store(out+blockIdx.x*n+cutune_packs1*W);" in body and "rounds;r++" not in body


def test_a_one_dimensional_block_needs_no_launch() -> None:
    source = _source("").replace("tx + ty * kWarp", "threadIdx.x").replace("blockDim.y * kWarp", "blockDim.x")
    body = _body(source)
    assert "for(unsignedcutune_packs0=threadIdx.x;cutune_packs0<((n)+(W)-1)/(W);cutune_packs0+=blockDim.x)" in body


def _reduced(reduce: str) -> str:
    """A 1-D block of kThreads threads counted by that template parameter, `reduce` its first reduction."""
    source = (
        _source("")
        .replace("unsigned W, typename T>", "unsigned W, typename T, unsigned kThreads>")
        .replace("tx + ty * kWarp", "threadIdx.x")
        .replace("blockDim.y * kWarp", "kThreads")
        .replace(
            "  __shared__ float partial[32];",
            "  using BlockReduce = cub::BlockReduce<float, kThreads>;\n"
            "  __shared__ typename BlockReduce::TempStorage store;\n  __shared__ float partial[32];",
        )
    )
    return source.replace("  for (int o = 16;", f"  {reduce}\n  for (int o = 16;", 1)


def test_a_thread_count_its_whole_block_cub_reduction_fixes_needs_no_launch() -> None:
    body = _body(_reduced("ss = BlockReduce(store).Sum(ss);"))
    assert "for(unsignedcutune_packs0=threadIdx.x;cutune_packs0<((n)+(W)-1)/(W);cutune_packs0+=blockDim.x)" in body
    # given a count of valid threads, the reduction runs on smaller blocks too: the count is unknown
    assert pack_rounds(parse_source(_reduced("ss = BlockReduce(store).Sum(ss, n);")), "k") is None


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (_source("", ""), "no launch of k in this file says its block is 32 wide"),
        (_source(x="64"), "but the launch at line 52 runs `64` threads along x"),
        (_source(CHEVRONS, "16"), "but the launch at line 49 runs `16` threads along x"),
        # a max over lanes filled with 0: the padding rounds would raise it to 0
        (_source().replace("ss += float(x[j]) * float(x[j]);", "ss = fmaxf(ss, float(x[j]));"), "`ss=fmaxf(ss,"),
        (_source().replace("ss += float(x[j]) * float(x[j]);", "ss += float(x[j]) + 1.f;"), "rounds past the row's"),
        (_source().replace("x.fill(0.f);\n    if", "x.fill(1.f);\n    if", 1), "rounds past the row's end"),
        (_source().replace("Pack<T, W> x;\n", "Pack<T, W> x;\n    out[r] = 0;\n", 1), "reads `r` otherwise"),
        (_source().replace("j < W; j++) ss +=", "j < W; j++, ss++) ss +=", 1), "changes `ss` in a loop's header"),
        (_source().replace("float ss = 0.f;", "float ss = 0.f;\n  n -= 4;"), "over `n`, which the kernel"),
    ],
)
def test_refuses_with_its_reason(source: str, reason: str) -> None:
    result = pack_rounds(parse_source(source), "k")
    assert isinstance(result, str) and reason in result, result


def test_a_row_norm_on_a_warps_block_gets_row_reduce() -> None:
    canonical = canonicalise(parse_source(_source()), "k")
    assert canonical.applied == ("pack_rounds",)
    variant = RowReduce().apply(canonical.model, "k", None)
    assert "ss = cutune_rr_allreduce<ROW_THREADS>(ss, cutune_rr_sum{}, cutune_red0_0);" in variant.body
    assert "x.load(in + cutune_row * n + cutune_packs0 * W);" in variant.body
    assert [p.values for p in variant.params if p.name == "ROW_VEC"] == [(1,)]  # the packs are the elements


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (("y.store(out + blockIdx.x * n", "y.store(out + 0 * n"), "stores at `out+0*n+cutune_packs1*W`"),
        (("x.load(in + blockIdx.x * n + r", "x.peek(in + blockIdx.x * n + r"), "passes the row's element to `x.peek`"),
        (("x.load(in + blockIdx.x * n + (r", "x.load(stage + (r"), "stages the row in shared memory"),
    ],
)
def test_row_reduce_refuses_pack_accesses_it_cannot_read(edit: tuple[str, str], reason: str) -> None:
    source = _source().replace(*edit).replace("float ss = 0.f;", "float ss = 0.f;\n  T* stage = (T*)partial;")
    with pytest.raises(TransformRefused) as refused:
        RowReduce().apply(canonicalise(parse_source(source), "k").model, "k", None)
    assert reason in refused.value.reason


def test_the_sample_keeps_its_launch_dependency_controls_around_the_new_body() -> None:
    path = SAMPLES / "warp_pack_rms_norm.cu"
    canonical = canonicalise(parse_source(path.read_text(), str(path)), "warp_pack_rms_norm_kernel")
    body = RowReduce().apply(canonical.model, "warp_pack_rms_norm_kernel", None).body
    assert body.index('griddepcontrol.wait;" ::: "memory"') < body.index("const unsigned int cutune_row")
    assert body.rstrip().endswith('asm volatile("griddepcontrol.launch_dependents;");\n#endif')


def _softmax(edit: tuple[str, str] = ("", "")) -> str:
    path = SAMPLES / "rounds_softmax.cu"
    return path.read_text().replace(*edit) if edit[0] else path.read_text()


def test_a_softmax_with_float4_packs_gets_row_reduce_with_its_max_and_sum() -> None:
    canonical = canonicalise(parse_source(_softmax()), "rounds_softmax_kernel")
    assert canonical.applied == ("pack_rounds",)
    variant = RowReduce().apply(canonical.model, "rounds_softmax_kernel", None)
    assert "(max of row_max, sum of total)" in variant.provenance.note
    # the packs read and stored through reinterpret_cast stay as written, at the pack's offset
    assert (
        "*reinterpret_cast<float4*>(y + at) =" in variant.body and "const int at = cutune_packs2 * 4;" in variant.body
    )


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        # exp(0) is 1: a padding round would add to the sum
        (("total += (e.x + e.y) + (e.z + e.w);", "total += __expf(e.x);"), "runs `total+=__expf(e.x);`"),
        # a lane set to something else than the pack holds: the pack is no longer all -inf
        (("if (at < cols) v = *", "v.x = 0.f;\n    if (at < cols) v = *"), "runs `row_max=fmaxf(row_max,"),
    ],
)
def test_padding_rounds_that_would_change_a_total_are_refused(edit: tuple[str, str], reason: str) -> None:
    result = pack_rounds(parse_source(_softmax(edit)), "rounds_softmax_kernel")
    assert isinstance(result, str) and reason in result, result


def _fused(edit: tuple[str, str] = ("", "")) -> str:
    text = (SAMPLES / "warp_pack_rms_norm.cu").read_text()
    return text.replace(*edit) if edit[0] else text


def test_a_row_each_thread_stages_for_itself_in_dynamic_shared_memory_stays_there_from_its_start() -> None:
    canonical = canonicalise(parse_source(_fused()), "warp_pack_add_rms_norm_kernel")
    variant = RowReduce().apply(canonical.model, "warp_pack_add_rms_norm_kernel", None)
    # the reduction's scratch before the row is gone: the row starts where the dynamic array does
    assert "extern __shared__ float smem[];\nfloat* staged = smem;" in variant.body
    assert "s.store(staged + at);" in variant.body and "s.load(staged + at);" in variant.body
    assert variant.launch is not None and variant.launch.shared_mem == "{shared_mem}"  # the original's allocation


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (("s.store(staged + at);", "s.load(staged + at);"), "reads the row it stages in shared memory (staged)"),
        (("s.store(staged + at);", "s.store(staged + token * cols + at);"), "stages the row in shared memory"),
    ],
)
def test_a_row_staged_otherwise_is_refused(edit: tuple[str, str], reason: str) -> None:
    canonical = canonicalise(parse_source(_fused(edit)), "warp_pack_add_rms_norm_kernel")
    with pytest.raises(TransformRefused) as refused:
        RowReduce().apply(canonical.model, "warp_pack_add_rms_norm_kernel", None)
    assert reason in refused.value.reason


def _heads(edit: tuple[str, str] = ("", "")) -> str:
    text = (SAMPLES / "head_rms_norm.cu").read_text()
    return text.replace(*edit) if edit[0] else text


def test_a_warp_per_head_on_a_persistent_grid_is_one_head_per_block_in_turn() -> None:
    canonical = canonicalise(parse_source(_heads()), "head_rms_norm_kernel")
    assert canonical.applied == ("pack_rounds",)  # 32 threads a head: the launch's block is 32 wide
    variant = RowReduce().apply(canonical.model, "head_rms_norm_kernel", None)
    assert "persistent loop over job" in variant.provenance.note and "along y a block" in variant.provenance.note
    assert "cutune_rows_i += gridDim.x" in variant.body and "const uint32_t workers = gridDim.x;" in variant.body


def test_a_constant_thread_count_the_launch_does_not_give_is_refused() -> None:
    source = _heads(("<<<blocks, dim3(32, kWarps)", "<<<blocks, dim3(64, kWarps)"))
    result = pack_rounds(parse_source(source), "head_rms_norm_kernel")
    assert isinstance(result, str) and "counts kWarp threads a row, but the launch at line" in result, result
    assert "runs `64` threads along x" in result
