"""The command line, run in-process through typer's runner on the shipped samples."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from optuna.trial import TrialState
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
        "--no-variants",  # recorded before variants existed: the recording must match the space
        "--trials",
        "20",
        "--output",
        str(tmp_path / "r.json"),
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "replayed from silu_and_mul.tune.NVIDIA-H200.2026-11-21.jsonl (NVIDIA H200, 2026-11-21)" in res.output
    assert "% SOL" in res.output and (tmp_path / "r.json").exists()
    assert "20 configurations measured" in res.output
    again = runner.invoke(app, [*args[:-4], "--trials", "30"])  # same study: only 10 more are measured
    assert again.exit_code == 0 and "30 configurations measured" in again.output
    # the sampler alone, without the probe rounds: the same study goes on
    plain = runner.invoke(app, [*args[:-4], "--trials", "35", "--no-probe"])
    assert plain.exit_code == 0 and "35 configurations measured" in plain.output


def readme_replay_command() -> list[str]:
    """The arguments of the README's replay example, as written there (after `.venv/bin/cutune`)."""
    text = (ROOT / "README.md").read_text()
    block = next(b for b in re.findall(r"```sh\n(.*?)```", text, re.S) if "--backend replay" in b)
    words = shlex.split(block.replace("\\\n", " "))
    return words[words.index(".venv/bin/cutune") + 1 :]


def test_the_readme_replay_command_runs_as_written_in_a_release_archive(tmp_path: Path) -> None:
    """`git archive HEAD | tar -x` (no .git, so no spec history): the README's replay command, as written, replays
    the shipped recording, which carries the canonical spec it was measured with; the shipped spec gained
    comments and multiple_of since, which do not decide measurements."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    if head.returncode != 0:
        pytest.skip("not a git checkout: nothing to archive")
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
    release = tmp_path / "release"
    release.mkdir()
    subprocess.run(["tar", "-x"], cwd=release, input=archive, check=True)
    assert not (release / ".git").exists()
    env = {**os.environ, "PYTHONPATH": str(release / "server"), "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    command = [sys.executable, "-m", "cutune", *readme_replay_command()]
    done = subprocess.run(command, cwd=release, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "replayed from silu_and_mul.tune.NVIDIA-H200.2026-11-21.jsonl (NVIDIA H200, 2026-11-21)" in done.stdout
    spec = release / "samples" / "silu_and_mul.tune.toml"
    spec.write_text(spec.read_text().replace("scale = 2.0", "scale = 3.0"))  # a change that decides measurements
    done = subprocess.run(command, cwd=release, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "the tuning spec changed since it was recorded" in done.stderr
    assert "args[1].scale" in done.stderr


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


# every bad input and every interruption gets a clear message (issue 14)

SCALE = ROOT / "tests" / "data" / "lsp" / "autotune"  # a small kernel with a spec; recordings made per test


# messages are read from `output` (stdout and stderr together): older Click mixes them, newer keeps both
def scale_workspace(tmp_path: Path) -> Path:
    """The scale kernel, its spec and a synthetic (TEST-ONLY) recording of its whole space, in a workspace."""
    from tests.lsp.synthetic import write_recording

    for name in ("scale.cu", "scale.tune.toml"):
        shutil.copy(SCALE / name, tmp_path)
    (tmp_path / "pyproject.toml").write_text("")  # the workspace root: .cutune/ goes here
    write_recording(tmp_path / "scale.cu", "scale_kernel", tmp_path / "scale.jsonl")
    return tmp_path / "scale.cu"


def replay_args(src: Path, *extra: str) -> list[str]:
    return ["tune", str(src), "-k", "scale_kernel", "--backend", "replay", "--replay", str(src.parent / "scale.jsonl"),
            "--no-variants", *extra]  # fmt: skip


def test_an_invalid_spec_fails_check_and_gpu_less_tune_instead_of_drafting_one(tmp_path: Path) -> None:
    src = copy_sample(tmp_path, "silu_and_mul")
    spec = tmp_path / "silu_and_mul.tune.toml"
    spec.write_text(spec.read_text().replace('dtype = "int32"', 'dtype = "int33"'))
    commands = [["check", str(src), "-k", "silu_and_mul_kernel"], ["agent", str(src), "-k", "silu_and_mul_kernel"]]
    if not gpu_available():
        commands.append(["tune", str(src), "-k", "silu_and_mul_kernel"])
    for command in commands:
        res = runner.invoke(app, command)
        assert res.exit_code == 2, res.output
        # the key is in brackets: printed as written, not eaten as rich markup
        assert "silu_and_mul.tune.toml:" in res.output and "[kernel.silu_and_mul_kernel.args[2].dtype]" in res.output
        assert "TODO" not in res.output and "Traceback" not in res.output


def test_an_unknown_backend_fails_before_any_work(tmp_path: Path) -> None:
    src = scale_workspace(tmp_path)
    res = runner.invoke(app, ["tune", str(src), "-k", "scale_kernel", "--backend", "bogus"])
    assert res.exit_code == 2, res.output
    assert "unknown backend 'bogus'" in res.output
    assert "refused" not in res.output and "variant" not in res.output  # nothing templatized or printed first


@pytest.mark.skipif(gpu_available(), reason="checks the message where no CUDA device is")
def test_devices_all_without_a_gpu_is_a_clear_error(tmp_path: Path) -> None:
    src = scale_workspace(tmp_path)
    res = runner.invoke(app, replay_args(src, "--devices", "all"))
    assert res.exit_code == 2, res.output
    assert "--devices all" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize(
    "args",
    [
        ["tune", "--trials", "0"],
        ["tune", "--trials", "-5"],
        ["tune", "--seconds", "0"],
        ["check", "--limit", "0"],
        ["check", "--limit", "-1"],
        ["check", "--jobs", "0"],
    ],
)
def test_counts_below_one_are_rejected(tmp_path: Path, args: list[str]) -> None:
    src = copy_sample(tmp_path, "silu_and_mul")
    res = runner.invoke(app, [args[0], str(src), "-k", "silu_and_mul_kernel", *args[1:]])
    assert res.exit_code == 2 and f"Invalid value for '{args[1]}'" in res.output


def test_check_exits_non_zero_when_every_configuration_fails(tmp_path: Path) -> None:
    src = copy_sample(tmp_path, "silu_and_mul", spec=False)  # a drafted spec: its grid is still a TODO
    res = runner.invoke(app, ["check", str(src), "-k", "silu_and_mul_kernel", "--limit", "2"])
    assert res.exit_code == 1, res.output
    assert "every configuration failed" in res.output and "cutune templatize --write" in res.output


@pytest.mark.nvcc
def test_check_without_a_gpu_names_the_target_not_a_device_and_writes_json(tmp_path: Path) -> None:
    import json

    src = copy_sample(tmp_path, "merge_attn_states")
    res = runner.invoke(app, ["check", str(src), "-k", "merge_attn_states_kernel", "--limit", "2"])
    assert res.exit_code == 0, res.output
    assert "compiled for sm_90 (compile-only)" in res.output and "H100" not in res.output
    res = runner.invoke(app, ["check", str(src), "-k", "merge_attn_states_kernel", "--limit", "2", "--format", "json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)  # stdout holds the JSON alone
    assert report["compile_only"] and report["configurations"][0]["original"]
    assert report["configurations"][0]["feasible"] and report["configurations"][0]["registers"] > 0


def test_kernels_and_tune_write_json_for_scripts(tmp_path: Path) -> None:
    import json

    src = scale_workspace(tmp_path)
    res = runner.invoke(app, ["kernels", str(src), "--format", "json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.stdout)
    assert listed["kernels"][0]["name"] == "scale_kernel" and listed["kernels"][0]["launch_lines"]
    res = runner.invoke(app, replay_args(src, "--trials", "5", "--format", "json"))
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert result["kernel"] == "scale_kernel" and result["device"] == "Synthetic GPU (test-only)"


def test_piped_tables_are_plain_and_unwrapped(tmp_path: Path) -> None:
    name = "k_" + "x" * 200  # wider than any terminal
    src = tmp_path / "wide.cu"
    src.write_text(f"__global__ void {name}(float* x) {{ x[threadIdx.x] = 1; }}\n")
    res = runner.invoke(app, ["kernels", str(src)])
    assert res.exit_code == 0, res.output
    row = next(line for line in res.stdout.splitlines() if name in line)  # the whole name on one line
    assert row.split()[:2] == [name, "1"] and not any(c in res.stdout for c in "│┃━─")


def test_an_unknown_kernel_in_a_big_file_names_the_closest_few(tmp_path: Path) -> None:
    from benchmarks.big_file import big_source

    text, count = big_source(3000)
    src = tmp_path / "big.cu"
    src.write_text(text)
    res = runner.invoke(app, ["templatize", str(src), "-k", "scale_12_kernal"])
    assert res.exit_code == 2
    assert "did you mean scale_12_kernel" in res.output and f"{count} kernels here" in res.output
    assert "scale_200_kernel" not in res.output and len(res.output) < 1000  # not every name


def test_a_workspace_cutune_cannot_write_is_a_clear_error(tmp_path: Path) -> None:
    src = scale_workspace(tmp_path)
    (tmp_path / ".cutune").write_text("a file where cutune's state folder belongs")
    res = runner.invoke(app, replay_args(src, "--trials", "3"))
    assert res.exit_code == 2, res.output
    assert ".cutune" in res.output and "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)


@pytest.mark.nvcc
def test_check_and_agent_compile_without_the_cache_where_cutune_cannot_write(tmp_path: Path) -> None:
    src = copy_sample(tmp_path, "merge_attn_states")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / ".cutune").write_text("a file where cutune's state folder belongs")
    res = runner.invoke(app, ["check", str(src), "-k", "merge_attn_states_kernel", "--limit", "2"])
    assert res.exit_code == 0, res.output
    assert "compiling without the compile cache" in res.output and "yes (original)" in res.stdout
    if not gpu_available():
        res = runner.invoke(app, ["agent", str(src), "-k", "merge_attn_states_kernel", "--iterations", "1"])
        assert res.exit_code == 0, res.output
        assert "compiling without the compile cache" in res.output and "stopped:" in res.stdout


@pytest.mark.parametrize("address", ["banana", ":99999", "host:", "127.0.0.1:0"])
def test_serve_rejects_a_bad_tcp_address(address: str) -> None:
    res = runner.invoke(app, ["serve", "--tcp", address])
    assert res.exit_code == 2 and "expected HOST:PORT with a port from 1 to 65535" in res.output


def test_serve_says_when_it_cannot_listen() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = runner.invoke(app, ["serve", "--tcp", f"127.0.0.1:{port}"])
    assert res.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}" in res.output


def _finished_trials(journal: Path) -> int:
    """Completed trials in a study journal (0 before it exists)."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    if not journal.exists():
        return 0
    storage = JournalStorage(JournalFileBackend(str(journal)))
    return sum(
        len(optuna.load_study(study_name=s.study_name, storage=storage).get_trials(states=(TrialState.COMPLETE,)))
        for s in storage.get_all_studies()
    )


@pytest.mark.timeout(180)
def test_ctrl_c_stops_after_the_current_trial_and_keeps_every_finished_one(tmp_path: Path) -> None:
    src = scale_workspace(tmp_path)
    # isolated: the worker process is in the terminal's process group too, and must not die of the SIGINT
    args = replay_args(src, "--trials", "200", "--replay-pace", "0.25", "--isolate")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cutune", *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job has
    )
    journal = tmp_path / ".cutune" / "studies.journal"
    deadline = time.monotonic() + 90
    try:
        while _finished_trials(journal) < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no trial finished in 90 s"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the CLI and its worker get it
        _, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert "stopped (Ctrl-C)" in stderr and "run the same command to resume" in stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr and "KeyError" not in stderr
    kept = _finished_trials(journal)
    assert 3 <= kept < 200
    resumed = runner.invoke(app, replay_args(src, "--trials", str(kept + 2)))  # the study goes on from there
    assert resumed.exit_code == 0, resumed.output


@pytest.mark.nvcc
def test_check_shows_its_progress_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    import cutune.cli

    terminal = io.StringIO()
    monkeypatch.setattr(cutune.cli, "err", Console(file=terminal, force_terminal=True, width=120))
    src = copy_sample(tmp_path, "merge_attn_states")
    res = runner.invoke(app, ["check", str(src), "-k", "merge_attn_states_kernel", "--limit", "3"])
    assert res.exit_code == 0, res.output
    shown = terminal.getvalue()
    assert "compiling configurations of merge_attn_states_kernel for sm_90" in shown and "3/3" in shown


@pytest.mark.parametrize("command", [[], ["tune"], ["check"], ["capture"], ["agent"], ["serve"]])
def test_help_names_arguments_plainly_and_shows_no_type_on_flags(command: list[str]) -> None:
    res = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "<bool>" not in res.output and "{" not in res.output
    if command in (["tune"], ["check"]):
        assert f"{command[0]} [OPTIONS] FILE" in res.output
