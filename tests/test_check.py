"""check with tune's compiler choice (`--compiler auto|nvrtc|nvcc`): real NVRTC and real nvcc, through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutune.check import check_kernel
from cutune.cli import app
from cutune.gpu.device import gpu_available
from cutune.gpu.nvrtc import find_libnvrtc
from cutune.limits import limits_for
from cutune.project import open_kernel
from cutune.tune.space import Feasibility
from cutune.workflow import variants_of, with_combined

ROOT = Path(__file__).resolve().parents[1]
HOST_TRAITS = ROOT / "tests" / "cuda" / "data" / "host_traits"  # a header NVRTC cannot read, nvcc can
runner = CliRunner()

pytestmark = [
    pytest.mark.nvcc,
    pytest.mark.skipif(find_libnvrtc() is None, reason="libnvrtc not found (CUDA toolkit or wheel)"),
]


@pytest.fixture
def scale(tmp_path: Path) -> Path:
    for name in ("scale.cu", "scale.tune.toml", "traits.h"):
        shutil.copy(HOST_TRAITS / name, tmp_path)
    return tmp_path / "scale.cu"


def test_nvrtc_check_reports_registers_of_the_kernel_it_instantiates(tmp_path: Path) -> None:
    shutil.copy(ROOT / "samples" / "silu_and_mul.cu", tmp_path)
    shutil.copy(ROOT / "tests" / "data" / "gpu" / "recorded_specs" / "silu_and_mul.tune.toml", tmp_path)
    report = check_kernel(open_kernel(tmp_path / "silu_and_mul.cu", "silu_and_mul_kernel"), limit=2, compiler="nvrtc")
    assert [r.compiler for r in report.rows] == ["nvrtc", "nvrtc"], [r.problem for r in report.rows]
    assert all(r.usage is not None and r.usage.registers > 0 for r in report.rows)
    assert all(r.usage is not None and "silu_and_mul_kernel" in r.usage.function for r in report.rows)
    assert report.compiler == "nvrtc" and report.fallback == ""


def test_check_with_nvrtc_fails_where_tune_would(scale: Path) -> None:
    res = runner.invoke(app, ["check", str(scale), "-k", "scale_kernel", "--compiler", "nvrtc"])
    assert res.exit_code == 1, res.output
    assert 'namespace "std" has no member "vector"' in res.stdout
    # the error says what stood in for the headers NVRTC has no copy of
    assert "<type_traits>, <vector>, included by project headers, stood in for by CCCL's" in res.stdout
    assert "every configuration failed" in res.stderr


def test_check_auto_falls_back_to_nvcc_and_says_why(scale: Path) -> None:
    res = runner.invoke(app, ["check", str(scale), "-k", "scale_kernel", "--format", "json"])  # auto: the default
    assert res.exit_code == 0, res.output
    assert "compiled with nvcc where NVRTC could not" in res.stderr and '"vector"' in res.stderr
    rows = json.loads(res.stdout)["configurations"]
    assert [r["feasible"] for r in rows] == [True, True] and all(r["registers"] > 0 for r in rows)


def test_check_with_nvcc_compiles_what_nvrtc_cannot(scale: Path) -> None:
    report = check_kernel(open_kernel(scale, "scale_kernel"), compiler="nvcc")
    assert [r.compiler for r in report.rows] == ["nvcc", "nvcc"] and report.fallback == ""


def test_an_unknown_compiler_is_a_one_line_error(scale: Path) -> None:
    res = runner.invoke(app, ["check", str(scale), "-k", "scale_kernel", "--compiler", "clang"])
    assert res.exit_code == 2 and "unknown compiler 'clang'" in res.stderr and "Traceback" not in res.output


@pytest.mark.skipif(gpu_available(), reason="tests tune's compile-only fallback, taken only without a GPU")
def test_tune_without_a_gpu_checks_with_its_own_compiler(scale: Path) -> None:
    res = runner.invoke(app, ["tune", str(scale), "-k", "scale_kernel", "--compiler", "nvrtc", "--no-variants"])
    assert res.exit_code == 1 and 'namespace "std" has no member "vector"' in res.stdout, res.output
    res = runner.invoke(app, ["tune", str(scale), "-k", "scale_kernel", "--compiler", "nvcc", "--no-variants"])
    assert res.exit_code == 0 and "yes (original)" in res.stdout, res.output


def test_a_sample_of_a_variant_space_never_draws_another_variants_own_parameters(tmp_path: Path) -> None:
    # the combined space's product is 432,000 points, of which each variant's own parameters vary only where it runs
    ctx = open_kernel(ROOT / "samples" / "silu_and_mul.cu", "silu_and_mul_kernel")
    found = variants_of(ctx)
    variants = found.variants
    combined = with_combined(ctx, found)
    report = check_kernel(combined, limit=6, compiler="nvrtc")
    assert len(report.rows) == 6, [r.problem for r in report.rows]
    assert report.space_size < combined.space.size() and len({r.config["VARIANT"] for r in report.rows}) >= 2
    # the draws come from one group a variant, each holding the others' own parameters at their defaults (a draw may
    # still break a constraint among its own variant's parameters, block_items' ITEMS_T beside ITEMS_Y: skipped)
    feasibility = Feasibility(combined.space, combined.require_spec(), limits_for("sm_90"))
    names = [p.name for p in combined.space.params]
    owners = {p.name: {k for k, v in enumerate(variants, 1) if p in v.params} for v in variants for p in v.params}
    assert len(feasibility.groups) == len(variants) + 1
    for group in feasibility.groups:
        values = dict(zip(names, group, strict=True))
        (running,) = values["VARIANT"]
        held = [name for name, runs in owners.items() if running not in runs]
        assert held and all(values[name] == (combined.space.param(name).default,) for name in held), running
        mine = [name for name, runs in owners.items() if running in runs]
        assert all(len(values[name]) > 1 for name in mine if len(combined.space.param(name).values) > 1), running
