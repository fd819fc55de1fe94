"""Ctrl-C during compile-only work (no GPU): the command stops within a second or two, exit code 130."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _workspace(tmp_path: Path) -> Path:
    """rms_norm and its spec in a fresh workspace: its compile cache is cold, so compiles are running."""
    for name in ("rms_norm.cu", "rms_norm.tune.toml"):
        shutil.copy(ROOT / "samples" / name, tmp_path / name)
    (tmp_path / "pyproject.toml").write_text("")
    return tmp_path


@pytest.mark.nvcc
@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", ["tune", "agent"])
def test_ctrl_c_mid_compile_exits_130_within_2_s(tmp_path: Path, command: str) -> None:
    root = _workspace(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cutune", command, "rms_norm.cu", "-k", "rms_norm_kernel"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job has
    )
    cache = root / ".cutune" / "cache"
    deadline = time.monotonic() + 90
    try:
        while not (cache.is_dir() and any(cache.glob("*.json"))):  # one compile done, the others under way
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "nothing compiled in 90 s"
            time.sleep(0.05)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        _, stderr = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert took < 2.0, f"exited {took:.1f} s after Ctrl-C"
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert any(cache.glob("*.json")), "the finished compiles are kept"


def test_the_installed_script_runs_main() -> None:
    """`cutune` (the installed script) goes through `main`, which handles Ctrl-C and the exit, not `app` alone."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["cutune"] == "cutune.cli:main"
