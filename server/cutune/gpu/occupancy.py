"""The CUDA occupancy rules: how many blocks of a kernel fit on one SM, and what limits them."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cutune.limits import DeviceLimits

if TYPE_CHECKING:
    from cutune.gpu.resources import ResourceUsage


class Limiter(enum.Enum):
    """The resource that bounds the number of resident blocks (on ties, the first listed here)."""

    WARPS = "warps"
    BLOCKS = "blocks"
    REGISTERS = "registers"
    SHARED_MEMORY = "shared_memory"


class Infeasible(enum.Enum):
    """Why a block cannot be launched at all."""

    NO_THREADS = "no_threads"
    TOO_MANY_THREADS = "too_many_threads"
    TOO_MANY_REGISTERS_PER_THREAD = "too_many_registers_per_thread"
    TOO_MANY_REGISTERS_PER_BLOCK = "too_many_registers_per_block"
    TOO_MUCH_SHARED_MEMORY = "too_much_shared_memory"


@dataclass(frozen=True, slots=True)
class Occupancy:
    """Resident blocks and warps per SM; for an impossible block, zero and the reason why."""

    blocks_per_sm: int
    active_warps: int
    max_warps: int
    limiter: Limiter  # for an infeasible block: the resource that made it impossible
    reason: Infeasible | None = None
    message: str = ""

    @property
    def occupancy(self) -> float:
        """Active warps as a fraction of the SM's warp slots."""
        return self.active_warps / self.max_warps if self.max_warps else 0.0

    @property
    def feasible(self) -> bool:
        """Whether at least one block of this shape can run."""
        return self.reason is None


def occupancy(
    limits: DeviceLimits, threads_per_block: int, registers_per_thread: int, shared_mem_per_block: int
) -> Occupancy:
    """Resident blocks per SM as cudaOccupancyMaxActiveBlocksPerMultiprocessor computes them.

    `shared_mem_per_block` is static plus dynamic shared memory in bytes, without the driver's
    reserved part; the SM is assumed to use its largest shared-memory carveout.
    """
    max_warps = limits.max_threads_per_sm // limits.warp_size

    def infeasible(limiter: Limiter, reason: Infeasible, message: str) -> Occupancy:
        return Occupancy(0, 0, max_warps, limiter, reason, message)

    if threads_per_block <= 0:
        return infeasible(
            Limiter.WARPS,
            Infeasible.NO_THREADS,
            f"{threads_per_block} threads per block: a block needs at least one thread",
        )
    if threads_per_block > limits.max_threads_per_block:
        return infeasible(
            Limiter.WARPS,
            Infeasible.TOO_MANY_THREADS,
            f"{threads_per_block} threads per block exceed the {limits.arch} limit of {limits.max_threads_per_block}",
        )
    if registers_per_thread > limits.max_regs_per_thread:
        return infeasible(
            Limiter.REGISTERS,
            Infeasible.TOO_MANY_REGISTERS_PER_THREAD,
            f"{registers_per_thread} registers per thread exceed the {limits.arch} limit of "
            f"{limits.max_regs_per_thread}",
        )
    warps_per_block = _ceil_div(threads_per_block, limits.warp_size)
    regs_per_warp = _round_up(registers_per_thread * limits.warp_size, limits.reg_alloc_unit)
    regs_per_block = regs_per_warp * warps_per_block
    if regs_per_block > limits.max_regs_per_block:
        return infeasible(
            Limiter.REGISTERS,
            Infeasible.TOO_MANY_REGISTERS_PER_BLOCK,
            f"{threads_per_block} threads × {registers_per_thread} registers need "
            f"{regs_per_block} registers per block; {limits.arch} allows "
            f"{limits.max_regs_per_block}",
        )
    if shared_mem_per_block > limits.max_smem_per_block_optin:
        return infeasible(
            Limiter.SHARED_MEMORY,
            Infeasible.TOO_MUCH_SHARED_MEMORY,
            f"{shared_mem_per_block} bytes of shared memory per block exceed the "
            f"{limits.arch} limit of {limits.max_smem_per_block_optin}",
        )

    by_limit = {
        Limiter.WARPS: max_warps // warps_per_block,
        Limiter.BLOCKS: limits.max_blocks_per_sm,
        Limiter.REGISTERS: _register_blocks(limits, warps_per_block, regs_per_warp),
        Limiter.SHARED_MEMORY: _shared_memory_blocks(limits, shared_mem_per_block),
    }
    limiter = min(by_limit, key=lambda k: by_limit[k])  # min keeps the first of equal counts
    blocks = by_limit[limiter]
    return Occupancy(blocks, blocks * warps_per_block, max_warps, limiter)


def occupancy_of(
    limits: DeviceLimits, usage: ResourceUsage, threads_per_block: int, dynamic_shared_bytes: int = 0
) -> Occupancy:
    """The occupancy of a compiled kernel launched with this block size and dynamic shared memory."""
    return occupancy(limits, threads_per_block, usage.registers, usage.shared_bytes + dynamic_shared_bytes)


def _register_blocks(limits: DeviceLimits, warps_per_block: int, regs_per_warp: int) -> int:
    if regs_per_warp == 0:
        return limits.max_blocks_per_sm
    # Registers are split evenly between sub-partitions; each holds whole warps.
    sub_partitions = limits.warp_alloc_granularity
    warps_per_sub_partition = (limits.regs_per_sm // sub_partitions) // regs_per_warp
    return warps_per_sub_partition * sub_partitions // warps_per_block


def _shared_memory_blocks(limits: DeviceLimits, shared_mem_per_block: int) -> int:
    allocated = _round_up(shared_mem_per_block + limits.reserved_smem_per_block, limits.smem_alloc_unit)
    return limits.smem_per_sm // allocated if allocated else limits.max_blocks_per_sm


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, unit: int) -> int:
    return _ceil_div(a, unit) * unit
