// Stand-in for cuRAND's device header on a machine whose CUDA toolkit lacks it (compile-only checks): the names
// flashinfer's sampling kernels use, declared only. The kernels benchmarked from that header never call them, and
// the sampling kernels that do are templates no compile here instantiates.
#pragma once
struct curandStatePhilox4_32_10 {
  unsigned int ctr[4], output[4], key[2], state;
  int boxmuller_flag, boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
typedef struct curandStatePhilox4_32_10 curandStatePhilox4_32_10_t;
__device__ void curand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                            curandStatePhilox4_32_10_t* state);
__device__ float curand_uniform(curandStatePhilox4_32_10_t* state);
__device__ float4 curand_uniform4(curandStatePhilox4_32_10_t* state);
// LightSeq's inference kernels (held out) name the default generator's state in their declarations
struct curandStateXORWOW {
  unsigned int d, v[5];
  int boxmuller_flag, boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
typedef struct curandStateXORWOW curandState;
__device__ void curand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                            curandState* state);
__device__ float curand_uniform(curandState* state);
__device__ float4 curand_uniform4(curandState* state);
