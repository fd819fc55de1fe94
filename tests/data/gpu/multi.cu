// Several kernels in one unit: a plain one, an extern "C" one, and two template instances.
__global__ void scale_kernel(float* x, float a, int n) {
  __shared__ float buf[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (i < n) x[i] = a * buf[255 - threadIdx.x];
}

__constant__ float coeffs[16];

extern "C" __global__ void add_coeffs(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += coeffs[i & 15];
}

template <typename T, int N>
__global__ void tiled_kernel(T* x) {
  __shared__ T tile[N];
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = tile[N - 1 - threadIdx.x];
}

template __global__ void tiled_kernel<float, 128>(float*);
template __global__ void tiled_kernel<double, 64>(double*);
