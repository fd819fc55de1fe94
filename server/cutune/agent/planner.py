"""The planner interface: given the analysis of the last template and the steps so far, propose a plan.

A planner chooses recipes and candidate values; it never picks the final numbers, the search does.
Implementations register in `cutune.agent.registry.PLANNERS` under an AgentSettings kind.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from cutune.agent.analysis import Analysis
from cutune.agent.history import Step
from cutune.agent.plan import Plan


class Planner(ABC):
    """Proposes the next template as a Plan."""

    name: ClassVar[str]

    @abstractmethod
    def propose(self, analysis: Analysis, history: Sequence[Step]) -> Plan:
        """The next plan (`done` when no change is worth testing); raises AgentError when it has none."""
