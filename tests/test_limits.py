from __future__ import annotations

import pytest

from cutune.errors import CutuneError
from cutune.limits import BUILTIN, limits_for

KB = 1024


@pytest.mark.parametrize(
    ("arch", "blocks", "threads", "smem_per_sm", "smem_per_block"),
    [
        # CUDA C++ Programming Guide, technical specifications per compute capability.
        ("sm_80", 32, 2048, 164 * KB, 163 * KB),
        ("sm_86", 16, 1536, 100 * KB, 99 * KB),
        ("sm_89", 24, 1536, 100 * KB, 99 * KB),
        ("sm_90", 32, 2048, 228 * KB, 227 * KB),
    ],
)
def test_builtin_limits_match_the_programming_guide(arch, blocks, threads, smem_per_sm, smem_per_block):
    limits = limits_for(arch)
    assert limits.arch == arch
    assert limits.max_blocks_per_sm == blocks
    assert limits.max_threads_per_sm == threads
    assert limits.smem_per_sm == smem_per_sm
    assert limits.max_smem_per_block_optin == smem_per_block
    assert limits.max_smem_per_block == 48 * KB
    assert limits.regs_per_sm == 64 * KB
    assert limits.max_regs_per_thread == 255
    assert limits.reserved_smem_per_block == 1 * KB


def test_one_block_with_the_largest_shared_memory_fills_the_sm():
    # The per-block maximum plus the 1 KB the driver reserves is the whole SM, on every target.
    for limits in BUILTIN.values():
        assert limits.max_smem_per_block_optin + limits.reserved_smem_per_block == limits.smem_per_sm


@pytest.mark.parametrize("spelling", ["sm_90", "90", "compute_90", "sm_90a"])
def test_limits_for_accepts_the_usual_spellings(spelling):
    assert limits_for(spelling) is BUILTIN["sm_90"]


def test_limits_for_an_unknown_target_names_the_known_ones():
    with pytest.raises(CutuneError, match=r"'sm_75'.*sm_80, sm_86, sm_89, sm_90"):
        limits_for("sm_75")


def test_overrides_make_a_changed_copy():
    h200 = limits_for("sm_90").with_overrides(name="H200", l2_bytes=60 * 2**20)
    assert (h200.name, h200.l2_bytes, h200.max_blocks_per_sm) == ("H200", 60 * 2**20, 32)
    assert limits_for("sm_90").l2_bytes == 50 * 2**20


def test_overriding_an_unknown_limit_is_an_error_naming_it():
    with pytest.raises(CutuneError, match=r"unknown device limit.*max_warps"):
        limits_for("sm_90").with_overrides(max_warps=64)


def test_as_names_holds_the_integer_limits_only():
    names = limits_for("sm_86").as_names()
    assert names["max_threads_per_sm"] == 1536
    assert names["max_blocks_per_sm"] == 16
    assert "arch" not in names
    assert "name" not in names
