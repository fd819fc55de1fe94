"""What the editor's results view draws, as JSON: per-size times against the floor, the trial history of
the stored result's study, and the agent's steps. Data only: the editor draws it."""

from __future__ import annotations

from typing import Any

from cutune.agent.record import StepLog
from cutune.cuda.extract import kernel_hash
from cutune.errors import CutuneError
from cutune.project import KernelContext
from cutune.tune.result import SizeResult, TuneResult
from cutune.tune.study import load_study, read_record

MAX_TRIALS = 500  # the view's history; a long study's first trials say little more


def results_view(ctx: KernelContext, result: TuneResult | None, storage_url: str) -> dict[str, Any]:
    """The view's data for `ctx`'s kernel; `result` is its stored result (None: nothing measured yet)."""
    view: dict[str, Any] = {
        "kernel": ctx.kernel.name,
        "path": str(ctx.path),
        "sizes": [],
        "trials": [],
        "steps": [],
        "agent": None,
    }
    if result is None:
        view["message"] = f"no stored result for {ctx.kernel.name}: autotune it first"
        return view
    replayed = result.replayed.label() if result.replayed is not None else ""
    view.update(
        device=result.device,
        date=result.date,
        replayed=replayed,
        speedup=result.speedup,
        significant=result.significant,
        best=dict(result.best),
        sizes=[_size(s) for s in result.sizes],
    )
    view["trials"], view["trialsNote"] = _trials(storage_url, result.study)
    view["steps"], view["agent"] = _steps(ctx, storage_url, result.device)
    return view


def _size(s: SizeResult) -> dict[str, Any]:
    best = s.best_timing.median_us
    return {
        "label": " ".join(f"{k}={v}" for k, v in s.size.items()),
        "originalUs": s.original.median_us,
        "tunedUs": s.tuned.median_us,
        "bestUs": best,
        "floorUs": s.sol_floor_us,
        "pctOfFloor": 100.0 * s.sol_floor_us / best if s.sol_floor_us else None,
        "originalPctOfFloor": 100.0 * s.sol_floor_us / s.original.median_us if s.sol_floor_us else None,
        "bestConfig": dict(s.best_config),
    }


def _trials(storage_url: str, study: str) -> tuple[list[dict[str, Any]], str]:
    """Each finished trial: its number, objective (time / original time) or failure, and configuration."""
    try:
        trials = load_study(storage_url, study).get_trials(deepcopy=False)
    except CutuneError as e:
        return [], f"no trial history: {e}"
    rows = []
    for trial in trials[-MAX_TRIALS:]:
        record = read_record(trial)
        if record is None:
            continue
        rows.append(
            {
                "number": record.number,
                "objective": record.objective,
                "failure": record.failure.value if record.failure else None,
                "config": dict(record.config),
            }
        )
    return rows, ""


def _steps(ctx: KernelContext, storage_url: str, device: str) -> tuple[list[dict[str, Any]], dict[str, str] | None]:
    """The agent's recorded steps for this kernel on this device, and how its last run ended (if it ran)."""
    try:
        log = StepLog(
            storage_url,
            kernel=ctx.kernel.name,
            kernel_hash=kernel_hash(ctx.template_model, ctx.kernel.name),
            device=device,
        )
        return [r.to_dict() for r in log.records()], log.stop()
    except CutuneError:
        return [], None
