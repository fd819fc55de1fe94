"""The harness's checks on the host (numpy as `xp`): guard regions, written inputs, unwritten outputs,
reference validation. Each "kernel" here is a Python function doing what a CUDA kernel would."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pytest

from cutune.errors import ReferenceInvalid
from cutune.gpu.backend import Failure
from cutune.gpu.guards import GUARD_BYTES, allocate, breaches, guard_pattern
from cutune.gpu.harness import POISON_2, Problem, fill, float32_from_bf16, make_problem
from cutune.spec import ArgSpec, Init, KernelSpec, Role

RNG = np.random.default_rng


def spec_of(*args: ArgSpec, sizes: tuple[dict[str, int], ...] = ({"n": 100},)) -> KernelSpec:
    return KernelSpec(kernel="k", args=args, sizes=sizes, grid=("n",), block=("1",))


SCALE = spec_of(ArgSpec("out", "float32", Role.OUT, shape=("n",)), ArgSpec("x", "float32", Role.IN, shape=("n",)))
RESIDUAL = spec_of(
    ArgSpec("out", "float32", Role.OUT, shape=("n",)),
    ArgSpec("residual", "float32", Role.INOUT, shape=("n",)),
    ArgSpec("x", "float32", Role.IN, shape=("n",)),
)


def scale(p: Problem) -> None:
    p.arrays["out"][...] = 2 * p.arrays["x"]


def residual_add(p: Problem) -> None:
    p.arrays["residual"][...] += p.arrays["x"]
    p.arrays["out"][...] = 2 * p.arrays["residual"]


def with_reference(spec: KernelSpec, original: Callable[[Problem], None]) -> Problem:
    """A problem whose reference is `original`'s output, validated as the backend does it."""
    p = make_problem(spec, spec.sizes[0], RNG(0), np)
    p.prepare_checked_run(np)
    original(p)
    p.keep_reference()
    p.prepare_checked_run(np, POISON_2)
    original(p)

    def rerun(poisons: Mapping[str, int]) -> None:
        p.prepare_checked_run(np, poisons=poisons)
        original(p)

    p.validate_reference(spec, p.snapshot(), np, rerun)
    return p


def judge(p: Problem, spec: KernelSpec, candidate: Callable[[Problem], None]) -> tuple[Failure | None, str]:
    p.prepare_checked_run(np)
    candidate(p)
    v = p.verdict(spec, np)
    return v.failure, v.detail


def test_arrays_sit_between_armed_guards_and_keep_alignment() -> None:
    g = allocate("out", (3, 5), np.dtype(np.float32), np)
    pattern = guard_pattern(GUARD_BYTES, np)
    g.arm(pattern)
    assert g.array.shape == (3, 5) and g.buffer.size == 2 * GUARD_BYTES + 60 and GUARD_BYTES % 256 == 0
    assert np.shares_memory(g.array, g.buffer) and breaches([g], pattern, np) == []
    assert len(set(pattern[:256].tolist())) > 200  # not one repeated byte: a single stored value cannot hide
    exact = allocate("x", (7,), np.dtype(np.float16), np, guard=0)
    assert exact.buffer.size == 14 and breaches([exact], guard_pattern(0, np), np) == []


def test_an_overrun_is_reported_by_side_and_bytes_then_the_guard_is_rearmed() -> None:
    g = allocate("out", (10,), np.dtype(np.float32), np)
    pattern = guard_pattern(GUARD_BYTES, np)
    g.arm(pattern)
    g.buffer[GUARD_BYTES + 40 : GUARD_BYTES + 52] = 0  # three floats past the end
    g.buffer[GUARD_BYTES - 2] ^= 0xFF  # one byte before the start (another byte keeps its value: 0 may match)
    found = breaches([g], pattern, np)
    assert [(b.side, b.nbytes) for b in found] == [("before", 1), ("after", sum(pattern[:12] != 0))]
    assert "`out`: 1 bytes written before its start" in found[0].describe()
    assert breaches([g], pattern, np) == []


def test_a_right_candidate_passes_every_check() -> None:
    p = with_reference(SCALE, scale)
    assert judge(p, SCALE, scale) == (None, "")


def test_a_write_past_the_end_is_out_of_bounds_even_when_every_element_is_right() -> None:
    p = with_reference(SCALE, scale)

    def overrun(q: Problem) -> None:
        scale(q)
        g = q.guarded["out"]
        g.buffer[g.buffer.size - GUARD_BYTES : g.buffer.size - GUARD_BYTES + 8] = 0x11  # two floats past the end

    failure, detail = judge(p, SCALE, overrun)
    assert failure is Failure.OUT_OF_BOUNDS
    assert detail == f"at n=100: `out`: 8 bytes written after its end (in the {GUARD_BYTES}-byte guard)"
    assert judge(p, SCALE, scale) == (None, "")  # re-armed: the next candidate starts clean


def test_a_write_into_an_input_is_caught() -> None:
    p = with_reference(SCALE, scale)

    def scribble(q: Problem) -> None:
        scale(q)
        q.arrays["x"][:3] = 0

    assert judge(p, SCALE, scribble) == (
        Failure.INPUT_WRITTEN,
        "at n=100: wrote into an input: `x`: 3 elements changed",
    )


def test_a_skipped_tail_is_unwritten_and_a_wrong_value_is_wrong() -> None:
    p = with_reference(SCALE, scale)

    def no_tail(q: Problem) -> None:
        q.arrays["out"][:96] = 2 * q.arrays["x"][:96]

    failure, detail = judge(p, SCALE, no_tail)
    assert failure is Failure.UNWRITTEN and "`out`: 4 of 100 elements not written (still poisoned)" in detail

    def accumulate(q: Problem) -> None:
        q.arrays["out"][...] = 0
        q.arrays["out"][...] += 2 * q.arrays["x"] + q.arrays["x"]

    failure, detail = judge(p, SCALE, accumulate)
    assert failure is Failure.WRONG and "100 of 100 elements differ" in detail


def test_an_inout_not_written_back_is_unwritten() -> None:
    p = with_reference(RESIDUAL, residual_add)

    def forgets(q: Problem) -> None:
        q.arrays["out"][...] = 2 * (q.arrays["residual"] + q.arrays["x"])

    failure, detail = judge(p, RESIDUAL, forgets)
    assert failure is Failure.UNWRITTEN
    assert "`residual`: 100 of 100 elements not written back (still the input)" in detail


def test_an_output_read_before_it_is_written_must_be_declared_inout() -> None:
    declared_out = spec_of(
        ArgSpec("out", "float32", Role.OUT, shape=("n",)),
        ArgSpec("residual", "float32", Role.OUT, shape=("n",)),  # the drafter's old mistake
        ArgSpec("x", "float32", Role.IN, shape=("n",)),
    )
    with pytest.raises(ReferenceInvalid, match=r"`residual` is read before it is written .*declare it `inout`") as e:
        with_reference(declared_out, residual_add)
    assert e.value.arg == "residual"


def test_an_output_the_original_never_writes_asks_about_the_shape() -> None:
    too_long = spec_of(ArgSpec("out", "float32", Role.OUT, shape=("n + 4",)), ArgSpec("x", "float32", shape=("n",)))

    def original(p: Problem) -> None:
        p.arrays["out"][:100] = 2 * p.arrays["x"]

    with pytest.raises(ReferenceInvalid, match=r"`out`: 4 of 104 elements are never written .*is the shape right"):
        with_reference(too_long, original)


def test_a_bound_output_is_checked_where_the_original_writes_and_a_kernel_skipping_some_of_it_fails() -> None:
    """An allocation-bound output (as `cutune capture` writes it) is longer than what the kernel writes: the
    elements the original leaves pass as they are, the ones it writes must be written."""
    bound = spec_of(
        ArgSpec("out", "float32", Role.INOUT, shape=("n_out",), bound=True),
        ArgSpec("x", "float32", Role.IN, shape=("n",)),
        sizes=({"n": 100, "n_out": 256},),
    )

    def original(q: Problem) -> None:  # writes the first n elements of a 256-element allocation
        q.arrays["out"][:100] = 2 * q.arrays["x"]

    p = with_reference(bound, original)  # no "never written": the rest keeps what the allocation held
    assert judge(p, bound, original)[0] is None

    def no_tail(q: Problem) -> None:  # a planted wrong kernel: skips the last 4 elements it owns
        q.arrays["out"][:96] = 2 * q.arrays["x"][:96]

    failure, detail = judge(p, bound, no_tail)
    assert failure is Failure.UNWRITTEN and "`out`: 4 of 256 elements not written back (still the input)" in detail


def test_integer_outputs_may_hold_all_ones_values() -> None:
    ints = spec_of(ArgSpec("slots", "int32", Role.OUT, shape=("n",)), ArgSpec("x", "float32", shape=("n",)))

    def original(p: Problem) -> None:  # -1 (all ones, like the poison) marks padding slots
        p.arrays["slots"][...] = np.where(p.arrays["x"] > 0, np.arange(100), -1)

    p = with_reference(ints, original)
    assert judge(p, ints, original) == (None, "")


def test_non_finite_results_from_finite_inputs_are_reported() -> None:
    def original(p: Problem) -> None:
        with np.errstate(divide="ignore"):
            p.arrays["out"][...] = 1 / np.zeros_like(p.arrays["x"])

    with pytest.raises(ReferenceInvalid, match=r"100 of 100 non-finite values from finite inputs"):
        with_reference(SCALE, original)


def test_an_original_that_writes_out_of_bounds_or_into_inputs_cannot_be_the_reference() -> None:
    def overrun(p: Problem) -> None:
        scale(p)
        p.guarded["out"].buffer[-1] = guard_pattern(GUARD_BYTES, np)[-1] ^ 0xFF

    with pytest.raises(ReferenceInvalid, match=r"writes outside an array at n=100: `out`: 1 bytes written after"):
        with_reference(SCALE, overrun)

    def writes_input(p: Problem) -> None:
        scale(p)
        p.arrays["x"][0] += 1

    with pytest.raises(ReferenceInvalid, match=r"`x` is written by the original kernel .*declare it `inout`"):
        with_reference(SCALE, writes_input)


def test_a_nondeterministic_original_cannot_be_the_reference() -> None:
    noise = iter(range(1, 100))

    def original(p: Problem) -> None:
        p.arrays["residual"][...] += next(noise)
        p.arrays["out"][...] = p.arrays["x"]

    with pytest.raises(ReferenceInvalid, match=r"different results for `residual` on the same inputs"):
        with_reference(RESIDUAL, original)


def test_ragged_problems_say_so() -> None:
    p = make_problem(SCALE, {"n": 99}, RNG(0), np, timed=False)
    assert p.label == "n=99 (ragged)" and not p.timed


def test_permutation_and_bool_fills() -> None:
    perm = fill(ArgSpec("slots", "int64", init=Init.PERMUTATION), (4, 50), RNG(3), np)
    assert perm.dtype == np.int64 and sorted(perm.ravel().tolist()) == list(range(200))
    assert not np.array_equal(perm.ravel(), np.arange(200))
    mask = fill(ArgSpec("m", "bool"), (1000,), RNG(0), np)
    assert mask.dtype == np.bool_ and 300 < int(mask.sum()) < 700
    ones = fill(ArgSpec("m", "bool", init=Init.RANDINT, low=1, high=2), (10,), RNG(0), np)
    assert ones.all()


def test_bf16_inputs_are_restored_into_their_guarded_arrays() -> None:
    spec = spec_of(ArgSpec("out", "bfloat16", Role.OUT, shape=("n",)), ArgSpec("x", "bfloat16", shape=("n",)))
    p = make_problem(spec, spec.sizes[0], RNG(0), np)
    assert p.arrays["x"].base is not None and np.array_equal(p.arrays["x"], p.pristine["x"])
    assert float(np.abs(float32_from_bf16(p.arrays["x"], np)).mean()) > 0.5
