// Constructs tree-sitter-cuda cannot parse, each next to a kernel that must still be found.
struct __align__(16) Packed {
  float x, y, z, w;
};

__global__ void __launch_bounds__(128, 1, 2) three_bounds(float* x) { x[0] = 1; }

__global__ void __cluster_dims__(2, 1, 1) clustered(float* x) { x[0] = 2; }

__global__ void plain(float* x) {
  auto f = [] __device__ (float v) { return v * 2; };
  x[0] = f(x[0]);
}

__global__ void broken(float* x) {
  x[0] = = 3;
}

void host(float* x) {
  plain<<<dim3{1, 2}, {128}>>>(x);
}

__global__ void unterminated(float* x) {
  for (int i = 0; i < 4; ++i) {
    x[i] = 4;
