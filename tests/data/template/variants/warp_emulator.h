// A CUDA launch emulated on the host, for checking a kernel's variants without a GPU: each block runs as one
// std::thread per CUDA thread, one block at a time; a warp's 32 meet at every shuffle (each lane publishes its value,
// all wait, each reads its partner's), the block's at __syncthreads, and `__shared__` is a static local (one per
// function, which one block at a time makes the block's; dynamic shared memory one buffer). Enough of the CUDA device
// API for kernels of xor shuffles (within `width` lanes) and barriers; a warp is 32 consecutive threads of the block
// in row order (the last one maybe partial, as on a GPU), and a thread that returns drops out of its warp's and its
// block's later meetings.
#pragma once
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__

inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
using std::max;
using std::min;

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }

inline thread_local uint3 threadIdx, blockIdx;
inline uint3 blockDim, gridDim;
// each warp's meetings and exchange slots (the lane's warp picks them), and the block's barrier
inline std::vector<std::barrier<>*> warp_meetings;
inline std::barrier<>* block_meeting = nullptr;
inline unsigned char warp_slots[32][32][16];

// The calling thread's place in its block: 32 consecutive ones make a warp.
inline unsigned thread_in_block() { return threadIdx.y * blockDim.x + threadIdx.x; }

template <class T>
T __shfl_xor_sync(unsigned, T value, int offset, int width = 32) {
  static_assert(sizeof(T) <= sizeof(warp_slots[0][0]));
  const unsigned lane = thread_in_block() % 32, warp = thread_in_block() / 32;
  const unsigned partner = lane ^ static_cast<unsigned>(offset);
  std::memcpy(warp_slots[warp][lane], &value, sizeof(T));
  warp_meetings[warp]->arrive_and_wait();
  T got;
  std::memcpy(&got, warp_slots[warp][partner / width == lane / width ? partner : lane], sizeof(T));
  warp_meetings[warp]->arrive_and_wait();
  return got;
}

inline void __syncthreads() { block_meeting->arrive_and_wait(); }

// The block's dynamic shared memory: `extern __shared__ T name[];` is written `T* name = dynamic_shared<T>();` for
// the host (the tests do); one buffer, which one block at a time makes the block's.
inline std::vector<unsigned char> dynamic_shared_bytes(1 << 20);
template <class T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(dynamic_shared_bytes.data());
}

// Runs `kernel` on a grid of (grid_x, grid_y) blocks of (block_x, block_y) threads, one block at a time, its threads
// all at once (a `static` local is then the block's shared memory).
inline void launch(unsigned grid_x, unsigned grid_y, unsigned block_x, unsigned block_y,
                   const std::function<void()>& kernel) {
  blockDim = {block_x, block_y, 1};
  gridDim = {grid_x, grid_y, 1};
  const unsigned threads_per_block = block_x * block_y;
  for (unsigned b = 0; b < grid_x * grid_y; ++b) {
    std::vector<std::unique_ptr<std::barrier<>>> meetings;
    warp_meetings.clear();
    for (unsigned w = 0; w * 32 < threads_per_block; ++w) {
      meetings.push_back(std::make_unique<std::barrier<>>(std::min(32u, threads_per_block - w * 32)));
      warp_meetings.push_back(meetings.back().get());
    }
    std::barrier<> whole(threads_per_block);
    block_meeting = &whole;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < threads_per_block; ++t) {
      threads.emplace_back([&, b, t] {
        blockIdx = {b % grid_x, b / grid_x, 0};
        threadIdx = {t % block_x, t / block_x, 0};
        kernel();
        warp_meetings[t / 32]->arrive_and_drop();
        whole.arrive_and_drop();
      });
    }
    for (auto& thread : threads) thread.join();
  }
}

// Runs `kernel` on a one-dimensional grid of one-dimensional blocks.
inline void launch(unsigned grid, unsigned block, const std::function<void()>& kernel) {
  launch(grid, 1, block, 1, kernel);
}
