"""Analysis of real templates of the samples, with compile-only reports and tuning results."""

from __future__ import annotations

import dataclasses

from cutune.agent.analysis import LOW_SOL_PCT, FindingKind, analyze
from cutune.project import KernelContext
from cutune.template.model import Space, Template
from tests.agent.builders import MERGE_SIZES, check_report, tune_result


def test_refused_recipes_and_owners_on_silu(silu: KernelContext) -> None:
    a = analyze(silu, silu.template)
    assert a.kernel == "silu_and_mul_kernel"
    assert a.applied == silu.template.applied
    refusals = a.of(FindingKind.RECIPE_REFUSED)
    assert [(f.recipe, f.message) for f in refusals] == [(r.recipe, r.reason) for r in silu.template.refused]
    assert refusals, "the silu kernel already loops inside the block, so some recipe refuses"
    block = a.param("BLOCK_THREADS")
    assert block is not None and block.recipe == "block_threads" and block.default == 1024
    assert all(p.recipe in a.applied for p in a.params)  # every parameter is traced to the recipe that made it
    assert a.speedup is None and not a.has(FindingKind.NO_SIGNIFICANT_GAIN)  # nothing measured yet
    text = a.render()
    assert "BLOCK_THREADS in [" in text and "from block_threads" in text
    assert all(r.recipe in text for r in silu.template.refused)


def test_no_params_when_nothing_applies(silu: KernelContext) -> None:
    bare = Template(silu.kernel.name, silu.model.text, Space(()), refused=silu.template.refused)
    assert analyze(silu, bare).has(FindingKind.NO_PARAMS)


def test_low_sol_at_small_sizes_and_unimportant_params_on_merge(merge: KernelContext) -> None:
    space = merge.template.space
    importances = {p.name: 0.01 for p in space.params} | {"ITEMS_PER_THREAD": 0.62}
    result = tune_result(space, importances=importances, failures={"compile": 3, "wrong": 1})
    a = analyze(merge, merge.template, result=result)
    low = a.of(FindingKind.LOW_SOL_SMALL_SIZES)
    assert len(low) == 1 and "45%" in low[0].message and "94%" in low[0].message
    assert not a.has(FindingKind.LOW_SOL)
    assert a.has(FindingKind.NO_SIGNIFICANT_GAIN) and not a.has(FindingKind.GAIN)
    unimportant = {f.param for f in a.of(FindingKind.PARAM_UNIMPORTANT)}
    assert "NUM_THREADS" in unimportant and "ITEMS_PER_THREAD" not in unimportant
    assert a.param("ITEMS_PER_THREAD").importance == 0.62  # type: ignore[union-attr]
    (failures,) = a.of(FindingKind.TRIAL_FAILURES)
    assert "3 compile" in failures.message and "1 wrong" in failures.message
    assert "ITEMS_PER_THREAD in [1, 2, 4, 8]" in a.render() and "importance 0.62" in a.render()


def test_low_sol_everywhere_and_a_gain(merge: KernelContext) -> None:
    slow = [(size, o, t, floor * 0.5) for size, o, t, floor in MERGE_SIZES]  # every size below the threshold
    a = analyze(merge, merge.template, result=tune_result(merge.template.space, sizes=slow, significant=True))
    assert a.has(FindingKind.LOW_SOL) and not a.has(FindingKind.LOW_SOL_SMALL_SIZES)
    assert f"below {LOW_SOL_PCT:.0f}%" in a.of(FindingKind.LOW_SOL)[0].message
    assert a.has(FindingKind.GAIN) and not a.has(FindingKind.NO_SIGNIFICANT_GAIN)
    assert a.speedup is not None and a.speedup > 1.0


def test_spills_blamed_on_large_blocks_and_register_limits(merge: KernelContext) -> None:
    defaults = dict(merge.template.space.default())
    rows = [
        ({**defaults, "NUM_THREADS": 128}, 128, 64, 0),  # the original: 64 registers, register-limited
        ({**defaults, "NUM_THREADS": 256}, 256, 72, 0),
        ({**defaults, "NUM_THREADS": 512}, 512, 128, 96),
        ({**defaults, "NUM_THREADS": 1024}, 1024, 64, 224),
        ({**defaults, "NUM_THREADS": 1024, "ITEMS_PER_THREAD": 2}, 1024, 64, 320),
    ]
    a = analyze(merge, merge.template, check=check_report(merge.kernel.name, rows))
    (spills,) = a.of(FindingKind.SPILLS)
    assert spills.param == "NUM_THREADS" and spills.values == (512, 1024)
    assert "3 of 5 compiled configurations spill" in spills.message and "NUM_THREADS=512/1024" in spills.message
    (limited,) = a.of(FindingKind.REGISTER_LIMITED)
    assert "the original configuration among them" in limited.message


def test_spills_extend_to_larger_unsampled_blocks_but_not_to_other_register_caps(
    merge: KernelContext,
) -> None:
    defaults = dict(merge.template.space.default())
    blocks = [({**defaults, "NUM_THREADS": n}, n, 40, 64 if n == 512 else 0) for n in (64, 128, 512)]
    (spills,) = analyze(merge, merge.template, check=check_report(merge.kernel.name, blocks)).of(FindingKind.SPILLS)
    assert spills.param == "NUM_THREADS" and spills.values == (
        512,
        1024,
    )  # 1024 was not compiled, but needs more

    caps = [({**defaults, "MAXRREGCOUNT": c}, 128, c or 80, 48 if c == 32 else 0) for c in (0, 32, 128)]
    (spills,) = analyze(merge, merge.template, check=check_report(merge.kernel.name, caps)).of(FindingKind.SPILLS)
    assert spills.param == "MAXRREGCOUNT" and spills.values == (32,)  # a tighter cap, not a looser one, spills


def test_spills_everywhere_blame_no_parameter(merge: KernelContext) -> None:
    defaults = dict(merge.template.space.default())
    rows = [({**defaults, "NUM_THREADS": n}, n, 32, 16) for n in (64, 128, 256)]
    (spills,) = analyze(merge, merge.template, check=check_report(merge.kernel.name, rows)).of(FindingKind.SPILLS)
    assert spills.param is None and spills.values == ()


def test_infeasible_rows_are_reported(merge: KernelContext) -> None:
    defaults = dict(merge.template.space.default())
    report = check_report(merge.kernel.name, [(defaults, 128, 32, 0)])
    bad = dataclasses.replace(report.rows[0], usage=None, occupancy=None, problem="compile: expected a ';'")
    report = dataclasses.replace(report, rows=(report.rows[0], bad))
    (infeasible,) = analyze(merge, merge.template, check=report).of(FindingKind.INFEASIBLE)
    assert "1 of 2" in infeasible.message and "expected a ';'" in infeasible.message
