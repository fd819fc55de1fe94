"""The measured agent loop as a use case: backend and storage chosen here, the steps run by `agent.steps`."""

from __future__ import annotations

from cutune.agent.sources import make_source
from cutune.agent.steps import LoopRun, run_loop
from cutune.project import KernelContext, tune_options
from cutune.workflow.backends import usable_backend
from cutune.workflow.request import AgentRequest, Hooks


def agent_autotune(ctx: KernelContext, request: AgentRequest, hooks: Hooks | None = None) -> LoopRun:
    """Run (or resume) the agent on one kernel; a backend that cannot run here is refused at once."""
    hooks = hooks or Hooks()
    ctx.require_spec()
    ref = usable_backend(request.backend)
    options = tune_options(ctx, trials=request.loop.trials, seconds=None, storage_url=request.storage_url)
    return run_loop(
        ctx,
        make_source(request.source),
        ref.build,
        options,
        request.loop,
        on_step=hooks.on_step,
        progress=hooks.progress,
        cancel=hooks.cancel,
    )
