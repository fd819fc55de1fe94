"""Skips tests whose hardware or tools are missing: `nvcc` (the CUDA compiler) and `gpu` (CuPy + a GPU)."""

from __future__ import annotations

import functools
import shutil

import pytest


@functools.cache
def _gpu_usable() -> bool:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU here"
        return False


@pytest.fixture(autouse=True)
def _skip_missing_hardware(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("nvcc") and shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    if request.node.get_closest_marker("gpu") and not _gpu_usable():
        pytest.skip("no CUDA GPU usable through CuPy")
