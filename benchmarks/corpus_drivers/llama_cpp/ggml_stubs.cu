// The few ggml symbols a single ggml-cuda file references outside itself, for a driver library that links one
// file alone: error paths only (the drivers never reach them), so each aborts with what it was given.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "common.cuh"

void ggml_cuda_error(const char * stmt, const char * func, const char * file, int line, const char * msg) {
    std::fprintf(stderr, "CUDA error %s in %s (%s:%d): %s\n", stmt, func, file, line, msg);
    std::abort();
}

void ggml_cuda_set_device(int device) {
    if (cudaSetDevice(device) != cudaSuccess) {
        std::abort();
    }
}

extern "C" void ggml_abort(const char * file, int line, const char * fmt, ...) {
    std::fprintf(stderr, "ggml_abort at %s:%d: ", file, line);
    va_list args;
    va_start(args, fmt);
    std::vfprintf(stderr, fmt, args);
    va_end(args);
    std::fputc('\n', stderr);
    std::abort();
}
