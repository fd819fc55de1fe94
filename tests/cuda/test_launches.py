"""Launch sites read from host code: launches of a local set to the kernel resolve to the kernel (cuda/launches.py)."""

from __future__ import annotations

from cutune.cuda.parse import parse_source

HOST = """\
template <typename T, int N>
__global__ void scale_kernel(T* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= N; }
__global__ void plain_kernel(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] = 0; }
typedef void (*fp_t)(float*, int);
fp_t pick(int n) {
  if (n > 64) return scale_kernel<float, 1>;
  if (n < 0) return NULL;
  return n > 4 ? &scale_kernel<float, 2> : &scale_kernel<float, 3>;
}
fp_t choose(int n) { return n > 4 ? &scale_kernel<float, 2> : plain_kernel; }
void host(float* x, int n, cudaStream_t stream, bool big) {
  auto kernel = &scale_kernel<float, 4>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536);
  kernel<<<(n + 255) / 256, 256, 65536, stream>>>(x, n);
  void (*fn)(float*, int) = plain_kernel;
  fn<<<1, 128>>>(x, n);
  auto either = big ? &scale_kernel<float, 8> : (&scale_kernel<float, 8>);
  either<<<2, 64>>>(x, n);
  auto two = big ? &scale_kernel<float, 8> : &scale_kernel<float, 1>;
  two<<<2, 64>>>(x, n);
  fp_t picked = pick(n);
  picked<<<3, 32>>>(x, n);
  auto mixed = big ? &scale_kernel<float, 8> : &plain_kernel;
  mixed<<<6, 32>>>(x, n);
  fp_t chosen = choose(n);
  chosen<<<7, 32>>>(x, n);
  auto later = &scale_kernel<float, 5>;
  later = &scale_kernel<float, 6>;
  later<<<4, 32>>>(x, n);
  {
    auto kernel = plain_kernel;
    kernel<<<5, 32>>>(x, n);
  }
}
"""


def test_a_local_set_to_the_kernel_launches_that_kernel_with_the_initializers_template_arguments() -> None:
    m = parse_source(HOST, "host.cu")
    found = [(s.kernel, s.template_args, s.through, s.grid, s.block, s.shared_mem) for s in m.launches]
    assert found == [
        ("scale_kernel", ("float", "4"), "kernel", "(n + 255) / 256", "256", "65536"),
        ("plain_kernel", (), "fn", "1", "128", None),  # a function-pointer declarator
        ("scale_kernel", ("float", "8"), "either", "2", "64", None),  # both arms the same instance
        # instances of one kernel: the conditional's, those a function of the file returns (its null left out)
        ("scale_kernel", (), "two", "2", "64", None),
        ("scale_kernel", (), "picked", "3", "32", None),
        # different kernels, a local assigned again: not resolved
        ("mixed", (), None, "6", "32", None),
        ("chosen", (), None, "7", "32", None),
        ("later", (), None, "4", "32", None),
        ("plain_kernel", (), "kernel", "5", "32", None),  # the nearest declaration: the inner block's
    ]


def test_a_kernels_launches_are_found_alike_with_or_without_the_files_others() -> None:
    # the search for one kernel's launches looks further back for a launch of a local than for a named one
    padding = "// " + "x" * 2000 + "\n"
    text = HOST.replace("  cudaFuncSetAttribute", padding + "  cudaFuncSetAttribute")
    alone = parse_source(text, "host.cu").launches_of("scale_kernel")
    everything = [s for s in parse_source(text, "host.cu").launches if s.kernel == "scale_kernel"]
    assert (
        [(s.through, s.grid) for s in alone]
        == [(s.through, s.grid) for s in everything]
        == [
            ("kernel", "(n + 255) / 256"),
            ("either", "2"),
            ("two", "2"),
            ("picked", "3"),
        ]
    )
