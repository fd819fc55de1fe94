// A CUDA launch emulated on the host, for checking a kernel's variants bit for bit without a GPU: each warp runs
// as 32 std::threads that meet at every shuffle (each lane publishes its value, all wait, each reads its partner's),
// one warp at a time. Enough of the CUDA device API for shuffle-only kernels on blocks whose rows are whole warps; a
// lane that returns drops out of the warp's later meetings.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }

inline thread_local uint3 threadIdx, blockIdx;
inline uint3 blockDim, gridDim;
inline std::barrier<>* warp_meeting = nullptr;
inline unsigned char warp_slots[32][16];

template <class T>
T __shfl_xor_sync(unsigned, T value, int offset, int width = 32) {
  static_assert(sizeof(T) <= sizeof(warp_slots[0]));
  const unsigned lane = threadIdx.x % 32;
  const unsigned partner = lane ^ static_cast<unsigned>(offset);
  std::memcpy(warp_slots[lane], &value, sizeof(T));
  warp_meeting->arrive_and_wait();
  T got;
  std::memcpy(&got, warp_slots[partner / width == lane / width ? partner : lane], sizeof(T));
  warp_meeting->arrive_and_wait();
  return got;
}

inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }

// Runs `kernel` on a grid of (grid_x, grid_y) blocks of (block_x, block_y) threads, block_x whole warps (a warp is 32
// consecutive threads along x, so it lies within one row of the block).
inline void launch(unsigned grid_x, unsigned grid_y, unsigned block_x, unsigned block_y,
                   const std::function<void()>& kernel) {
  blockDim = {block_x, block_y, 1};
  gridDim = {grid_x, grid_y, 1};
  for (unsigned b = 0; b < grid_x * grid_y; ++b) {
    for (unsigned w = 0; w < block_x / 32 * block_y; ++w) {
      std::barrier<> meeting(32);
      warp_meeting = &meeting;
      std::vector<std::thread> lanes;
      for (unsigned l = 0; l < 32; ++l) {
        lanes.emplace_back([&, b, w, l] {
          blockIdx = {b % grid_x, b / grid_x, 0};
          threadIdx = {w % (block_x / 32) * 32 + l, w / (block_x / 32), 0};
          kernel();
          meeting.arrive_and_drop();
        });
      }
      for (auto& lane : lanes) lane.join();
    }
  }
}

// Runs `kernel` on a one-dimensional grid of one-dimensional blocks of whole warps.
inline void launch(unsigned grid, unsigned block, const std::function<void()>& kernel) {
  launch(grid, 1, block, 1, kernel);
}
