"""Autotune, the use case: variants and backend chosen, the space searched on the backend, the result and
the variants stored. The CLI, the language server and the agent's front ends all tune through here."""

from __future__ import annotations

from dataclasses import dataclass, replace

from cutune.project import KernelContext, build_job, tune_options
from cutune.template.variants import Combined, Variant
from cutune.tune.parallel import BackendRef, tune_on_devices
from cutune.tune.result import TuneResult
from cutune.tune.run import tune
from cutune.workflow.backends import backend_ref, cannot_run, recording_of, unavailable
from cutune.workflow.pdl import searches_pdl, with_pdl
from cutune.workflow.request import Hooks, TuneRequest
from cutune.workflow.variants import searches_variants, store_variants, variants_of, with_combined


@dataclass(frozen=True)
class Prepared:
    """An autotune ready to run: the kernel as searched (with its variants), the backend, and the request."""

    base: KernelContext  # the kernel as opened
    context: KernelContext  # what is searched: `base` with the variants, where they are searched
    combined: Combined | None  # the variants tried (None: not searched)
    backend: BackendRef
    request: TuneRequest
    unavailable: str | None  # why the backend cannot measure on this machine (None: it can)


@dataclass(frozen=True)
class Autotuned:
    """What an autotune found, and the variants stored with its study (those of an earlier run, if it
    stored them first: a resumed study keeps its first ones)."""

    prepared: Prepared
    result: TuneResult
    variants: tuple[Variant, ...] = ()
    stored_earlier: bool = False

    @property
    def cancelled(self) -> bool:
        """Whether the run was stopped (Ctrl-C, cancel): its finished trials are kept, nothing was selected."""
        return self.result.stop == "cancelled"


def prepare(ctx: KernelContext, request: TuneRequest, *, require_device: bool = True) -> Prepared:
    """Check the spec and the backend, and try the structural variants; nothing is measured.

    With `require_device`, a backend that cannot run here is refused (NoGpuError) before the variants
    are tried; else `Prepared.unavailable` says why, for a front end that does something else instead."""
    ctx.require_spec()  # before anything else: the spec is the user's to fix
    ref = backend_ref(request.backend)
    why = unavailable(request.backend)
    if why is not None and require_device:
        raise cannot_run(why)
    searched = searches_variants(request.variants, recording_of(ref))
    combined = variants_of(ctx) if searched else None
    context = with_combined(ctx, combined) if combined is not None else ctx
    if searches_pdl(request.timing, recording_of(ref)):
        context = with_pdl(context)
    return Prepared(ctx, context, combined, ref, request, why)


def run_prepared(prepared: Prepared, hooks: Hooks | None = None) -> Autotuned:
    """Measure the original, search, select and store the result; store the variants with the study (also
    when cancelled: its finished trials are kept, and they name variants by number)."""
    hooks = hooks or Hooks()
    if prepared.unavailable is not None:
        raise cannot_run(prepared.unavailable)
    request = prepared.request
    job = build_job(prepared.context, timing=request.timing)
    options = tune_options(
        prepared.base,
        trials=request.trials,
        seconds=request.seconds,
        sampler=request.sampler,
        storage_url=request.storage_url,
        probe=request.probe,
    )
    options = replace(
        options,
        budget=replace(options.budget, search_seconds=request.search_seconds),
        sanitize=request.sanitize,
        liveness=request.liveness,
    )
    if request.devices is None:
        result = tune(job, prepared.backend.build(), options, progress=hooks.progress, cancel=hooks.cancel)
    else:
        result = tune_on_devices(
            job,
            prepared.backend,
            request.devices,
            options,
            progress=hooks.progress,
            cancel=hooks.cancel,
            notice=hooks.notice,
        )
    combined = prepared.combined
    if combined is None or not combined.variants:
        return Autotuned(prepared, result)
    earlier = store_variants(options.storage(), result.study, combined.variants)
    return Autotuned(prepared, result, earlier or tuple(combined.variants), earlier is not None)


def autotune(ctx: KernelContext, request: TuneRequest, hooks: Hooks | None = None) -> Autotuned:
    """Autotune one kernel: `prepare`, then `run_prepared`."""
    return run_prepared(prepare(ctx, request), hooks)
