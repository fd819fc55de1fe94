"""grid_stride_guard: one-element-per-thread kernels written as grid-stride loops (checked on the rewritten
text, and by the transforms that then apply), and the reasons it refuses."""

from __future__ import annotations

import pytest

from cutune.cuda.parse import parse_source
from cutune.project import open_kernel
from cutune.template.variants import propose_variants
from cutune.template.variants.canonical import canonicalise
from cutune.template.variants.canonical.guard import grid_stride_guard

from .samples import SAMPLES

EARLY = """
template <typename T>
__global__ void k(T* __restrict__ out, const T* __restrict__ in, long n, float s) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  const float scale = s * 2.0f;
  const long row = i / 64;
  if (i >= n || row > 100000) return;
  out[i] = static_cast<T>(static_cast<float>(in[i]) * scale + row);
}
"""

ENCLOSING = """
__global__ void k(float* out, const float* in, const int n) {
  constexpr int kWidth = 4;
  const int offset = (threadIdx.x + blockIdx.x * blockDim.x) * kWidth;
  if (offset < n) {
    for (int j = 0; j < kWidth; ++j) {
      if (offset + j >= n) break;
      out[offset + j] = in[offset + j] * 2.0f;
    }
  }
}
"""


def _body(source: str) -> str:
    result = grid_stride_guard(parse_source(source), "k")
    assert result is not None and not isinstance(result, str), result
    k = result.kernel("k")
    return "".join(result.text[k.body_span.start_byte : k.body_span.end_byte].split())


def test_an_early_return_guard_becomes_a_grid_stride_loop_with_the_other_conditions_inside() -> None:
    body = _body(EARLY)
    assert "for(longi=(long)blockIdx.x*blockDim.x+threadIdx.x;i<n;i+=blockDim.x*gridDim.x){" in body
    # the declaration that does not read i stays before the loop; the one that does moves in, before the test
    assert body.index("constfloatscale") < body.index("for(")
    assert "constlongrow=i/64;if(row>100000)continue;out[i]" in body
    variants, _ = propose_variants(parse_source(EARLY), "k", None)
    assert {v.name for v in variants} >= {"vectorized", "packs_per_thread", "persistent_grid"}


def test_a_scaled_index_loops_over_packs_and_keeps_its_index() -> None:
    body = _body(ENCLOSING)
    assert (
        "for(intcutune_pack_offset=(threadIdx.x+blockIdx.x*blockDim.x);"
        "cutune_pack_offset<((n)+(kWidth)-1)/(kWidth);cutune_pack_offset+=blockDim.x*gridDim.x){"
        "constintoffset=cutune_pack_offset*(kWidth);"
    ) in body
    assert "if(offset+j>=n)break;" in body


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("if (i >= n) return; __syncthreads(); out[i] = 1.0f;", "threads cooperate through __syncthreads"),
        ("if (i >= n) return; out[i] = threadIdx.x;", "threadIdx.x is read beyond the index i"),
        ("if (i >= n) return; out[i] = 1.0f; n = 3;", "the bound `n` reads n, which the kernel changes"),
        ("if (i >= n) { out[0] = 1.0f; return; } out[i] = 1.0f;", "the guard on i does more than `return;`"),
        ("if (i >= n) return; else out[i] = 1.0f;", "the guard on i has an else branch"),
        ("if (i < n) out[i] = 1.0f; out[0] = 2.0f;", "statements follow the guarded block of i"),
        ("if (i + 1 >= n) return; out[i] = 1.0f;", "the guard at line 3 is not `i >= n` (return)"),
        ("out[i] = 1.0f;", "no bounds check on i after its declaration"),
        ("const int j = i * 2; if (j > 7) return; if (i >= n) return;", "the first check after the thread index"),
        ("const int row = i / n; if (row >= 4) return; out[i] = 1.0f;", None),
        ("const int row = i / out[0]; if (row >= 4) return;", "a quotient of a thread index by `out[0]`"),
        ("if (i > n - 1) return; out[i] = 1.0f;", None),  # n signed: `n - 1` cannot wrap
        ("if (i > m - 1) return; out[i] = 1.0f;", "the guard at line 3 is not `i >= n`"),  # m unsigned: 0 - 1 wraps
    ],
)
def test_shapes_a_loop_could_change_are_refused_with_the_reason(body: str, reason: str | None) -> None:
    source = (
        "__global__ void k(float* out, int n, unsigned m) {\n"
        f"  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n  {body}\n}}"
    )
    result = grid_stride_guard(parse_source(source), "k")
    if reason is None:  # the shapes beside them that are bounds checks after all
        assert result is not None and not isinstance(result, str), result
    else:
        assert isinstance(result, str) and reason in result, result


@pytest.mark.parametrize(
    ("declaration", "guard", "header"),
    [
        # the row's check is the flat index's check against rows * cols, in the index's type (it may pass 2^32)
        (
            "const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;",
            "if (row >= rows) return;",
            "for(longi=(long)blockIdx.x*blockDim.x+threadIdx.x;i<static_cast<long>(rows)*(cols);",
        ),
        (
            "const auto i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;",
            "if (rows <= row) return;",
            "for(autoi=(unsignedlonglong)blockIdx.x*blockDim.x+threadIdx.x;"
            "i<static_cast<decltype((unsignedlonglong)blockIdx.x*blockDim.x+threadIdx.x)>(rows)*(cols);",
        ),
    ],
)
def test_a_check_of_the_row_a_flat_index_divides_into_bounds_the_flat_index(
    declaration: str, guard: str, header: str
) -> None:
    source = f"""
__global__ void k(float* out, const bool* live, const float* scale, int rows, int cols) {{
  {declaration}
  const int row = i / cols;
  {guard}
  if (!live[row]) return;
  out[i] *= scale[row];
}}
"""
    body = _body(source)
    assert header in body
    # the row moves into the loop, and the row mask's exit ends only its iteration
    assert "constintrow=i/cols;if(!live[row])continue;out[i]*=scale[row];}" in body
    variants, _ = propose_variants(parse_source(source), "k", None)
    assert {v.name for v in variants} >= {"vectorized", "packs_per_thread", "persistent_grid"}


def test_a_block_guarded_by_the_row_of_a_flat_index_loops_over_the_flat_index() -> None:
    source = """
__global__ void k(float* out, const float* bias, unsigned rows, unsigned cols) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned row = i / cols;
  const unsigned col = i - row * cols;
  if (row < rows) {
    out[i] += bias[col];
  }
}
"""
    body = _body(source)
    assert "for(unsignedi=blockIdx.x*blockDim.x+threadIdx.x;i<static_cast<unsigned>(rows)*(cols);" in body
    assert "constunsignedrow=i/cols;constunsignedcol=i-row*cols;out[i]+=bias[col];}" in body


@pytest.mark.parametrize(
    ("call", "loops"),
    [
        ("atomicAdd(out + i % 4, 1.0f);", True),  # each element's own update: it commutes with every other thread's
        ("gpuAtomicAdd(&out[i / 2], 2.0f);", True),  # a framework's spelling of it
        ("atomicMax_block(flags + i % 8, 1);", True),
        ("atomicAggInc(flags);", False),  # an aggregating helper may let the warp's lanes meet
        ("block_sum(out[i]);", False),
    ],
)
def test_an_atomic_on_one_address_is_the_elements_own_update(call: str, loops: bool) -> None:
    source = (
        "__global__ void k(float* out, int* flags, int n) {\n  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"  if (i >= n) return;\n  {call}\n}}"
    )
    result = grid_stride_guard(parse_source(source), "k")
    if loops:
        assert not isinstance(result, str) and result is not None, result
    else:
        assert isinstance(result, str) and "which may make the threads of a warp or block cooperate" in result


def test_a_return_inside_a_nested_loop_is_refused() -> None:
    # there a `return` ends the thread: as `continue` it would end only the inner loop
    result = grid_stride_guard(parse_source(ENCLOSING.replace("break;", "return;")), "k")
    assert isinstance(result, str) and "a `return` inside a loop, switch or lambda" in result


def test_kernels_without_a_thread_index_are_left_alone() -> None:
    source = "__global__ void k(float* out, int n) { for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = 0; }"
    assert grid_stride_guard(parse_source(source), "k") is None
    assert canonicalise(parse_source(source), "k").applied == ()


def test_the_recipes_block_chunks_of_a_guarded_kernel_are_read_as_the_same_grid_stride_loop() -> None:
    # items_per_thread wraps the guarded body in a loop over block-chunks before the transforms see it
    ctx = open_kernel(SAMPLES / "bias_gelu.cu", "bias_gelu_kernel")
    assert "ITEMS_PER_THREAD" in {p.name for p in ctx.template.space.params}
    canonical = canonicalise(ctx.template_model, "bias_gelu_kernel")
    assert canonical.applied == ("ldg_reads", "grid_stride_guard")  # its `__ldg(&x[i])` reads are plain reads first
    k = canonical.model.kernel("bias_gelu_kernel")
    body = "".join(canonical.model.text[k.body_span.start_byte : k.body_span.end_byte].split())
    assert "for(int64_ti=static_cast<int64_t>(blockIdx.x)*blockDim.x+threadIdx.x;i<numel;" in body
    assert "item" not in body


def test_a_check_of_two_indices_loops_over_the_x_axis_and_takes_the_other_check_once_before_it() -> None:
    source = """
__global__ void k(float* out, const float* in, int ncols, int nrows) {
  const int row = blockDim.y * blockIdx.y + threadIdx.y;
  const int col = blockDim.x * blockIdx.x + threadIdx.x;
  if (col >= ncols || row >= nrows) return;
  out[row * ncols + col] = in[row * ncols + col] * 0.5f;
}
"""
    body = _body(source)
    assert "for(intcol=blockDim.x*blockIdx.x+threadIdx.x;col<ncols;col+=blockDim.x*gridDim.x){" in body
    # the row's check is the same on every iteration: the thread leaves before the loop, as it did
    assert "constintrow=blockDim.y*blockIdx.y+threadIdx.y;if(row>=nrows)return;for(" in body
    assert "continue" not in body
    # so vectorize packs the row's arrays: no iteration reads past the last row
    variants, _ = propose_variants(parse_source(source), "k", None)
    vectorized = next(v.body for v in variants if v.name == "vectorized")
    assert "cutune_vec_load<cutune_vec_w0>(&in[(row * ncols) + cutune_vec_p0 * cutune_vec_w0])" in vectorized


@pytest.mark.parametrize(
    ("check", "stays"),
    [
        ("if (row >= nrows) return;", False),  # a later exit on what no iteration changes: taken before the loop
        ("if (in[row] < 0.0f) return;", True),  # a memory read (the kernel may write it)
        ("if (col % 2 == 1) return;", True),  # the index
        ("if (limit(row) < 0) return;", True),  # a call
    ],
)
def test_only_an_exit_no_iteration_can_change_is_taken_before_the_loop(check: str, stays: bool) -> None:
    source = f"""
__device__ int limit(int r) {{ return r - 1; }}
__global__ void k(float* out, const float* in, int ncols, int nrows) {{
  const int row = blockDim.y * blockIdx.y + threadIdx.y;
  const int col = blockDim.x * blockIdx.x + threadIdx.x;
  if (col >= ncols) return;
  {check}
  out[row * ncols + col] = in[row * ncols + col] * 0.5f;
}}
"""
    body = _body(source)
    exit_text = "".join(check.split())
    if stays:  # inside the loop, as the iteration's own exit
        assert exit_text.replace("return;", "continue;") in body and exit_text not in body
    else:
        assert body.index(exit_text) < body.index("for(") and "continue" not in body


def test_an_exit_on_the_row_before_the_columns_check_stays_before_the_loop() -> None:
    # 2-D code checks its row first: the thread's row is the same for every column it may take
    source = """
__global__ void k(unsigned* out, const unsigned short* in, int rows, int cols) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  if (col >= cols) return;
  out[row * cols + col] = in[row * cols + col] + 1u;
}
"""
    body = _body(source)
    assert "introw=blockIdx.y*blockDim.y+threadIdx.y;if(row>=rows)return;for(intcol=" in body
    assert "col<cols;col+=blockDim.x*gridDim.x){out[row*cols+col]" in body
    variants, _ = propose_variants(parse_source(source), "k", None)
    assert {v.name for v in variants} >= {"vectorized", "packs_per_thread"}
