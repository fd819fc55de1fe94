// Rows kept in local arrays by counted loops, in shapes the reading must refuse (or leave alone).
#define REGS 8

// the loop over the whole rounds has no tail: a row longer than a multiple of the block leaves elements undone
__global__ void no_tail_kernel(float* out, const float* in, int n) {
  __shared__ float partial[32];
  float vals[REGS];
  const int tid = threadIdx.x;
  const int rounds = n / blockDim.x;
  float sum = 0.f;
  for (int r = 0; r < rounds; r++) {
    vals[r] = in[blockIdx.x * n + r * blockDim.x + tid];
    sum += vals[r];
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (tid % 32 == 0) partial[tid / 32] = sum;
  __syncthreads();
  for (int r = 0; r < rounds; r++) out[blockIdx.x * n + r * blockDim.x + tid] = vals[r] - partial[0];
}

// the tail scales the last element where the loop does not
__global__ void odd_tail_kernel(float* out, const float* in, int n) {
  float vals[REGS];
  const int tid = threadIdx.x;
  int rounds = n / blockDim.x;
  const int last = rounds * blockDim.x + tid;
  float sum = 0.f;
  for (int r = 0; r < rounds; r++) {
    vals[r] = in[blockIdx.x * n + r * blockDim.x + tid];
    sum += vals[r];
  }
  if (last < n) {
    vals[rounds] = 2.f * in[blockIdx.x * n + last];
    sum += vals[rounds];
    rounds++;
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  for (int r = 0; r < rounds; r++) out[blockIdx.x * n + r * blockDim.x + tid] = vals[r] / sum;
}

// weighted by the round's number: a number the block-stride loop does not count
__global__ void round_number_kernel(float* out, const float* in, int n) {
  float vals[REGS];
  const int tid = threadIdx.x;
  int rounds = n / blockDim.x;
  const int last = rounds * blockDim.x + tid;
  float sum = 0.f;
  for (int r = 0; r < rounds; r++) {
    vals[r] = in[blockIdx.x * n + r * blockDim.x + tid];
    sum += vals[r];
  }
  if (last < n) {
    vals[rounds] = in[blockIdx.x * n + last];
    sum += vals[rounds];
    rounds++;
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  for (int r = 0; r < rounds; r++) out[blockIdx.x * n + r * blockDim.x + tid] = vals[r] * r / sum;
}

// the first loop adds to values no loop has set
__global__ void unset_kernel(float* out, const float* in, int n) {
  float vals[REGS];
  const int tid = threadIdx.x;
  int rounds = n / blockDim.x;
  const int last = rounds * blockDim.x + tid;
  float sum = 0.f;
  for (int r = 0; r < rounds; r++) {
    vals[r] += in[blockIdx.x * n + r * blockDim.x + tid];
    sum += vals[r];
  }
  if (last < n) {
    vals[rounds] += in[blockIdx.x * n + last];
    sum += vals[rounds];
    rounds++;
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  for (int r = 0; r < rounds; r++) out[blockIdx.x * n + r * blockDim.x + tid] = vals[r] / sum;
}

// keeps the centred row in registers, reads the input again from memory for the second moment
__global__ void reread_kernel(float* out, const float* in, int n) {
  __shared__ float partial[32];
  float centred[REGS];
  const int tid = threadIdx.x;
  int rounds = n / blockDim.x;
  const int last = rounds * blockDim.x + tid;
  const float* row = in + blockIdx.x * n;
  float sum = 0.f;
  for (int r = 0; r < rounds; r++) sum += row[r * blockDim.x + tid];
  if (last < n) sum += row[last];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (tid % 32 == 0) partial[tid / 32] = sum;
  __syncthreads();
  const float mean = partial[0] / n;
  for (int r = 0; r < rounds; r++) centred[r] = row[r * blockDim.x + tid] - mean;
  if (last < n) {
    centred[rounds] = row[last] - mean;
    rounds++;
  }
  for (int r = 0; r < rounds; r++) out[blockIdx.x * n + r * blockDim.x + tid] = centred[r];
}

// drops the row's last element after counting the rounds: the rounds were counted over a longer row
__global__ void shrinking_row_kernel(float* out, const float* in, int n) {
  float vals[REGS];
  const int tid = threadIdx.x;
  int rounds = n / blockDim.x;
  const int last = rounds * blockDim.x + tid;
  n -= 1;
  float sum = 0.f;
  for (int r = 0; r < rounds; r++) {
    vals[r] = in[blockIdx.x * n + r * blockDim.x + tid];
    sum += vals[r];
  }
  if (last < n) {
    vals[rounds] = in[blockIdx.x * n + last];
    sum += vals[rounds];
    rounds++;
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  for (int r = 0; r < rounds; r++) out[blockIdx.x * n + r * blockDim.x + tid] = vals[r] / sum;
}

// a fixed number of packs a thread (a template count): not rounds of the block over a row, left alone
template <int UNROLL>
__global__ void unrolled_kernel(float* out, const float* in, int n) {
  float vals[UNROLL];
  for (int u = 0; u < UNROLL; u++) vals[u] = in[blockIdx.x * n + u * blockDim.x + threadIdx.x];
  for (int u = 0; u < UNROLL; u++) out[blockIdx.x * n + u * blockDim.x + threadIdx.x] = 2.f * vals[u];
}
