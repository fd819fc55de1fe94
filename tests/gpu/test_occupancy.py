from __future__ import annotations

import pytest

from cutune.gpu.occupancy import Infeasible, Limiter, occupancy, occupancy_of
from cutune.gpu.resources import ResourceUsage
from cutune.limits import limits_for

# sm_90: 64 warp slots, 32 blocks, 65536 registers in 4 sub-partitions of 16384, registers granted per
# warp in units of 256, 233472 bytes of shared memory, granted in units of 128 plus 1024 reserved.
SM90 = limits_for("sm_90")


def test_256_threads_32_registers_fill_the_sm_limited_by_warps():
    # 8 warps/block. Warps: 64 / 8 = 8 blocks. Registers: 32*32 = 1024 per warp, 16384 / 1024 = 16
    # warps per sub-partition, 64 warps, 64 / 8 = 8 blocks (a tie: warps are reported first).
    occ = occupancy(SM90, 256, 32, 0)
    assert (occ.blocks_per_sm, occ.active_warps, occ.max_warps) == (8, 64, 64)
    assert occ.limiter is Limiter.WARPS
    assert occ.occupancy == 1.0
    assert occ.feasible


def test_64_registers_halve_occupancy():
    # 64*32 = 2048 per warp, 16384 / 2048 = 8 warps per sub-partition, 32 warps, 32 / 8 = 4 blocks.
    occ = occupancy(SM90, 256, 64, 0)
    assert (occ.blocks_per_sm, occ.active_warps) == (4, 32)
    assert occ.limiter is Limiter.REGISTERS
    assert occ.occupancy == 0.5


def test_255_registers_round_up_to_the_allocation_unit():
    # 255*32 = 8160, rounded up to 8192 per warp; 16384 / 8192 = 2 warps per sub-partition, 8 warps;
    # 128 threads are 4 warps, so 2 blocks and 8 / 64 = 12.5%.
    occ = occupancy(SM90, 128, 255, 0)
    assert (occ.blocks_per_sm, occ.active_warps) == (2, 8)
    assert occ.limiter is Limiter.REGISTERS
    assert occ.occupancy == 0.125


def test_register_warps_are_counted_per_sub_partition():
    # 40*32 = 1280 per warp. Per sub-partition 16384 / 1280 = 12, so 48 warps (65536 / 1280 = 51 for the
    # whole SM would wrongly give 17 blocks); 96 threads = 3 warps: 48 / 3 = 16 blocks (warps allow 21).
    occ = occupancy(SM90, 96, 40, 0)
    assert (occ.blocks_per_sm, occ.active_warps, occ.limiter) == (16, 48, Limiter.REGISTERS)


def test_48k_shared_memory_allows_four_blocks():
    # 49152 + 1024 reserved = 50176 (a multiple of 128); 233472 / 50176 = 4.65 -> 4 blocks, 32 warps.
    occ = occupancy(SM90, 256, 32, 48 * 1024)
    assert (occ.blocks_per_sm, occ.active_warps) == (4, 32)
    assert occ.limiter is Limiter.SHARED_MEMORY
    assert occ.occupancy == 0.5


def test_shared_memory_is_granted_in_128_byte_units_after_the_reserve():
    # 6657 + 1024 = 7681, rounded up to 7808; 233472 / 7808 = 29.9 -> 29 blocks (7681 unrounded would
    # give 30, and 6657 without the reserve 34, capped at 32 by the block limit).
    # 64 threads = 2 warps: warps allow 32 blocks, registers (16*32 = 512/warp) 64 blocks.
    occ = occupancy(SM90, 64, 16, 6657)
    assert (occ.blocks_per_sm, occ.active_warps) == (29, 58)
    assert occ.limiter is Limiter.SHARED_MEMORY
    assert occ.occupancy == 58 / 64


def test_one_warp_blocks_hit_the_block_limit():
    # 1 warp/block: warps allow 64 blocks, registers 64, but an SM holds at most 32 blocks: 32 / 64 warps.
    occ = occupancy(SM90, 32, 32, 0)
    assert (occ.blocks_per_sm, occ.active_warps) == (32, 32)
    assert occ.limiter is Limiter.BLOCKS
    assert occ.occupancy == 0.5


def test_a_partial_warp_takes_a_whole_warp_slot():
    # 33 threads = 2 warps; warps allow 64 / 2 = 32 blocks = the block limit; tie goes to warps.
    occ = occupancy(SM90, 33, 32, 0)
    assert (occ.blocks_per_sm, occ.active_warps, occ.limiter) == (32, 64, Limiter.WARPS)


def test_sm86_has_48_warps_and_16_blocks():
    sm86 = limits_for("sm_86")
    # 256 threads: 48 / 8 = 6 blocks by warps (registers allow 8, blocks 16): 48 / 48 warps.
    full = occupancy(sm86, 256, 32, 0)
    assert (full.blocks_per_sm, full.limiter, full.occupancy) == (6, Limiter.WARPS, 1.0)
    # 32 threads: 16 blocks of 1 warp: 16 / 48.
    small = occupancy(sm86, 32, 32, 0)
    assert (small.blocks_per_sm, small.limiter, small.occupancy) == (16, Limiter.BLOCKS, 16 / 48)


def test_sm80_shared_memory_limit():
    # 49152 + 1024 = 50176; 167936 / 50176 = 3.35 -> 3 blocks of 8 warps = 24 / 64.
    occ = occupancy(limits_for("sm_80"), 256, 32, 48 * 1024)
    assert (occ.blocks_per_sm, occ.limiter, occ.occupancy) == (3, Limiter.SHARED_MEMORY, 0.375)


def test_the_largest_shared_memory_block_runs_alone():
    # 232448 + 1024 = 233472 = the whole SM: 1 block of 1024 threads, 32 / 64 warps.
    occ = occupancy(SM90, 1024, 32, 232448)
    assert (occ.blocks_per_sm, occ.active_warps, occ.limiter) == (1, 32, Limiter.SHARED_MEMORY)


def test_1024_threads_with_64_registers_just_fit():
    # 2048 per warp * 32 warps = 65536 = the per-block maximum; 32 warps by registers = 1 block.
    occ = occupancy(SM90, 1024, 64, 0)
    assert (occ.blocks_per_sm, occ.occupancy, occ.limiter) == (1, 0.5, Limiter.REGISTERS)


@pytest.mark.parametrize(
    ("threads", "regs", "smem", "reason", "limiter", "mentions"),
    [
        (1025, 32, 0, Infeasible.TOO_MANY_THREADS, Limiter.WARPS, "1025 threads"),
        (0, 32, 0, Infeasible.NO_THREADS, Limiter.WARPS, "0 threads"),
        (128, 256, 0, Infeasible.TOO_MANY_REGISTERS_PER_THREAD, Limiter.REGISTERS, "256 registers"),
        # 65*32 = 2080 -> 2304 per warp, * 32 warps = 73728 > 65536.
        (1024, 65, 0, Infeasible.TOO_MANY_REGISTERS_PER_BLOCK, Limiter.REGISTERS, "73728 registers"),
        (128, 32, 232449, Infeasible.TOO_MUCH_SHARED_MEMORY, Limiter.SHARED_MEMORY, "232449 bytes"),
    ],
)
def test_impossible_blocks_say_why(threads, regs, smem, reason, limiter, mentions):
    occ = occupancy(SM90, threads, regs, smem)
    assert not occ.feasible
    assert (occ.blocks_per_sm, occ.active_warps, occ.occupancy) == (0, 0, 0.0)
    assert (occ.reason, occ.limiter) == (reason, limiter)
    assert mentions in occ.message
    assert "sm_90" in occ.message or reason is Infeasible.NO_THREADS


def test_occupancy_of_a_compiled_kernel_adds_dynamic_shared_memory():
    usage = ResourceUsage(function="_Z1kPf", registers=32, shared_bytes=16 * 1024)
    # 16384 static + 32768 dynamic = 48 KB: as in the 48 KB case above, 4 blocks.
    occ = occupancy_of(SM90, usage, 256, dynamic_shared_bytes=32 * 1024)
    assert (occ.blocks_per_sm, occ.limiter) == (4, Limiter.SHARED_MEMORY)


# Register pressure set by ACC live accumulators and capped by --maxrregcount; static plus dynamic
# shared memory.
PRESSURE = """
extern "C" __global__ void pressure(const float* in, float* out, int n) {
  __shared__ float fixed[64];
  extern __shared__ float dynamic[];
  float acc[ACC];
  int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int k = 0; k < ACC; ++k) acc[k] = in[t + k * n];
  for (int j = 0; j < n; ++j) {
#pragma unroll
    for (int k = 0; k < ACC; ++k) acc[k] = acc[k] * acc[(k + 1) % ACC] + in[j * ACC + k];
  }
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < ACC; ++k) s += acc[k];
  fixed[threadIdx.x & 63] = s;
  dynamic[threadIdx.x] = s;
  __syncthreads();
  out[t] = fixed[(threadIdx.x + 1) & 63] + dynamic[0];
}
"""


@pytest.mark.gpu
def test_matches_the_driver_on_this_gpu():
    cp = pytest.importorskip("cupy")
    device = cp.cuda.Device()
    limits = limits_for("sm_" + device.compute_capability)
    checked = 0
    for acc, cap in [(1, 32), (8, 255), (64, 40), (64, 64), (200, 128), (240, 255)]:
        kernel = cp.RawKernel(PRESSURE, "pressure", options=(f"-DACC={acc}", f"--maxrregcount={cap}"))
        kernel.max_dynamic_shared_size_bytes = limits.max_smem_per_block_optin - kernel.shared_size_bytes
        for threads in (32, 33, 96, 256, 640, 1024):
            for dynamic in (threads * 4, 6657, 48 * 1024, 100_000):
                expected = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads, dynamic)
                ours = occupancy(limits, threads, kernel.num_regs, kernel.shared_size_bytes + dynamic)
                assert ours.blocks_per_sm == expected, (acc, kernel.num_regs, threads, dynamic, ours)
                checked += 1
    print(f"{checked} configurations agree with the driver on {device.compute_capability}")
