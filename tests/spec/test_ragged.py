"""Ragged sizes derived from a spec's round sizes, and the spec keys they read (multiple_of, new inits)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cutune.errors import SpecError
from cutune.spec import KernelSpec, Role, load_spec, parse_spec
from cutune.spec.ragged import RaggedSize, describe_checks, ragged_failure, ragged_sizes
from cutune.spec.write import dump_kernel_spec

ROOT = Path(__file__).resolve().parents[2]

SPEC = """
[kernel.k]
grid = "n"
block = "BLOCK"
sizes = [ {{ n = {n}, d = {d} }}, {{ n = 4, d = 512 }} ]
{extra}

[[kernel.k.args]]
name = "out"
dtype = "float32"
role = "out"
shape = ["n", "d"]

[[kernel.k.args]]
name = "x"
dtype = "float32"
shape = ["n", "2 * d"]

[kernel.k.params.BLOCK]
values = [128, 256]
default = 256
binding = "launch"
"""


def spec(n: int = 4096, d: int = 4096, extra: str = "") -> KernelSpec:
    return parse_spec(SPEC.format(n=n, d=d, extra=extra)).kernel("k")


def test_each_variable_moves_to_the_nearest_odd_value_below() -> None:
    found = ragged_sizes(spec(n=64, d=1024))
    assert [r.size for r in found] == [{"n": 63, "d": 1023}, {"n": 3, "d": 511}, {"n": 2, "d": 510}]
    assert found[0].moved == ("n", "d") and found[0].base == 0
    assert found[1].base == 1 and found[2].base == 1  # the smallest size also gets an even, non-round tail


def test_multiple_of_is_kept_and_stated() -> None:
    s = spec(n=64, d=1024, extra="multiple_of = { d = 8 }")
    found = ragged_sizes(s)
    assert all(r.size["d"] % 8 == 0 and (r.size["d"] // 8) % 2 == 1 for r in found[:2])
    assert found[0].size == {"n": 63, "d": 1016}
    line = describe_checks(s, found)
    assert line.startswith("tails checked at 3 ragged size(s): n=63, d=1016 (from sizes[0])")
    assert line.endswith("keeping d a multiple of 8 (multiple_of in the spec)")


def test_large_sizes_are_shrunk_under_the_memory_cap() -> None:
    found = ragged_sizes(spec(n=16384, d=16384), cap_bytes=64 << 20)
    first = found[0].size
    assert 12 * first["n"] * first["d"] <= 64 << 20  # out + twice-as-wide x, float32
    assert first["n"] % 2 == 1 and first["d"] % 2 == 1


def test_size_only_constraints_and_duplicates_are_respected() -> None:
    s = spec(n=64, d=1024, extra='constraints = ["n >= 8", "BLOCK <= max_threads_per_block"]')
    assert [r.size for r in ragged_sizes(s)] == [{"n": 63, "d": 1023}]  # 3 and 2 tokens break n >= 8
    odd = spec(n=63, d=1023)  # already ragged: nothing new from it
    assert all(r.base == 1 for r in ragged_sizes(odd))


def test_the_samples_reach_tails() -> None:
    silu = load_spec(ROOT / "samples/silu_and_mul.tune.toml").kernel("silu_and_mul_kernel")
    merge = load_spec(ROOT / "samples/merge_attn_states.tune.toml").kernel("merge_attn_states_kernel")
    for s in (silu, merge):
        found = ragged_sizes(s)
        assert found, describe_checks(s, found)
        for r in found:
            assert all(r.size[k] % m == 0 for k, m in s.multiple_of.items())
            assert all(r.size[k] // s.multiple_of.get(k, 1) % 4 for k in r.moved)  # off the round numbers
    assert silu.multiple_of == {"d": 8} and merge.multiple_of == {"head_size": 8}


def test_multiple_of_is_checked_against_the_sizes() -> None:
    with pytest.raises(SpecError, match=r"\[kernel.k.sizes\[0\].d\] size d = 1020 is not a multiple of 8"):
        spec(d=1020, extra="multiple_of = { d = 8 }")
    with pytest.raises(SpecError, match=r"'m' is not a size variable"):
        spec(extra="multiple_of = { m = 8 }")
    with pytest.raises(SpecError, match=r"multiple_of.d must be a positive integer"):
        spec(extra="multiple_of = { d = 0 }")


def test_multiple_of_survives_the_writer() -> None:
    s = spec(d=1024, extra="multiple_of = { d = 8 }")
    text = dump_kernel_spec(s)
    assert "multiple_of = { d = 8 }" in text
    assert parse_spec(text).kernel("k").multiple_of == {"d": 8}


def test_permutation_needs_an_integer_dtype_and_bool_is_a_dtype() -> None:
    base = SPEC.format(n=8, d=8, extra="")
    ok = base + '\n[[kernel.k.args]]\nname = "slots"\ndtype = "int64"\nshape = ["n"]\ninit = "permutation"\n'
    ok += '\n[[kernel.k.args]]\nname = "mask"\ndtype = "bool"\nshape = ["n"]\n'
    args = parse_spec(ok).kernel("k").args
    assert args[2].init.value == "permutation" and args[3].dtype == "bool"
    bad = base + '\n[[kernel.k.args]]\nname = "slots"\ndtype = "float32"\nshape = ["n"]\ninit = "permutation"\n'
    with pytest.raises(SpecError, match="init 'permutation' needs an integer dtype"):
        parse_spec(bad)


PACKS = ROOT / "tests" / "data" / "compile" / "ragged_packs" / "pack_scale.tune.toml"


def test_a_ragged_failure_names_the_size_and_the_multiple_of_16_byte_packs() -> None:
    """bf16 rows read in 16-byte packs: d must be a multiple of 8; tokens (not innermost) needs nothing."""
    spec = load_spec(PACKS).kernel("pack_scale_kernel")
    first = ragged_sizes(spec)[0]
    assert first.size == {"tokens": 15, "d": 4095}
    failure = ragged_failure(spec, first, "fault: misaligned address; the CUDA context is lost")
    assert failure.multiples == {"d": 8}
    assert failure.message() == (
        "the original configuration fails at the ragged size tokens=15, d=4095 (from sizes[0]): fault: misaligned "
        "address; the CUDA context is lost; it evidently needs d a multiple of 8 (whole 16-byte packs): tails are "
        "checked at such sizes instead (write `multiple_of = { d = 8 }` in the spec to say so)"
    )
    kept, note = failure.apply(spec, last=False)
    assert kept.multiple_of == {"d": 8} and note == failure.message()
    assert ragged_sizes(kept)[0].size == {"tokens": 15, "d": 4088}
    assert all(r.size["d"] % 8 == 0 for r in ragged_sizes(kept))


def test_a_second_failure_asks_twice_the_multiple_and_a_moved_outer_size_asks_nothing() -> None:
    spec = load_spec(PACKS).kernel("pack_scale_kernel")
    kept, _ = ragged_failure(spec, ragged_sizes(spec)[0], "wrong").apply(spec, last=False)
    again = ragged_failure(kept, ragged_sizes(kept)[0], "wrong")
    assert again.multiples == {"d": 16}
    outer = ragged_failure(spec, RaggedSize({"tokens": 15, "d": 4096}, 0, ("tokens",)), "wrong")
    assert outer.multiples == {} and "no multiple_of is evident" in outer.message()


def test_with_no_multiple_evident_or_at_the_last_attempt_no_ragged_size_is_checked_and_the_note_says_so() -> None:
    spec = load_spec(PACKS).kernel("pack_scale_kernel")
    outer = ragged_failure(spec, RaggedSize({"tokens": 15, "d": 4096}, 0, ("tokens",)), "fault: illegal address")
    for failure, last in ((outer, False), (ragged_failure(spec, ragged_sizes(spec)[0], "wrong"), True)):
        off, note = failure.apply(spec, last=last)
        assert ragged_sizes(off) == () and off.sizes == spec.sizes
        assert note.endswith("tails are not checked at sizes the spec does not list") and "(from sizes[0])" in note


def test_an_allocation_bound_is_never_moved_or_halved() -> None:
    spec = load_spec(PACKS).kernel("pack_scale_kernel")
    out = next(i for i, a in enumerate(spec.args) if a.role is not Role.IN)
    args = list(spec.args)
    args[out] = replace(args[out], shape=("n_out",), bound=True, role=Role.INOUT)
    bounded = replace(spec, args=tuple(args), sizes=tuple({**s, "n_out": 1 << 26} for s in spec.sizes))
    derived = ragged_sizes(bounded, cap_bytes=1 << 30)
    assert derived and all(r.size["n_out"] == 1 << 26 and "n_out" not in r.moved for r in derived)
