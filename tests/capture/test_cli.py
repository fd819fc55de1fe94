"""`cutune capture` on the command line: listing a log, writing specs from one, and no GPU."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutune.capture.log import read_log
from cutune.cli import app
from cutune.spec import load_spec
from tests.capture.logs import RMS_BF16, rms_launch, write_log
from tests.capture.test_spec import SAMPLE

runner = CliRunner()


def _gpu_here() -> bool:
    from cutune.capture.run import require_gpu
    from cutune.errors import NoGpuError

    try:
        require_gpu()
    except NoGpuError:
        return False
    return True


def test_show_lists_kernels_problems_and_counts(tmp_path: Path) -> None:
    log = write_log(tmp_path / "l.jsonl", [rms_launch(RMS_BF16, 1, 4096, 120), rms_launch(RMS_BF16, 512, 4096, 7)])
    res = runner.invoke(app, ["capture", "--show", str(log)])
    assert res.exit_code == 0, res.output
    assert "vllm::rms_norm_kernel<c10::BFloat16>" in res.output
    assert "512×1×1" in res.output and "120" in res.output
    assert "127 launches in all" in res.output


def test_replay_writes_the_spec_without_running_anything(tmp_path: Path) -> None:
    shutil.copy(SAMPLE, tmp_path)
    log = write_log(tmp_path / "l.jsonl", [rms_launch(RMS_BF16, 16, 2048, 3)])
    res = runner.invoke(app, ["capture", "--replay", str(log), "--root", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "rms_norm_kernel" in res.output and "random" in res.output
    spec = load_spec(tmp_path / "layernorm_kernels.tune.toml").kernel("rms_norm_kernel")
    assert spec.sizes == ({"num_tokens": 16, "hidden_size": 2048},)


def test_a_contradicted_shape_fails_with_exit_1_and_names_the_argument(tmp_path: Path) -> None:
    shutil.copy(SAMPLE, tmp_path)
    log = write_log(tmp_path / "l.jsonl", [rms_launch(RMS_BF16, 4, 4096, 1, weight_extent=100)])
    res = runner.invoke(app, ["capture", "--replay", str(log), "--root", str(tmp_path)])
    assert res.exit_code == 1
    assert "argument 'weight'" in res.output and "Traceback" not in res.output


@pytest.mark.skipif(_gpu_here(), reason="this machine has a CUDA GPU")
def test_without_a_gpu_capture_says_so_in_one_line(tmp_path: Path) -> None:
    shutil.copy(SAMPLE, tmp_path)
    res = runner.invoke(app, ["capture", "--root", str(tmp_path), "--", "python3", "-c", "pass"])
    assert res.exit_code == 2
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "capture needs a CUDA GPU and the program's own environment" in lines[0]


def test_no_program_and_unknown_kernel_are_clear_errors(tmp_path: Path) -> None:
    shutil.copy(SAMPLE, tmp_path)
    res = runner.invoke(app, ["capture", "--root", str(tmp_path)])
    assert res.exit_code == 2 and "no program to run" in res.output
    res = runner.invoke(app, ["capture", "--root", str(tmp_path), "-k", "nope", "--", "true"])
    assert res.exit_code == 2 and "no kernel named nope" in res.output


@pytest.mark.parametrize(
    ("program", "says"),
    [
        ([sys.executable, "-c", "print('hello')"], "pip install cupti-python"),  # no cupti-python here
        (["true"], "never started"),  # a native program that never initialises CUDA
    ],
)
def test_the_program_runs_and_a_recorder_that_cannot_start_is_named_with_gpu_check_stubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, program: list[str], says: str
) -> None:
    import cutune.capture.run as run

    monkeypatch.setattr(run, "require_gpu", lambda: None)  # no GPU here: the rest of the run is real
    shutil.copy(SAMPLE, tmp_path)
    log = tmp_path / "launches.jsonl"
    res = runner.invoke(app, ["capture", "--root", str(tmp_path), "--log", str(log), "--", *program])
    assert res.exit_code == 2 and says in res.output, res.output
    assert read_log(log).launches == ()  # the log is written all the same
    assert not list((tmp_path / ".cutune" / "capture").glob("parts-*"))
