"""thread_index: a global thread index spelled through a helper or a macro, written out so the guard form is seen."""

from __future__ import annotations

from cutune.cuda.parse import parse_source
from cutune.template.variants.canonical import canonicalise
from cutune.template.variants.canonical.thread_index import written_out

HELPER = """
__device__ __forceinline__ long global_thread() { return static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x; }
#define LANE (threadIdx.x % 32)

__global__ void k(float* out, const float* in, long n) {
  const long i = global_thread();
  if (i >= n) return;
  out[i] = in[i] * 2.0f;
}
"""

MACRO = """
#define GLOBAL_TID (blockIdx.x * blockDim.x + threadIdx.x)

__global__ void k(float* out, const float* in, int n) {
  const int i = GLOBAL_TID;
  if (i < n) {
    out[i] = in[i] + 1.0f;
  }
}
"""


def _body(source: str) -> str:
    result = written_out(parse_source(source), "k")
    assert result is not None
    k = result.kernel("k")
    return "".join(result.text[k.body_span.start_byte : k.body_span.end_byte].split())


def test_an_index_helper_and_an_index_macro_are_written_out_and_the_guard_form_follows() -> None:
    assert "constlongi=(static_cast<long>(blockIdx.x)*blockDim.x+threadIdx.x);" in _body(HELPER)
    assert "constinti=(blockIdx.x*blockDim.x+threadIdx.x);" in _body(MACRO)
    for source in (HELPER, MACRO):
        assert canonicalise(parse_source(source), "k").applied == ("thread_index", "grid_stride_guard")


def test_helpers_that_take_arguments_or_read_memory_stay_calls() -> None:
    source = HELPER.replace("global_thread() {", "global_thread(int a) {").replace(
        "global_thread();", "global_thread(1);"
    )
    assert written_out(parse_source(source), "k") is None
    source = "__device__ long offset;\n" + HELPER.replace("+ threadIdx.x; }", "+ threadIdx.x + offset; }")
    assert written_out(parse_source(source), "k") is None


def test_a_cooperative_groups_block_index_is_the_builtin() -> None:
    source = """
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void k(float* out, const float* in, int n) {
  cg::thread_block tb = cg::this_thread_block();
  for (int i = tb.thread_index().x; i < n; i += tb.group_dim().x) {
    out[tb.group_index().x * n + i] = in[tb.group_index().x * n + i];
  }
}
"""
    body = _body(source)
    assert "for(inti=threadIdx.x;i<n;i+=blockDim.x){out[blockIdx.x*n+i]=in[blockIdx.x*n+i];}" in body


# the thread index split into its warp and lane and put back together (exllamav2's `warp_id * WARP_SIZE + lane_id`)
REJOINED = """
#define WARP_SIZE 32
__global__ void k(float* out, const float* in, int n) {
  const int warp = threadIdx.x / WARP_SIZE;
  const int lane = threadIdx.x % WARP_SIZE;
  const int tid = threadIdx.x;
  const int wave = tid >> 5;
  const int slot = tid & 31;
  for (int r = 0; r < 4; ++r) {
    const int i = warp * WARP_SIZE + lane + 1024 * r;
    const int j = slot + (wave << 5) + 1024 * r;
    if (i < n && j < n) out[i] = in[j];
  }
}
"""


def test_a_warp_and_lane_put_back_together_are_the_thread_index() -> None:
    body = _body(REJOINED)
    assert "constinti=threadIdx.x+1024*r;" in body and "constintj=threadIdx.x+1024*r;" in body


def test_a_parenthesised_product_alone_is_read_too() -> None:
    source = REJOINED.replace("const int i = warp * WARP_SIZE + lane + 1024 * r;", "const int i = 1024 * r;")
    assert "constintj=threadIdx.x+1024*r;" in _body(source)


def test_a_warp_and_lane_of_different_widths_or_declared_twice_stay() -> None:
    for source in (
        REJOINED.replace("tid & 31", "tid & 15"),  # slot is a lane of 16: wave * 32 + slot is not the index
        REJOINED.replace("(wave << 5)", "(wave << 4)"),
    ):
        assert "constintj=threadIdx.x" not in _body(source)
    twice = REJOINED.replace("    if (i < n", "    { const int lane = 3; out[lane] = 0.f; }\n    if (i < n")
    assert "constinti=threadIdx.x" not in _body(twice)
    written = REJOINED.replace("const int warp = ", "int warp = ").replace(
        "    if (i < n", "    warp += 1;\n    if (i < n"
    )
    assert "constinti=threadIdx.x" not in _body(written)


# a 3D-Gaussian-splatting style kernel: the global index through the grid as a cooperative group, the grid-stride
# loop of a second kernel through a local group's rank and size
GROUPS = """
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void k(float* out, const float* in, unsigned int n) {
  auto idx = cg::this_grid().thread_rank();
  if (idx >= n) return;
  out[idx] = in[idx] * 2.0f;
}
__global__ void g(float* out, const float* in, unsigned long long n) {
  cg::grid_group grid = cg::this_grid();
  for (unsigned long long i = grid.thread_rank(); i < n; i += grid.size()) {
    out[i] = in[i] + 1.0f;
  }
}
void launch(float* out, const float* in, unsigned int n, cudaStream_t s) {
  k<<<(n + 255) / 256, LAUNCH_BLOCK, 0, s>>>(out, in, n);
  g<<<dim3(132, 1), 256, 0, s>>>(out, in, n);
}
"""


def test_the_grids_rank_and_size_as_a_cooperative_group_are_the_builtins_at_a_one_dimensional_launch() -> None:
    one_d = GROUPS.replace("LAUNCH_BLOCK", "dim3(256, 1, 1)")
    # the rank is 64-bit, as thread_rank() returns it
    assert "autoidx=((unsignedlonglong)blockIdx.x*blockDim.x+threadIdx.x);" in _body(one_d)
    assert canonicalise(parse_source(one_d), "k").applied == ("thread_index", "grid_stride_guard")
    result = written_out(parse_source(one_d), "g")
    assert result is not None
    loop = "".join(result.text.split())
    rank, size = "(unsignedlonglong)blockIdx.x*blockDim.x+threadIdx.x", "(unsignedlonglong)gridDim.x*blockDim.x"
    assert f"i=({rank});i<n;i+=({size})" in loop
    # a 2-D block: the rank counts threadIdx.y too, so it stays as written
    assert written_out(parse_source(GROUPS.replace("LAUNCH_BLOCK", "dim3(32, 8)")), "k") is None
    # no launch in the file: the block's shape is unknown
    assert written_out(parse_source(GROUPS.split("void launch")[0]), "k") is None
