"""The command line, run in-process through typer's runner on the shipped samples."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutune.cli import app
from cutune.gpu.device import gpu_available

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
RECORDING = ROOT / "benchmarks" / "results" / "recordings" / "silu_and_mul.tune.NVIDIA-H200.2026-11-21.jsonl"
runner = CliRunner()


RECORDED_SPECS = ROOT / "tests" / "data" / "gpu" / "recorded_specs"  # the specs the recordings were made with


def copy_sample(tmp_path: Path, stem: str, *, spec: bool = True) -> Path:
    """A sample (and the spec its recording was made with) in a throwaway folder: writes touch nothing shipped."""
    shutil.copy(SAMPLES / f"{stem}.cu", tmp_path)
    if spec:
        shutil.copy(RECORDED_SPECS / f"{stem}.tune.toml", tmp_path)
    return tmp_path / f"{stem}.cu"


def test_kernels_lists_the_kernel_and_its_tunable_literals() -> None:
    res = runner.invoke(app, ["kernels", str(SAMPLES / "merge_attn_states.cu")])
    assert res.exit_code == 0, res.output
    assert "merge_attn_states_kernel" in res.output and "constexpr(NUM_THREADS)=128" in res.output


def test_templatize_prints_the_rewrite_and_writes_only_with_write(tmp_path: Path) -> None:
    src = copy_sample(tmp_path, "silu_and_mul", spec=False)
    before = src.read_text()
    res = runner.invoke(app, ["templatize", str(src), "--kernel", "silu_and_mul_kernel"])
    assert res.exit_code == 0, res.output
    assert "struct silu_and_mul_kernel_tuning" in res.output and "refused items_per_thread" in res.output
    assert src.read_text() == before and not (tmp_path / "silu_and_mul.tune.toml").exists()
    res = runner.invoke(app, ["templatize", str(src), "-k", "silu_and_mul_kernel", "--write"])
    assert res.exit_code == 0, res.output
    assert "static constexpr int BLOCK_THREADS = 1024;" in src.read_text()
    assert "[kernel.silu_and_mul_kernel]" in (tmp_path / "silu_and_mul.tune.toml").read_text()
    again = runner.invoke(app, ["templatize", str(src), "-k", "silu_and_mul_kernel"])
    assert "no change to the source" in again.output  # idempotent


def test_bad_input_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["templatize", str(tmp_path / "nope.cu"), "-k", "k"])
    assert missing.exit_code == 2 and "file not found" in missing.output
    garbage = tmp_path / "broken.cu"
    garbage.write_text("__global__ void ok(float* x) { x[0] = 1; }\n__global__ void broken(int { ]]] \n")
    res = runner.invoke(app, ["templatize", str(garbage), "-k", "missing_kernel"])
    assert res.exit_code == 2 and "no __global__ kernel named 'missing_kernel'" in res.output
    assert "ok" in res.output  # the kernels that parse are still listed


def test_a_broken_spec_names_file_line_and_key(tmp_path: Path) -> None:
    src = copy_sample(tmp_path, "silu_and_mul")
    spec = tmp_path / "silu_and_mul.tune.toml"
    spec.write_text(spec.read_text().replace('dtype = "int32"', 'dtype = "int33"'))
    res = runner.invoke(
        app, ["tune", str(src), "-k", "silu_and_mul_kernel", "--backend", "replay", "--replay", str(RECORDING)]
    )
    assert res.exit_code == 2
    line = next(i for i, t in enumerate(spec.read_text().splitlines(), 1) if "int33" in t)
    assert f"silu_and_mul.tune.toml:{line}" in res.output and "dtype" in res.output


@pytest.mark.nvcc
def test_check_compiles_a_sample_of_configurations(tmp_path: Path) -> None:
    src = copy_sample(tmp_path, "merge_attn_states")
    res = runner.invoke(app, ["check", str(src), "-k", "merge_attn_states_kernel", "--limit", "3"])
    assert res.exit_code == 0, res.output
    assert (
        "original" in res.output
        and "yes" in res.output
        and "compile-only" in res.output
        and "needs a CUDA GPU" in res.output
    )


@pytest.mark.nvcc
@pytest.mark.skipif(gpu_available(), reason="this is the no-GPU fallback")
def test_tune_without_a_gpu_falls_back_to_templatize_and_compile_only(tmp_path: Path) -> None:
    src = copy_sample(tmp_path, "silu_and_mul")
    res = runner.invoke(app, ["tune", str(src), "-k", "silu_and_mul_kernel"])
    assert res.exit_code == 0, res.output
    assert "measured tuning needs a CUDA GPU" in res.output and "original" in res.output and "yes" in res.output


def test_tune_replays_a_recorded_h200_search_and_resumes(tmp_path: Path) -> None:
    src = copy_sample(tmp_path, "silu_and_mul")
    args = [
        "tune",
        str(src),
        "-k",
        "silu_and_mul_kernel",
        "--backend",
        "replay",
        "--replay",
        str(RECORDING),
        "--trials",
        "20",
        "--output",
        str(tmp_path / "r.json"),
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "NVIDIA H200" in res.output and "% SOL" in res.output and (tmp_path / "r.json").exists()
    assert "20 configurations measured" in res.output
    again = runner.invoke(app, [*args[:-4], "--trials", "30"])  # same study: only 10 more are measured
    assert again.exit_code == 0 and "30 configurations measured" in again.output


@pytest.mark.nvcc
def test_agent_proposes_and_compile_tests_a_template(tmp_path: Path) -> None:
    src = copy_sample(tmp_path, "silu_and_mul")
    res = runner.invoke(app, ["agent", str(src), "-k", "silu_and_mul_kernel", "--iterations", "2"])
    assert res.exit_code == 0, res.output
    assert "step 1 (builtin)" in res.output and "compile for sm_90" in res.output and "stopped:" in res.output


@pytest.mark.nvcc
def test_agent_with_an_unreachable_llm_falls_back_to_the_builtin_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUTUNE_LLM_API_KEY", "test-key")
    src = copy_sample(tmp_path, "silu_and_mul")
    # port 9 on loopback: nothing listens, the connection is refused at once
    res = runner.invoke(
        app,
        [
            "agent",
            str(src),
            "-k",
            "silu_and_mul_kernel",
            "--iterations",
            "1",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--arch",
            "sm_90",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "the LLM's plan was not used" in res.output and "127.0.0.1:9" in res.output
