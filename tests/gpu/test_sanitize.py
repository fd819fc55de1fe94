"""compute-sanitizer plumbing on the CPU: the size it runs at, how its report is read, and (with a fake
tool on PATH that prints a recorded report) how a finding becomes a failed check."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from cutune.gpu import sanitize
from cutune.gpu.backend import Failure
from cutune.gpu.sanitize import findings, sanitize_job, sanitize_size
from cutune.spec import load_spec
from cutune.template.model import Config
from tests.gpu.test_cupy_backend import job_as_written

ROOT = Path(__file__).resolve().parents[2]
WRONG = ROOT / "tests/data/gpu/wrong/wrong.cu"
MEMCHECK = """========= COMPUTE-SANITIZER
cutune-sanitize: start 0
========= Invalid __global__ write of size 4 bytes
=========     at void bounds_kernel<(int)1>(float *, const float *, int)+0x90
=========     by thread (255,0,0) in block (255,0,0)
=========     Address 0x7f3a0003fffc is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3a00000000 of size 262140 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
cutune-sanitize: start 1
cutune-sanitize: done 1
========= ERROR SUMMARY: 1 error
"""
API_ONLY = (
    "========= COMPUTE-SANITIZER\n"
    "cutune-sanitize: start 0\n"
    '========= Program hit cudaErrorPeerAccessUnsupported (error 217) due to "peer access is not supported" '
    "on CUDA API call to cudaDeviceEnablePeerAccess.\n"
    "cutune-sanitize: done 0\n"
    "========= ERROR SUMMARY: 1 error\n"
)

CUPY: dict[str, Any] = {"backend": "cupy", "options": {}}  # the child builds this backend


def test_the_smallest_ragged_size_is_sanitized() -> None:
    spec = load_spec(ROOT / "samples/silu_and_mul.tune.toml").kernel("silu_and_mul_kernel")
    assert sanitize_size(spec) == {"num_tokens": 14, "d": 4080}


def test_kernel_errors_are_findings_and_host_api_errors_are_not() -> None:
    found = findings(MEMCHECK)
    assert found.startswith("Invalid __global__ write of size 4 bytes | at void bounds_kernel<(int)1>")
    assert "is out of bounds" in found and "ERROR SUMMARY" not in found
    assert findings(API_ONLY) == ""
    assert findings("========= Error: Race reported between Write access at k+0x10\n").startswith("Error: Race")


def fake_tool(folder: Path, report: str, code: int) -> None:
    script = folder / "compute-sanitizer"
    script.write_text(f"#!/bin/sh\ncat <<'REPORT'\n{report}REPORT\nexit {code}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_a_finding_fails_the_winner_with_the_tools_message_fake_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = job_as_written(WRONG, "bounds_kernel")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(sanitize, "PROCESSES_PER_TOOL", 1)  # the report was recorded from one child running both
    fake_tool(tmp_path, MEMCHECK, 86)
    planted, right = Config.of({"MODE": 1}), Config.of({"MODE": 0})
    checks = sanitize_job(job, [planted, right], tools=("memcheck",), **CUPY)
    assert checks is not None and [c.config for c in checks] == [planted, right]
    assert checks[0].failure is Failure.OUT_OF_BOUNDS
    assert checks[0].detail.startswith("compute-sanitizer memcheck at n=65534: Invalid __global__ write of size 4")
    assert checks[1].ok and checks[1].detail == "compute-sanitizer memcheck: no error at n=65534"
    fake_tool(tmp_path, API_ONLY, 86)
    clean = sanitize_job(job, [right], **CUPY)
    assert clean is not None and clean[0].ok
    assert clean[0].detail == "compute-sanitizer memcheck, racecheck: no error at n=65534"
    fake_tool(tmp_path, "Traceback: planted\n", 1)
    broken = sanitize_job(job, [right], **CUPY)
    assert broken is not None and broken[0].ok and broken[0].detail.startswith("not sanitized: the memcheck run")


def test_the_tools_run_at_once_fake_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # each tool's run waits (up to 20 s) for the other's to start: run one after the other, neither would finish
    script = tmp_path / "compute-sanitizer"
    script.write_text(
        "#!/bin/sh\n"
        f'touch "{tmp_path}/$2"; other=memcheck; [ "$2" = memcheck ] && other=racecheck\n'
        f'i=0; while [ ! -e "{tmp_path}/$other" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done\n'
        f'[ -e "{tmp_path}/$other" ] && printf "cutune-sanitize: start 0\\ncutune-sanitize: done 0\\n"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    checks = sanitize_job(job_as_written(WRONG, "bounds_kernel"), [Config.of({"MODE": 0})], timeout_s=15, **CUPY)
    assert checks is not None and checks[0].detail == "compute-sanitizer memcheck, racecheck: no error at n=65534"


def test_each_tool_deals_the_configurations_to_its_own_children_fake_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    script = tmp_path / "compute-sanitizer"
    report = 'printf "cutune-sanitize: start 0\\ncutune-sanitize: done 0\\n"'
    script.write_text(f'#!/bin/sh\necho "$2" >> "{runs}"\n{report}\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    configs = [Config.of({"MODE": 0}), Config.of({"MODE": 0, "X": 1})]
    checks = sanitize_job(job_as_written(WRONG, "bounds_kernel"), configs, **CUPY)
    assert checks is not None and all(c.ok and "no error" in c.detail for c in checks)
    assert sorted(runs.read_text().split()) == ["memcheck", "memcheck", "racecheck", "racecheck"]


def test_no_tool_no_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert sanitize_job(job_as_written(WRONG, "bounds_kernel"), [Config.of({"MODE": 1})], **CUPY) is None
