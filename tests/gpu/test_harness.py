"""The measuring helpers on the host: the same code runs on CuPy arrays in the backend."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from cutune.errors import CutuneError
from cutune.gpu.backend import TimingOptions
from cutune.gpu.harness import (
    bf16_from_float32,
    compare,
    fill,
    float32_from_bf16,
    make_problem,
    next_target,
    poison,
    real_inputs,
    rotated_args,
    rotation_count,
    scalar,
    storage_dtype,
    summarize,
)
from cutune.spec import ArgSpec, Init, KernelSpec, Role, Tolerance

RNG = np.random.default_rng


def test_bf16_rounds_to_nearest_even() -> None:
    # 1 + 2^-8 lies halfway between bf16 1.0 and 1.0078125: ties go to the even one (1.0);
    # 1 + 3 * 2^-8 lies halfway between 1.0078125 and 1.015625: ties go to 1.015625.
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -2.5, np.inf, 3.4e38], dtype=np.float32)
    bits = bf16_from_float32(x, np)
    assert bits.dtype == np.uint16
    assert bits.tolist() == [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC020, 0x7F80, 0x7F80]
    assert float32_from_bf16(bits, np).tolist()[:5] == [1.0, 1.0, 1.015625, 1.0078125, -2.5]


def test_bf16_keeps_nan_and_round_trips_exactly() -> None:
    assert np.isnan(float32_from_bf16(bf16_from_float32(np.array([np.nan], np.float32), np), np)[0])
    every = np.arange(0, 0x10000, dtype=np.uint16)
    values = float32_from_bf16(every, np)
    finite = ~np.isnan(values)
    assert (bf16_from_float32(values, np)[finite] == every[finite]).all()


def test_fill_follows_the_spec_and_never_gives_zeros() -> None:
    normal = fill(ArgSpec("x", "float16", shape=("n",), scale=3.0), (4, 256), RNG(0), np)
    assert normal.dtype == np.float16 and normal.shape == (4, 256)
    assert 2.0 < float(normal.astype(np.float32).std()) < 4.0
    uniform = fill(ArgSpec("u", "float32", init=Init.UNIFORM, low=2.0, high=3.0), (1000,), RNG(0), np)
    assert uniform.min() >= 2.0 and uniform.max() < 3.0
    ints = fill(ArgSpec("i", "int32", init=Init.RANDINT, low=0, high=5), (1000,), RNG(0), np)
    assert ints.dtype == np.int32 and set(ints.tolist()) == {0, 1, 2, 3, 4}
    idx = fill(ArgSpec("a", "int64", init=Init.ARANGE), (2, 3), RNG(0), np)
    assert idx.tolist() == [[0, 1, 2], [3, 4, 5]]
    bf = fill(ArgSpec("b", "bfloat16"), (1000,), RNG(0), np)
    assert bf.dtype == np.uint16 and float(np.abs(float32_from_bf16(bf, np)).mean()) > 0.5


def test_fill_is_fresh_for_each_seed() -> None:
    arg = ArgSpec("x", "float32")
    assert not np.array_equal(fill(arg, (64,), RNG(1), np), fill(arg, (64,), RNG(2), np))
    assert np.array_equal(fill(arg, (64,), RNG(1), np), fill(arg, (64,), RNG(1), np))


def test_scalars_get_their_c_type() -> None:
    assert type(scalar(ArgSpec("n", "int32"), 7)) is np.int32
    assert type(scalar(ArgSpec("n", "uint32"), 7)) is np.uint32
    assert scalar(ArgSpec("s", "bfloat16"), 1.0) == np.uint16(0x3F80)
    assert storage_dtype("bfloat16") == np.uint16 and storage_dtype("float16") == np.float16
    # a struct by value: its bytes, in memory order, as one structured scalar CuPy passes by value
    struct = scalar(ArgSpec("r", "bytes8"), 0x40200000BF800000)
    assert struct.dtype.itemsize == 8 and struct.tobytes() == np.array([-1.0, 2.5], dtype=np.float32).tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int32", "uint8"])
def test_poison_makes_floats_nan_and_ints_all_ones(dtype: str) -> None:
    a = np.zeros(8, dtype=storage_dtype(dtype))
    poison(a)
    if dtype == "bfloat16":
        assert np.isnan(float32_from_bf16(a, np)).all()
    elif dtype.startswith("float"):
        assert np.isnan(a).all()
    else:
        assert (a.view(np.uint8) == 0xFF).all()


def test_compare_scales_errors_by_the_tolerance() -> None:
    tol = Tolerance(rtol=1e-2, atol=1e-3)
    ref = np.array([1.0, 100.0, 0.0], dtype=np.float32)
    out = np.array([1.005, 101.0, 0.0005], dtype=np.float32)
    c = compare(out, ref, "float32", tol, np)
    assert c.ok and c.max_scaled == pytest.approx(1 / 1.001, rel=1e-5) and c.worst_index == (1,)
    bad = compare(np.array([1.0, 103.0, 0.0], np.float32), ref, "float32", tol, np)
    assert not bad.ok and bad.mismatches == 1 and bad.worst_index == (1,)
    assert bad.got == 103.0 and bad.expected == 100.0
    assert "1 of 3 elements differ; worst at [1]" in bad.describe("out")


def test_nan_passes_only_where_the_reference_has_nan() -> None:
    tol = Tolerance(rtol=1e-2, atol=1e-2)
    ref = np.array([np.nan, 1.0, np.inf, 2.0], dtype=np.float32)
    assert compare(ref.copy(), ref, "float32", tol, np).ok
    unwritten = np.array([np.nan, np.nan, np.inf, 2.0], dtype=np.float32)
    c = compare(unwritten, ref, "float32", tol, np)
    assert c.mismatches == 1 and math.isinf(c.max_scaled) and c.worst_index == (1,)
    assert compare(np.array([0.0, 1.0, np.inf, 2.0], np.float32), ref, "float32", tol, np).mismatches == 1
    assert compare(np.array([np.nan, 1.0, 1e30, 2.0], np.float32), ref, "float32", tol, np).mismatches == 1


def test_integer_outputs_must_match_exactly() -> None:
    exact = Tolerance(rtol=0.0, atol=0.0)
    ref = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert compare(ref.copy(), ref, "int32", exact, np).ok
    off = ref.copy()
    off[1, 2] += 1
    c = compare(off, ref, "int32", exact, np)
    assert c.mismatches == 1 and c.worst_index == (1, 2) and math.isinf(c.max_scaled)


def test_bf16_outputs_compare_as_values() -> None:
    tol = Tolerance(rtol=1e-2, atol=1e-2)
    ref = bf16_from_float32(np.array([1.0, 2.0], np.float32), np)
    near = bf16_from_float32(np.array([1.0078125, 2.0], np.float32), np)  # one bf16 ulp away
    assert compare(near, ref, "bfloat16", tol, np).ok
    far = bf16_from_float32(np.array([1.25, 2.0], np.float32), np)
    assert not compare(far, ref, "bfloat16", tol, np).ok


def _residual_spec() -> KernelSpec:
    return KernelSpec(
        kernel="add_residual",
        args=(
            ArgSpec("out", "float16", Role.OUT, shape=("n", "d")),
            ArgSpec("residual", "float16", Role.INOUT, shape=("n", "d")),
            ArgSpec("x", "bfloat16", Role.IN, shape=("n", "d")),
            ArgSpec("d", "int32", value="d"),
        ),
        sizes=({"n": 4, "d": 8},),
        grid=("n",),
        block=("d",),
    )


def test_problem_poisons_outputs_restores_inputs_and_checks_every_output() -> None:
    spec = _residual_spec()
    p = make_problem(spec, spec.sizes[0], RNG(0), np)
    out, residual, x, d = p.args
    assert d == np.int32(8) and out.shape == (4, 8) and x.dtype == np.uint16

    def kernel() -> None:  # the "original": out = x + residual; residual += 1
        out[...] = (float32_from_bf16(x, np) + residual).astype(np.float16)
        residual[...] += np.float16(1)

    p.prepare_checked_run(np)
    assert np.isnan(out).all()
    kernel()
    p.keep_reference()
    x[0, 0] = 0  # a candidate that scribbles over its input ...
    p.prepare_checked_run(np)  # ... gets pristine inputs back before the next checked run
    assert np.array_equal(x, p.pristine["x"]) and np.array_equal(residual, p.pristine["residual"])
    kernel()
    assert all(c.ok for _, c in p.check(spec, np))
    [(name_out, c_out), (name_res, c_res)] = [(a.name, c) for a, c in p.check(spec, np)]
    assert (name_out, name_res) == ("out", "residual") and c_out.ok and c_res.ok

    p.prepare_checked_run(np)
    out[...] = (float32_from_bf16(x, np) + residual).astype(np.float16)  # forgets the in-place update
    checked = {a.name: c for a, c in p.check(spec, np)}
    assert checked["out"].ok and not checked["residual"].ok


def test_summary_and_repetition_targets() -> None:
    assert summarize([1.0, 2.0, 3.0, 4.0, 100.0]) == (3.0, pytest.approx(1.4), pytest.approx(61.6))
    options = TimingOptions(reps=10, min_time_ms=1.0, max_reps=500)
    assert next_target([], options) == 10
    assert next_target([200.0] * 10, options) == 0  # 2 ms: both met
    assert next_target([10.0] * 10, options) == 100  # 0.1 ms so far: 90 more of 10 µs
    assert next_target([1.0] * 10, options) == 500  # capped
    assert next_target([1.0] * 500, options) == 0


def test_graph_timing_rotates_enough_input_copies_to_keep_the_l2_cold() -> None:
    l2 = 50 * 2**20
    assert rotation_count(l2 // 4, l2) == 9  # 8 copies cover twice the L2, and one more
    assert rotation_count(1024, l2) == 64  # a decode-size launch: capped
    assert rotation_count(4 * l2, l2) == 1  # one launch alone sweeps the L2
    spec = KernelSpec(
        kernel="k",
        args=(ArgSpec("x", "float32", Role.IN, shape=("n",)), ArgSpec("n", "int32", value="n")),
        sizes=({"n": 8},),
        grid=("1",),
        block=("1",),
    )
    problem = make_problem(spec, {"n": 8}, RNG(0), np, guard_bytes=0)
    copies = rotated_args(problem, 3, np)
    assert len(copies) == 3 and copies[0][0] is problem.args[0] and copies[1][0] is not copies[2][0]
    assert all(np.array_equal(c[0], problem.args[0]) and c[1] == problem.args[1] for c in copies)


def test_a_timing_mode_must_be_known() -> None:
    with pytest.raises(CutuneError, match="unknown timing 'graphs'; choose one of events, graph"):
        TimingOptions(mode="graphs")


def test_an_array_with_the_programs_data_holds_it_at_that_size_and_random_values_elsewhere(tmp_path: Path) -> None:
    slots = np.array([7, 3, 5, 1], dtype=np.int64)
    (tmp_path / "slots.bin").write_bytes(slots.tobytes())
    (tmp_path / "half.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())  # capped: half the array
    spec = KernelSpec(
        kernel="k",
        args=(
            ArgSpec("out", "float32", Role.OUT, shape=("n",)),
            ArgSpec("slot", "int64", Role.IN, shape=("n",), data=(str(tmp_path / "slots.bin"), "")),
            ArgSpec("x", "float32", Role.IN, shape=("n",), data=("", str(tmp_path / "half.bin"))),
            ArgSpec("n", "int32", value="n"),
        ),
        sizes=({"n": 4}, {"n": 8}),
        grid=("1",),
        block=("n",),
    )
    first = make_problem(spec, {"n": 4}, RNG(0), np, guard_bytes=0)
    assert first.pristine["slot"].tolist() == [7, 3, 5, 1]
    second = make_problem(spec, {"n": 8}, RNG(0), np, guard_bytes=0)
    assert second.pristine["x"][:4].tolist() == [0.0, 1.0, 2.0, 3.0] and np.all(second.pristine["x"][4:] != 0)
    assert len(set(second.pristine["slot"].tolist())) > 1  # no data at this size: the spec's init
    # a ragged size cutune derived from sizes[1] reads that size's data from its start (none from elsewhere)
    ragged = make_problem(spec, {"n": 6}, RNG(0), np, guard_bytes=0, timed=False, base=1)
    assert ragged.pristine["x"][:4].tolist() == [0.0, 1.0, 2.0, 3.0] and len(set(ragged.pristine["slot"].tolist())) > 1
    elsewhere = make_problem(spec, {"n": 3}, RNG(0), np, guard_bytes=0, timed=False)
    assert not np.any(elsewhere.pristine["x"][:3] == np.arange(3, dtype=np.float32))
    assert real_inputs(spec) == (
        "inputs from the program's own run (cutune capture --data): `slot` (1 of 2 sizes), `x` (1 of 2 sizes); "
        "the others random"
    )
