"""The agent's error: a planner, its endpoint or its answer failed; the message says which and why."""

from __future__ import annotations

from cutune.errors import CutuneError


class AgentError(CutuneError):
    """A plan could not be proposed or applied: an endpoint failed, an answer or a plan was invalid."""
