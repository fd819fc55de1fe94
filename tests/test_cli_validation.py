"""Bad specs and bad options fail the same way with and without a GPU: one line, exit code 2, no work done."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutune.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _workspace(tmp_path: Path, replace: tuple[str, str] | None = None) -> Path:
    """rms_norm and its spec, with one text of the spec replaced."""
    shutil.copy(ROOT / "samples" / "rms_norm.cu", tmp_path / "rms_norm.cu")
    spec = (ROOT / "samples" / "rms_norm.tune.toml").read_text(encoding="utf-8")
    if replace is not None:
        assert replace[0] in spec
        spec = spec.replace(replace[0], replace[1], 1)
    (tmp_path / "rms_norm.tune.toml").write_text(spec, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("")
    return tmp_path / "rms_norm.cu"


def _one_line_error(output: str, fragment: str) -> None:
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and fragment in errors[0], output
    assert "Traceback" not in output and "configurations failed" not in output


@pytest.mark.parametrize(
    ("replace", "fragment"),
    [
        (
            (
                'shape = ["num_tokens", "hidden_size"]',
                'shape = ["num_tokens", "2 * hidden_size / (hidden_size - hidden_size)"]',
            ),
            "division by zero",
        ),
        (('grid = "num_tokens"', "grid = 5.5"), "gives 5.5, not an integer"),
        (('grid = "num_tokens"', 'grid = "num_tokens // 0"'), "division by zero"),
        (
            ('shape = ["num_tokens", "hidden_size"]', 'shape = ["num_tokens * 1000000000", "hidden_size"]'),
            "elements at size",
        ),
    ],
    ids=["shape-divides-by-zero", "fractional-grid", "grid-divides-by-zero", "absurd-size"],
)
@pytest.mark.parametrize("command", ["check", "tune"])
def test_a_spec_that_cannot_run_is_refused_before_any_work(
    tmp_path: Path, command: str, replace: tuple[str, str], fragment: str
) -> None:
    source = _workspace(tmp_path, replace)
    result = runner.invoke(app, [command, str(source), "-k", "rms_norm_kernel"])
    assert result.exit_code == 2, result.output
    _one_line_error(result.output, fragment)


@pytest.mark.parametrize(
    ("option", "fragment"),
    [(["--sampler", "banana"], "unknown sampler 'banana'"), (["--storage", "banana://"], "storage 'banana://'")],
)
def test_bad_tune_options_are_refused_with_or_without_a_gpu(tmp_path: Path, option: list[str], fragment: str) -> None:
    source = _workspace(tmp_path)
    result = runner.invoke(app, ["tune", str(source), "-k", "rms_norm_kernel", *option])
    assert result.exit_code == 2, result.output
    _one_line_error(result.output, fragment)
    assert not (tmp_path / ".cutune" / "cache").exists(), "nothing is compiled"
