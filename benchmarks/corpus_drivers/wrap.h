// Entry points the corpus drivers call through ctypes: each calls the project's own host launcher (so grid, block
// and arguments are computed the way the project computes them) on the default stream and returns the CUDA status.
#pragma once
#include <cuda_runtime.h>
#define CORPUS_ENTRY extern "C" __attribute__((visibility("default"))) int
#define CORPUS_STATUS return static_cast<int>(cudaGetLastError())
