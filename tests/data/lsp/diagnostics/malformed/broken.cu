// Not CUDA that tree-sitter can read: the server must survive it.
#define KERNEL(name) __global__ void name
template <int N
__global__ void half_written(float* x, int n {
  for (int i = 0; i < n; i += ) {
    x[i] = }}}} ;;; <<<>>> ((( "unterminated
}
__global__ void fine(float* x) { x[threadIdx.x] = 1.0f; }
void launch(float* x) { fine<<<1, 64>>>(x); }
