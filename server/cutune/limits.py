"""Hardware limits of a target GPU, built in for sm_80/sm_86/sm_89/sm_90 and overridable."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from cutune.errors import CutuneError


@dataclass(frozen=True, slots=True)
class DeviceLimits:
    """The per-SM and per-block resources the CUDA occupancy rules use."""

    arch: str  # e.g. "sm_90"
    name: str = ""
    sm_count: int = 0
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    regs_per_sm: int = 65536
    max_regs_per_block: int = 65536
    max_regs_per_thread: int = 255
    reg_alloc_unit: int = 256  # registers are allocated per warp in units of this many
    warp_alloc_granularity: int = 4  # register sub-partitions per SM: warps are placed in fours
    smem_per_sm: int = 233472  # bytes usable by blocks on one SM (the largest carveout)
    max_smem_per_block: int = 49152  # without opting in to more dynamic shared memory
    max_smem_per_block_optin: int = 232448
    smem_alloc_unit: int = 128
    reserved_smem_per_block: int = 1024  # taken by the driver from every block since sm_80
    l2_bytes: int = 0

    def with_overrides(self, **changes: int | str) -> DeviceLimits:
        """A copy with some limits replaced (e.g. from a spec or the live device)."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise CutuneError(
                f"unknown device limit(s) {', '.join(unknown)} for {self.arch}; known: {', '.join(sorted(known))}"
            )
        return replace(self, **changes)  # type: ignore[arg-type]

    def as_names(self) -> dict[str, int]:
        """The integer limits by name, for use in constraint expressions."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if isinstance(getattr(self, k), int)}


# Per-compute-capability values from the CUDA C++ Programming Guide's technical specifications and
# cuda_occupancy.h; sm_count and l2_bytes describe one representative part of each family.
BUILTIN: dict[str, DeviceLimits] = {
    "sm_80": DeviceLimits(
        arch="sm_80",
        name="A100 (sm_80)",
        sm_count=108,
        max_threads_per_sm=2048,
        max_blocks_per_sm=32,
        smem_per_sm=167936,
        max_smem_per_block_optin=166912,
        l2_bytes=40 * 2**20,
    ),
    "sm_86": DeviceLimits(
        arch="sm_86",
        name="A10 (sm_86)",
        sm_count=72,
        max_threads_per_sm=1536,
        max_blocks_per_sm=16,
        smem_per_sm=102400,
        max_smem_per_block_optin=101376,
        l2_bytes=6 * 2**20,
    ),
    "sm_89": DeviceLimits(
        arch="sm_89",
        name="RTX 4090 (sm_89)",
        sm_count=128,
        max_threads_per_sm=1536,
        max_blocks_per_sm=24,
        smem_per_sm=102400,
        max_smem_per_block_optin=101376,
        l2_bytes=72 * 2**20,
    ),
    "sm_90": DeviceLimits(
        arch="sm_90",
        name="H100 (sm_90)",
        sm_count=132,
        max_threads_per_sm=2048,
        max_blocks_per_sm=32,
        smem_per_sm=233472,
        max_smem_per_block_optin=232448,
        l2_bytes=50 * 2**20,
    ),
}


def limits_for(arch: str) -> DeviceLimits:
    """The built-in limits of a target such as 'sm_90' (also accepts '90', 'compute_90', 'sm_90a')."""
    digits = "".join(ch for ch in arch if ch.isdigit())
    key = f"sm_{digits}"
    if key not in BUILTIN:
        raise CutuneError(f"no built-in limits for {arch!r}; known: {', '.join(BUILTIN)}")
    return BUILTIN[key]
