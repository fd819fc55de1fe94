"""Fixtures of the agent tests: the samples opened for real, a local LLM server, an API key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cutune.agent.settings import API_KEY_VARIABLES
from cutune.project import KernelContext, open_kernel
from tests.agent.llm_server import FakeLLM

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
API_KEY = "sk-cutune-test-0123456789"


@pytest.fixture(scope="session")
def silu() -> KernelContext:
    return open_kernel(SAMPLES / "silu_and_mul.cu", "silu_and_mul_kernel")


@pytest.fixture(scope="session")
def merge() -> KernelContext:
    return open_kernel(SAMPLES / "merge_attn_states.cu", "merge_attn_states_kernel")


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM()
    yield server
    server.close()


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """CUTUNE_LLM_API_KEY set, OPENAI_API_KEY unset."""
    for name in API_KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUTUNE_LLM_API_KEY", API_KEY)
    return API_KEY
