// LayerNorm with two reductions (mean, then variance) through a shared-memory tree; float rows.
__global__ void layer_norm_kernel(float* out, const float* x, const float* gamma, const float* beta, int rows,
                                  int n, float eps) {
  __shared__ float buf[1024];
  __shared__ float s_mean;
  __shared__ float s_rstd;
  const int tid = threadIdx.x;
  float local = 0.0f;
  for (int i = tid; i < n; i += blockDim.x) local += x[blockIdx.x * n + i];
  buf[tid] = local;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) buf[tid] += buf[tid + s];
    __syncthreads();
  }
  if (tid == 0) s_mean = buf[0] / n;
  __syncthreads();
  float sq = 0.0f;
  for (int i = tid; i < n; i += blockDim.x) {
    const float d = x[blockIdx.x * n + i] - s_mean;
    sq += d * d;
  }
  buf[tid] = sq;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) buf[tid] += buf[tid + s];
    __syncthreads();
  }
  if (tid == 0) s_rstd = rsqrtf(buf[0] / n + eps);
  __syncthreads();
  for (int i = tid; i < n; i += blockDim.x) {
    out[blockIdx.x * n + i] = (x[blockIdx.x * n + i] - s_mean) * s_rstd * gamma[i] + beta[i];
  }
}
