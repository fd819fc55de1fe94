"""The measured agent loop: propose a variant → check it → tune briefly → analyse → plan, on a GPU backend.

Each step asks its source (built-in transforms, or an LLM; an LLM failure falls back to the built-in
transforms for that step) for one variant, combines it with the variants kept so far (`with_variants`),
checks the variant's default configuration against the original in the backend (for LLM code after an
nvcc compile of that configuration; the CuPy backend runs in the isolated worker, so a faulting or
hanging variant fails only its worker), tunes the combined kernel with a small budget, and reads the
result: % of the floor per size (best configuration per size), the best configuration's registers and
spills, and its Nsight Compute counters. A variant that made the tuned kernel faster is kept, also when only
at some sizes (the dispatch launches each size's best; the kept variants are then tuned together). The loop
stops at the target % of the floor on the large sizes, at the step or time budget, or after `patience`
steps without a gain; every step is appended to the step log in the study storage, and a new run
resumes from it.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cutune.agent.errors import AgentError
from cutune.agent.record import Outcome, StepLog, StepRecord, variant_from_dict, variant_to_dict
from cutune.agent.sources import BuiltinVariants, StepContext, VariantSource
from cutune.check import check_kernel
from cutune.cuda.extract import kernel_hash
from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError
from cutune.gpu.backend import Backend, Measurement, TimingOptions
from cutune.gpu.profile import Profile, ProfileError
from cutune.gpu.replay import measuring_name
from cutune.project import KernelContext, build_job
from cutune.spec import KernelSpec
from cutune.template.model import Config, Space
from cutune.template.variants.combine import VARIANT, with_variants
from cutune.template.variants.model import Variant
from cutune.tune import ProgressFn, TuneOptions, TuneResult, tune
from cutune.tune.options import Budget
from cutune.tune.result import result_path, write_result

log = logging.getLogger(__name__)

LARGE_BYTES = 64 * 2**20  # sizes moving at least this much are where the floor is reachable
MIN_GAIN = 1.01  # a step must make the tuned kernel this much faster (geomean; per size, see _gain) to count


class MeasuredLoopStop(enum.Enum):
    """Why the measured loop ended."""

    TARGET = "target"  # the large sizes reached the target % of the floor
    DONE = "done"  # the source has no further variant
    NO_GAIN = "no_gain"  # `patience` steps in a row without a gain
    BUDGET = "budget"  # steps or seconds spent
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class LoopOptions:
    """How long the loop runs and how much each step may measure."""

    max_steps: int = 6
    seconds: float | None = None
    target_pct: float = 85.0
    patience: int = 2
    trials: int = 32  # the brief tune of each step
    large_bytes: int = LARGE_BYTES
    profile: bool = True  # read Nsight Compute counters of each step's best configuration
    arch: str = "sm_90"  # the nvcc compile check of LLM-written code

    def __post_init__(self) -> None:
        if self.max_steps < 1 or self.trials < 1 or self.patience < 1:
            raise AgentError("the agent needs at least one step, one trial per step and a patience of one")


@dataclass(frozen=True)
class LoopRun:
    """The steps of this run and earlier ones, the variants kept, the last result and why it stopped."""

    records: tuple[StepRecord, ...]
    kept: tuple[Variant, ...]
    result: TuneResult | None  # the tuned combined kernel after the last kept variant
    stop: MeasuredLoopStop
    message: str


StepFn = Callable[[StepRecord], None]
BackendFactory = Callable[[], Backend]


@dataclass
class _State:
    kept: list[Variant]
    records: list[StepRecord]
    result: TuneResult | None = None
    profile: Profile | None = None
    measurement: Measurement | None = None
    profile_note: str = "not profiled yet"


@dataclass
class _Runner:
    """How each step measures: a fresh backend per use, the brief tune's options, timing, progress and cancel."""

    backend: BackendFactory
    brief: TuneOptions
    timing: TimingOptions
    progress: ProgressFn | None
    cancel: threading.Event | None
    ends: float | None = None  # the whole loop's deadline (time.monotonic()); None: no time budget
    tunes_left: int = 1  # tunes still planned, the next one included

    def tune(
        self,
        ctx: KernelContext,
        variants: Sequence[Variant],
        *,
        only_newest: bool = False,
        start: Sequence[Config] = (),
    ) -> TuneResult:
        """The brief tune of the original with `variants` (only the original and the newest, if asked),
        measuring `start` first (completed with the defaults of parameters they lack)."""
        combined = combined_context(ctx, variants) if variants else ctx
        if only_newest and len(variants) > 1:
            combined = _only(combined, (0, len(variants)))
        job = build_job(combined, timing=self.timing)
        default = combined.space.default()
        first = [Config.of({**default, **{k: v for k, v in c.items() if k in default}}) for c in start]
        return tune(job, self.backend(), self._options(), progress=self.progress, cancel=self.cancel, start=first)

    def _options(self) -> TuneOptions:
        """The brief options, with this tune's share of what is left of the loop's time budget."""
        planned = max(self.tunes_left, 1)
        self.tunes_left = planned - 1
        if self.ends is None:
            return self.brief
        seconds = max((self.ends - time.monotonic()) / planned, 1.0)  # the last share is the rest
        return dataclasses.replace(self.brief, budget=dataclasses.replace(self.brief.budget, seconds=seconds))

    def profile(self, ctx: KernelContext, config: Config) -> tuple[Profile | None, str]:
        """`config`'s hardware counters where the backend can read them, and a line saying what was read."""
        b = self.backend()
        try:
            profile = b.profile(build_job(ctx), config)
        except ProfileError as e:
            return None, f"no profile: {e}"
        finally:
            b.close()
        if profile is None:
            return None, f"no profile: the {measuring_name(b)} backend runs no kernels to profile"
        return profile, profile.render()

    def check(self, ctx: KernelContext, config: Config) -> Measurement:
        """`config` checked against the original on every size (and timed a little) in a fresh backend."""
        quick = dataclasses.replace(self.timing, warmup=1, reps=3, min_time_ms=0.0, max_reps=3)
        b = self.backend()
        try:
            b.open(build_job(ctx, timing=quick))
            return b.evaluate(config)
        finally:
            b.close()


def run_loop(
    ctx: KernelContext,
    source: VariantSource,
    backend: BackendFactory,
    tune_options: TuneOptions,
    options: LoopOptions,
    *,
    timing: TimingOptions | None = None,
    on_step: StepFn | None = None,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> LoopRun:
    """Run (or resume) the measured loop on `ctx`'s kernel; `backend()` builds a fresh backend per use.

    The best tuned result is stored where `tune` stores the kernel's result, so the editor shows it.
    """
    spec = ctx.require_spec()
    started = time.monotonic()
    brief = dataclasses.replace(tune_options, budget=Budget(trials=options.trials))
    # the time budget covers every step: each tune gets an equal share of what is left (a step tunes at most twice)
    ends = None if options.seconds is None else started + options.seconds
    runner = _Runner(backend, brief, timing or TimingOptions(), progress, cancel, ends, 2 + 2 * options.max_steps)
    first = runner.tune(ctx, [])  # the original's measurement names the device
    steps = StepLog(tune_options.storage(), kernel=ctx.kernel.name, kernel_hash=_hash(ctx), device=first.device)
    records = steps.records()
    kept = [variant_from_dict(r.variant_data) for r in records if r.outcome is Outcome.KEPT and r.variant_data]
    state = _State(kept, records, first if not kept else runner.tune(ctx, kept))
    stop, message = MeasuredLoopStop.BUDGET, f"spent {options.max_steps} step(s)"
    for _ in range(options.max_steps):
        if (reached := _target(state.result, spec, options)) is not None:
            stop, message = MeasuredLoopStop.TARGET, reached
            break
        if cancel is not None and cancel.is_set():
            stop, message = MeasuredLoopStop.CANCELLED, "cancelled: the steps so far are kept, run again to resume"
            break
        if options.seconds is not None and time.monotonic() - started > options.seconds:
            stop, message = MeasuredLoopStop.BUDGET, f"spent {options.seconds:g} s"
            break
        if _stalled(state.records, options.patience):
            stop, message = MeasuredLoopStop.NO_GAIN, f"{options.patience} step(s) in a row without a gain"
            break
        record = _step(ctx, source, runner, options, state)
        if isinstance(record, str):
            stop, message = MeasuredLoopStop.DONE, record
            break
        steps.append(record)
        state.records.append(record)
        if on_step is not None:
            on_step(record)
    if state.result is not None and not (cancel is not None and cancel.is_set()):
        write_result(state.result, result_path(tune_options.state_dir, str(ctx.path), ctx.kernel.name))
    steps.finish(stop.value, message)
    return LoopRun(tuple(state.records), tuple(state.kept), state.result, stop, message)


def _step(
    ctx: KernelContext, source: VariantSource, runner: _Runner, options: LoopOptions, state: _State
) -> StepRecord | str:
    """One proposal, check, tune and analysis; why not, when no source proposes anything."""
    index = len(state.records)
    context = StepContext(ctx, tuple(state.kept), tuple(state.records), _analysis(state), state.profile_note, index)
    used, fallback = source, ""
    try:
        answer = source.propose(context)
    except AgentError as e:
        log.warning("%s; this step uses the built-in transforms", e)
        used, fallback = BuiltinVariants(), f"{source.name} failed, built-in transforms used: {e}"
        answer = used.propose(context)
    if answer.variant is None:
        return _join(f"the {used.name} source has no further variant: {answer.reason or 'no reason given'}", fallback)
    variant = answer.variant
    change = variant.provenance.note or f"variant {variant.name}"
    head = StepRecord(
        index, used.name, variant.name, change, answer.reason, Outcome.REJECTED, variant_data=variant_to_dict(variant)
    )

    def rejected(reason: str) -> StepRecord:
        return dataclasses.replace(head, reason=_join(fallback, reason))

    started = time.monotonic()
    try:
        combined = combined_context(ctx, [*state.kept, variant])
    except CutuneError as e:
        return rejected(f"cannot combine it with the kernel: {e}")
    config = variant_config(combined.space, len(state.kept) + 1)
    if used.name != BuiltinVariants.name:
        problem = compile_check(combined, config, options.arch)
        if problem:
            return rejected(problem)
    try:
        checked = runner.check(combined, config)
        if not checked.ok:
            reason = f"{checked.failure.value if checked.failure else 'no timing'}: {checked.detail or 'no detail'}"
            return rejected(f"its default configuration {dict(config)} failed the check: {reason}")
        result = runner.tune(ctx, [*state.kept, variant], only_newest=True)
    except CutuneError as e:  # the backend refused the job (e.g. a recording of another kernel)
        return rejected(f"it could not be measured: {e}")
    gain = state.result is None or _gain(state.result, result) > MIN_GAIN
    if gain and state.kept and state.result is not None:
        # the dispatch launches the best variant per size: one tune over every kept variant, starting from
        # both results' per-size winners, measures what it would launch
        winners = [s.best_config for r in (state.result, result) for s in r.sizes]
        try:
            result = runner.tune(ctx, [*state.kept, variant], start=winners)
        except CutuneError as e:
            return rejected(f"it could not be measured beside the kept variants: {e}")
    profile, note = runner.profile(combined, result.best) if options.profile else (None, "profiling is off")
    record = dataclasses.replace(
        head,
        outcome=Outcome.KEPT if gain else Outcome.NO_GAIN,
        reason=_join(fallback, "" if gain else "the tuned kernel is not measurably faster with it"),
        pct_of_floor=pct_of_floor(result),
        speedup=result.speedup,
        best=dict(result.best),
        profile=profile.to_dict() if profile else None,
        registers=checked.compile.registers if checked.compile else None,
        spill_bytes=checked.compile.spill_bytes if checked.compile else None,
        seconds=time.monotonic() - started,
    )
    if gain:
        state.kept.append(variant)
        state.result, state.profile, state.measurement, state.profile_note = result, profile, checked, note
    return record


def combined_context(ctx: KernelContext, variants: Sequence[Variant]) -> KernelContext:
    """`ctx` around the kernel holding the original body and `variants`, with the variant-aware spec."""
    template, spec = with_variants(ctx.template_model, ctx.kernel.name, variants, ctx.spec, base=ctx.template)
    if spec is not None and spec.space is not None:
        spec = dataclasses.replace(spec, space=None)  # the template's space replaces the spec's own
    model = parse_source(template.source, str(ctx.path), rewrite=True)
    return dataclasses.replace(ctx, template=template, template_model=model, spec=spec)


def variant_config(space: Space, k: int) -> Config:
    """The default configuration with VARIANT = k."""
    return Config.of({**space.default(), VARIANT: k})


def compile_check(ctx: KernelContext, config: Config, arch: str) -> str:
    """Why `config` of `ctx` does not compile with tune's compiler (auto: NVRTC, else nvcc) or cannot run on
    `arch`, or "" when it does."""
    pinned = Space(
        tuple(dataclasses.replace(p, values=(config[p.name],), default=config[p.name]) for p in ctx.space.params),
        ctx.space.constraints,
    )
    only = dataclasses.replace(ctx, template=dataclasses.replace(ctx.template, space=pinned))
    try:
        report = check_kernel(only, arch=arch, limit=1)
    except CutuneError as e:
        return f"compile check failed: {e}"
    row = report.rows[0] if report.rows else None
    if row is None:
        return "its default configuration breaks a constraint or a device limit"
    if row.feasible or row.problem is None:
        return ""
    return f"{row.compiler}: {row.problem}" if row.compiler else row.problem


def pct_of_floor(result: TuneResult) -> dict[str, float]:
    """Per size, the best configuration's time as % of the speed-of-light floor."""
    return {_label(s.size): 100.0 * s.sol_floor_us / s.best_timing.median_us for s in result.sizes if s.sol_floor_us}


def _only(ctx: KernelContext, values: tuple[int, ...]) -> KernelContext:
    """`ctx` with VARIANT searched over `values` only: a step's brief budget goes to the newest variant."""
    params = tuple(dataclasses.replace(p, values=values) if p.name == VARIANT else p for p in ctx.template.space.params)
    space = Space(params, ctx.template.space.constraints)
    return dataclasses.replace(ctx, template=dataclasses.replace(ctx.template, space=space))


def _analysis(state: _State) -> str:
    result = state.result
    if result is None:
        return "not measured yet"
    lines = [f"best configuration {dict(result.best)}: {result.speedup:.3f}x over the original (geomean)"]
    lines += [f"- {size}: {pct:.0f}% of the floor" for size, pct in pct_of_floor(result).items()]
    m = state.measurement
    if m is not None and m.compile is not None:
        lines.append(f"registers {m.compile.registers}, spill bytes {m.compile.spill_bytes}")
    return "\n".join(lines)


def _gain(current: TuneResult, new: TuneResult) -> float:
    """How much faster (geomean over sizes) launching, per size, the better of `current` and `new` is than
    `current`; a size takes `new` only where it is MIN_GAIN faster there, so noise alone gains nothing."""
    now = {_label(s.size): s.speedup for s in current.sizes}
    pairs = [(now[_label(s.size)], s.speedup) for s in new.sizes if _label(s.size) in now]
    if not pairs:
        return 1.0
    best = [b if b > a * MIN_GAIN else a for a, b in pairs]
    return statistics.geometric_mean(best) / statistics.geometric_mean(a for a, _ in pairs)


def _label(size: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in size.items())


def _target(result: TuneResult | None, spec: KernelSpec, options: LoopOptions) -> str | None:
    """Why the target is reached, or None: the large sizes (all sizes when none is large) at the target."""
    if result is None:
        return None
    pct = pct_of_floor(result)
    sizes = [s for s in result.sizes if s.sol_floor_us]
    if not sizes:
        return None
    large = [s for s in sizes if (spec.moved_bytes(s.size) or 0) >= options.large_bytes] or sizes
    labels = [_label(s.size) for s in large]
    worst = min(pct[label] for label in labels)
    if worst < options.target_pct:
        return None
    return f"{worst:.0f}% of the floor or better at {len(labels)} size(s) (target {options.target_pct:g}%)"


def _stalled(records: Sequence[StepRecord], patience: int) -> bool:
    tail = records[-patience:]
    return len(tail) == patience and all(r.outcome is not Outcome.KEPT for r in tail)


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _hash(ctx: KernelContext) -> str:
    try:
        return kernel_hash(ctx.template_model, ctx.kernel.name)
    except CutuneError:
        return "unhashed"
