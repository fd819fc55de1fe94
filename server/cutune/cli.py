"""The command line: a thin adapter over the core (templatize, check, tune, serve)."""

from __future__ import annotations

import contextlib
import gc
import os
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.syntax import Syntax
from rich.table import Table
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from cutune.cli_render.output import OutputFormat, console, print_json, print_table, user_text
from cutune.errors import CutuneError, NoGpuError

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from rich.progress import Progress

    from cutune.agent import AgentSettings
    from cutune.project import KernelContext
    from cutune.template.model import Space, Template, TunableParam
    from cutune.template.variants import Combined
    from cutune.tune.options import Liveness
    from cutune.tune.result import TuneResult
    from cutune.tune.search import Progress as SearchProgress

T = TypeVar("T")


def _plain(params: list[Any]) -> list[Any]:
    """Parameters as help shows them usually: `FILE` for an argument, a flag without its type."""
    for param in params:
        if isinstance(param, TyperArgument) and param.metavar is None:
            param.metavar = (param.name or "").upper()
        elif isinstance(param, TyperOption) and param.is_flag:
            param.metavar = ""  # the flag says it all (typer shows its type, <bool>)
    return params


class Command(TyperCommand):
    """A command whose help reads as usual: `FILE` in the usage line, no `<bool>` beside a flag."""

    def get_params(self, ctx: Any) -> list[Any]:
        """The command's parameters (help included), shown plainly."""
        return _plain(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """The usage line's pieces, a required argument bare (typer wraps it in braces)."""
        pieces = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]


class Group(TyperGroup):
    """The command group, its help shown as its commands' is."""

    def get_params(self, ctx: Any) -> list[Any]:
        """The group's parameters (help included), shown plainly."""
        return _plain(super().get_params(ctx))


app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    help="Make existing CUDA kernels faster: templatize their choices, check and tune them on a GPU.",
)
out = console()
err = console(stderr=True)

FileArg = Annotated[Path, typer.Argument(help="A .cu/.cuh file.", show_default=False)]
KernelOpt = Annotated[str, typer.Option("--kernel", "-k", help="The __global__ kernel's name.")]
CompilerOpt = Annotated[
    str,
    typer.Option(help="auto (NVRTC, nvcc where NVRTC cannot compile, with the reason), nvrtc or nvcc."),
]
FormatOpt = Annotated[
    OutputFormat, typer.Option("--format", help="table (for people) or json (for scripts, on stdout).")
]


def _fail(e: Exception | str) -> NoReturn:
    err.print(f"[bold red]error:[/] {user_text(e)}")
    raise typer.Exit(2)


def _open_checked(file: Path, kernel: str) -> KernelContext:
    """The kernel, templatized; its spec's error raised (a command must not run on a drafted spec instead)."""
    from cutune.project import open_kernel

    ctx = open_kernel(file, kernel)
    if ctx.spec_error is not None:
        raise ctx.spec_error
    return ctx


def _progress_bar() -> Progress:
    """A progress bar on stderr on a terminal; elsewhere (a pipe, a log file) a line every PLAIN_PROGRESS_S."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    class Plain(Progress):
        """rich's bar, which draws nothing off a terminal: there, each update prints a line, at most so often."""

        last = time.monotonic()

        def update(self, task_id: TaskID, *args: Any, **kwargs: Any) -> None:
            super().update(task_id, *args, **kwargs)
            if err.is_terminal or time.monotonic() - self.last < PLAIN_PROGRESS_S:
                return
            self.last = time.monotonic()
            task = next(t for t in self.tasks if t.id == task_id)
            total = f"/{task.total:.0f}" if task.total is not None else ""
            err.print(f"{task.description}: {task.completed:.0f}{total} ({task.elapsed or 0:.0f} s)", highlight=False)

    return Plain(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=not err.is_terminal,
    )


PLAIN_PROGRESS_S = 5.0  # off a terminal, how often a long command says how far it is


@contextlib.contextmanager
def _user_errors() -> Iterator[None]:
    """Errors a user can cause (a bad file, spec or option; a folder cutune cannot write) as one clear line."""
    try:
        yield
    except CutuneError as e:
        _fail(e)
    except OSError as e:  # a read-only workspace, a full disk: name the file and the reason
        from cutune.project import STATE_DIR

        where = f" {e.filename}" if e.filename else ""
        hint = f" (cutune keeps studies and results in the workspace's {STATE_DIR}/, which must be writable)"
        _fail(f"cannot use{where}: {e.strerror or e}{hint if STATE_DIR in str(e.filename) else ''}")


@app.command(cls=Command)
def kernels(file: FileArg, output_format: FormatOpt = OutputFormat.TABLE) -> None:
    """List the kernels of a file, their launch sites and their hard-coded tunable choices."""
    from cutune.cli_render.kernels import kernels_json, render_kernels
    from cutune.cuda.parse import parse_source
    from cutune.source_file import read_source  # not cutune.project: it imports Optuna (a second)

    with _user_errors():
        path, text = read_source(file)
    model = parse_source(text, str(path))
    if output_format is OutputFormat.JSON:
        print_json(kernels_json(model))
        return
    print_table(out, render_kernels(model, str(path)))
    for issue in model.issues[:10]:
        err.print(f"[yellow]{user_text(path)}:{issue.span.start.line + 1}: {user_text(issue.message)}[/]")


@app.command(cls=Command)
def templatize(
    file: FileArg,
    kernel: KernelOpt,
    write: Annotated[bool, typer.Option("--write", "-w", help="Rewrite the file and create its spec.")] = False,
    recipes: Annotated[str | None, typer.Option(help="Comma-separated recipe names (default: all).")] = None,
) -> None:
    """Make a kernel's hidden choices explicit parameters; print (or write) the rewrite and a drafted spec."""
    from cutune.project import templatize_file

    with _user_errors():
        res = templatize_file(file, kernel, write=write, recipes=tuple(recipes.split(",")) if recipes else None)
    if res.diff:
        out.print(Syntax(res.diff, "diff", theme="ansi_dark", word_wrap=True))
    else:
        out.print("[dim]no change to the source (already templatized, or no recipe applied)[/]")
    ctx = res.context
    _templatize_summary(ctx.template, ctx.space if ctx.spec is not None else None)  # the space tune searches
    _variants_summary(ctx)
    if write:
        out.print(f"{'wrote' if res.wrote_source else 'unchanged'} {res.context.path}")
        if res.wrote_spec:
            out.print(f"wrote {res.context.spec_path} — check its sizes and argument shapes before tuning")
        else:
            out.print(f"kept the existing {res.context.spec_path}")
    elif ctx.spec is not None:  # tune uses it: a draft would only mislead
        from cutune.spec import dump_kernel_spec

        out.print(f"\n[bold]the kernel's spec[/] ({ctx.spec_path.name}, used by check and tune):")
        out.print(Syntax(dump_kernel_spec(ctx.spec, ctx.spec_path.parent), "toml", theme="ansi_dark"))
    else:
        out.print(f"\n[bold]drafted spec[/] ({ctx.spec_path.name}):")
        out.print(Syntax(res.spec_text, "toml", theme="ansi_dark"))


def _templatize_summary(tpl: Template, space: Space | None = None) -> None:
    """The parameters (of `space` when given: the spec's narrowing of the template's), and the recipes."""
    shown = space or tpl.space
    title = f"parameters of {tpl.kernel}" + (" (as the spec narrows them)" if shown is not tpl.space else "")
    table = Table(title=user_text(title))
    for col in ("name", "binding", "default", "values"):
        table.add_column(col)
    for p in shown.params:
        table.add_row(*map(user_text, (p.name, p.binding.value, p.default, ", ".join(map(str, p.values)))))
    print_table(out, table)
    for c in shown.constraints:
        out.print(f"constraint: {user_text(c)}")
    out.print(f"applied: {', '.join(tpl.applied) or 'none'}")
    for r in tpl.refused:
        out.print(f"[dim]refused {r.recipe}: {user_text(r.reason)}[/]")


def _variants_summary(ctx: KernelContext) -> None:
    """Try every structural transform on the kernel and print what they made."""
    from cutune.workflow import variants_of

    _print_variants(variants_of(ctx))


def _param_text(param: TunableParam) -> str:
    """`NAME ∈ {values}`, with the value the search tries the variant at first where that is not the default."""
    first = f", tried first at {param.try_first}" if param.try_first is not None else ""
    return f"{param.name} ∈ {{{', '.join(map(str, param.values))}}}{first}"


def _print_variants(combined: Combined) -> None:
    """The variants (name, provenance, parameters, launch), and why the other transforms refused."""
    for i, v in enumerate(combined.variants, 1):
        params = "; ".join(_param_text(p) for p in v.params) or "none"
        launch = f"; launch grid {', '.join(v.launch.grid)}, block {', '.join(v.launch.block)}" if v.launch else ""
        note = f": {v.provenance.note}" if v.provenance.note else ""
        out.print(f"[bold]variant {i}[/] {user_text(f'{v.name} ({v.provenance.origin}{note}); {params}{launch}')}")
    for r in combined.refusals:
        out.print(f"[dim]transform {r.recipe} refused: {user_text(r.reason)}[/]")


def _variant_winners(ctx: KernelContext, combined: Combined, result: TuneResult, write: bool) -> None:
    """Which variant won at each size, and the file as `cutune apply` writes it (written with `write`)."""
    from cutune.template.diff import unified_diff
    from cutune.workflow import apply_result, variant_names

    for s, name in zip(result.sizes, variant_names(result, combined.variants), strict=True):
        sol = f", {s.pct_of_sol:.0f}% of the floor" if s.pct_of_sol is not None else ""
        size = ", ".join(f"{n}={v}" for n, v in s.size.items())
        out.print(f"{size}: variant {name} {s.speedup:.2f}×{sol}", highlight=False)
    if not result.significant:
        return
    applied = apply_result(ctx, result, combined=combined)
    for note in applied.notes:
        out.print(f"[yellow]apply:[/] {user_text(note)}")
    diff = unified_diff(ctx.model.text, applied.text, ctx.path.name)
    out.print("what `cutune apply` writes, for review:")
    out.print(Syntax(diff, "diff", theme="ansi_dark", word_wrap=True))
    if write:
        ctx.path.write_text(applied.text, encoding="utf-8")
        out.print(f"wrote {ctx.path}")
    else:
        out.print("`--apply-variant` (or `cutune apply --write`) writes it into the file.")


@app.command(cls=Command)
def check(
    file: FileArg,
    kernel: KernelOpt,
    arch: Annotated[str, typer.Option(help="Target GPU architecture.")] = "sm_90",
    limit: Annotated[int, typer.Option(min=1, help="Compile at most this many configurations (a sample).")] = 64,
    jobs: Annotated[int | None, typer.Option(min=1, help="Parallel compiles (default: CPU count).")] = None,
    compiler: CompilerOpt = "auto",
    output_format: FormatOpt = OutputFormat.TABLE,
) -> None:
    """Compile every configuration (or a sample) for a target, with tune's compiler: registers, spills, occupancy.

    Exits with 1 when every configuration fails."""
    from cutune.project import open_kernel

    with _user_errors():
        ctx = open_kernel(file, kernel)
        _run_check(ctx, arch, limit=limit, jobs=jobs, output_format=output_format, compiler=compiler)


def _run_check(
    ctx: KernelContext,
    arch: str,
    *,
    limit: int,
    jobs: int | None,
    output_format: OutputFormat = OutputFormat.TABLE,
    compiler: str = "auto",
) -> None:
    """Compile with a progress bar, print the report; exit 1 when no configuration compiles and fits."""
    from cutune.check import check_kernel
    from cutune.cli_render.check import check_json, failure_summary, render_check

    with _progress_bar() as bar:
        via = {"auto": "NVRTC (nvcc where it cannot)", "nvrtc": "NVRTC"}.get(compiler, compiler)
        task = bar.add_task(f"compiling configurations of {ctx.kernel.name} for {arch} with {via}", total=None)
        report = check_kernel(
            ctx,
            arch=arch,
            limit=limit,
            jobs=jobs,
            cache_dir=_cache_dir(ctx),
            on_done=lambda done, total: bar.update(task, completed=done, total=total),
            compiler=compiler,
        )
    if report.fallback:  # on stderr: JSON on stdout stays parseable
        err.print(f"[yellow]compiled with nvcc where NVRTC could not:[/] {user_text(report.fallback)}")
    failed = failure_summary(report)
    if output_format is OutputFormat.JSON:
        print_json(check_json(report))
    else:
        print_table(out, render_check(report))
        out.print(
            "[yellow]compile-only:[/] the compiler's resource counts and the theoretical occupancy on "
            f"{arch}; nothing ran. Measured tuning needs a CUDA GPU: `cutune tune {user_text(ctx.path)} --kernel "
            f"{ctx.kernel.name}` on a machine with one."
        )
    if failed is not None:
        hint = " (no spec: write one with `cutune templatize --write`)" if report.spec_drafted else ""
        err.print(f"[bold red]{user_text(failed)}[/]{hint}")
        raise typer.Exit(1)


def _cache_dir(ctx: KernelContext) -> Path | None:
    """The workspace's compile cache, or None (compile without one) where `.cutune/` cannot be written."""
    from cutune.project import STATE_DIR, workspace_dir

    cache = workspace_dir(ctx.path) / STATE_DIR / "cache"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        probe = cache / ".write-probe"
        probe.touch()
        probe.unlink()
    except OSError as e:
        reason = user_text(e.strerror or e)
        err.print(f"[yellow]cannot write {user_text(cache)} ({reason}): compiling without the compile cache[/]")
        return None
    return cache


@app.command(cls=Command)
def tune(
    file: FileArg,
    kernel: KernelOpt,
    trials: Annotated[int, typer.Option(min=1, help="Trial budget.")] = 200,
    seconds: Annotated[
        float,
        typer.Option(
            min=0.1, help="Time budget of the whole run (search, selection, checks, held-out sizes), in seconds."
        ),
    ] = 600.0,
    search_seconds: Annotated[
        float | None, typer.Option(min=0.1, help="A time budget of the search alone, in seconds (default: none).")
    ] = None,
    sampler: Annotated[str, typer.Option(help="auto, grid, tpe or random.")] = "auto",
    probe: Annotated[
        bool,
        typer.Option(
            "--probe/--no-probe",
            help="Between the sampler's turns, try the best configuration so far one step along each parameter.",
        ),
    ] = True,
    storage: Annotated[str | None, typer.Option(help="Optuna storage URL (default: a journal in .cutune/).")] = None,
    backend: Annotated[str, typer.Option(help="cupy, or replay (recorded measurements).")] = "cupy",
    replay: Annotated[Path | None, typer.Option(help="Recording for --backend replay.")] = None,
    record: Annotated[Path | None, typer.Option(help="Append every measurement to this recording.")] = None,
    replay_pace: Annotated[float, typer.Option(min=0.0, help="Seconds each replayed measurement takes.")] = 0.0,
    isolate: Annotated[
        bool | None,
        typer.Option(
            "--isolate/--no-isolate",
            help="Measure in a worker process (default: where the backend can fault or hang, i.e. cupy).",
            show_default=False,
        ),
    ] = None,
    devices: Annotated[
        str | None, typer.Option(help="GPUs to tune on at once (0,1 or all): one worker each, one study.")
    ] = None,
    grace: Annotated[
        float, typer.Option(help="Seconds without a heartbeat after which a worker's trial is retried.")
    ] = 60.0,
    warm_l2: Annotated[bool, typer.Option("--warm-l2", help="Keep the L2 cache warm between reps.")] = False,
    timing: Annotated[
        str,
        typer.Option(
            help="events: each launch timed alone, L2 flushed; graph: CUDA graphs of back-to-back launches over "
            "rotated inputs, time per launch (as serving frameworks run decode steps)."
        ),
    ] = "events",
    compiler: CompilerOpt = "auto",
    arch: Annotated[str, typer.Option(help="Target for the compile-only fallback without a GPU.")] = "sm_90",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the result JSON here too.")] = None,
    variants: Annotated[
        bool | None,
        typer.Option(
            "--variants/--no-variants",
            help="Search the structural variants too (VARIANT); default: on, and when replaying, on where the "
            "recording's space has VARIANT.",
            show_default=False,
        ),
    ] = None,
    apply_variant: Annotated[
        bool,
        typer.Option(
            "--apply-variant", help="Write the result into the file as `cutune apply --write` does (variants included)."
        ),
    ] = False,
    sanitize: Annotated[
        bool | None,
        typer.Option(
            "--sanitize/--no-sanitize",
            help="Run compute-sanitizer (memcheck, racecheck) on the winners before reporting them "
            "(default: where compute-sanitizer is on PATH).",
            show_default=False,
        ),
    ] = None,
    output_format: FormatOpt = OutputFormat.TABLE,
) -> None:
    """Templatize, measure the original, search the space on the GPU, and report the speedup.

    Ctrl-C stops after the current trial and keeps every finished one (exit code 130)."""
    import optuna

    from cutune.gpu.backend import TimingOptions
    from cutune.project import tune_options
    from cutune.workflow import BackendChoice, Hooks, TuneRequest, prepare, run_prepared

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the progress bar says what matters
    from cutune.cli_render.tune import render_result
    from cutune.tune.parallel import parse_devices

    with _user_errors(), _human_output(output_format):
        ctx = _open_checked(file, kernel)  # before anything is printed or drafted
        # bad options fail the same way with and without a GPU, before any work
        tune_options(ctx, trials=trials, seconds=seconds, sampler=sampler, storage_url=storage)
        request = TuneRequest(
            trials=trials,
            seconds=seconds,
            sampler=sampler,
            probe=probe,
            storage_url=storage,
            variants=variants,
            backend=BackendChoice(backend, replay, replay_pace, compiler, record, isolate),
            search_seconds=search_seconds,
            timing=TimingOptions(flush_l2=not warm_l2, mode=timing),
            sanitize=sanitize,
            liveness=_liveness(grace),
            devices=parse_devices(devices, _device_count) if devices is not None else None,
        )
        prepared = prepare(ctx, request, require_device=False)
        if prepared.combined is not None:
            _print_variants(prepared.combined)
        if prepared.unavailable is not None:
            prepared.context.require_spec()  # the check below would otherwise draft one and fail every configuration
            err.print(
                f"[bold yellow]{user_text(prepared.unavailable)}.[/] Doing the useful part that needs none: "
                "templatize and a compile-only check."
            )
            _templatize_summary(prepared.context.template, prepared.context.space)
            _run_check(prepared.context, arch, limit=32, jobs=None, output_format=output_format, compiler=compiler)
            raise typer.Exit(0)
        tuned = _tune_with_progress(
            lambda progress, cancel: run_prepared(prepared, Hooks(progress, cancel, err.print)), trials
        )
        result = tuned.result
        if request.devices is not None:
            gpus = request.devices
            err.print(f"{len(gpus)} workers; the finalists were re-measured on GPU {gpus[0]} ({result.device})")
        if output_format is OutputFormat.JSON:
            print_json(result.to_dict())
        else:
            print_table(out, render_result(result))
        if tuned.variants and not tuned.cancelled:
            names = ", ".join(f"{i} = {v.name}" for i, v in enumerate(tuned.variants, 1))
            stored = "stored by an earlier run of study" if tuned.stored_earlier else "stored with study"
            out.print(f"variants {stored} {result.study}: {names}", highlight=False)
            assert prepared.combined is not None  # variants were searched
            _variant_winners(ctx, prepared.combined, result, apply_variant)
        if output is not None:
            from cutune.tune.result import write_result

            write_result(result, output)
            out.print(f"wrote {user_text(output)}")
    if result.stop == "cancelled":
        err.print(
            f"stopped (Ctrl-C) after {result.trials} measured configurations: every finished trial is kept in the "
            "study; nothing was verified or stored as a result; run the same command to resume"
        )
        raise typer.Exit(130)


@contextlib.contextmanager
def _human_output(output_format: OutputFormat) -> Iterator[None]:
    """With `--format json`, what is written for people goes to stderr: stdout holds only the JSON."""
    global out
    if output_format is not OutputFormat.JSON:
        yield
        return
    kept, out = out, err
    try:
        yield
    finally:
        out = kept


@app.command(cls=Command)
def worker(
    storage: Annotated[str, typer.Option(help="The study's storage: journal:/shared/file, or an RDB URL.")],
    study: Annotated[str | None, typer.Option(help="The study (default: the only cutune study there).")] = None,
    device: Annotated[int, typer.Option(help="The GPU to measure on.")] = 0,
    backend: Annotated[str, typer.Option(help="cupy, or replay (recorded measurements).")] = "cupy",
    replay: Annotated[Path | None, typer.Option(help="Recording for --backend replay.")] = None,
    replay_pace: Annotated[float, typer.Option(help="Seconds each replayed measurement takes.")] = 0.0,
    record: Annotated[Path | None, typer.Option(help="Append every measurement to this recording.")] = None,
) -> None:
    """Join a study that `cutune tune` started (from this host or another) and search it on one GPU."""
    import optuna

    from cutune.tune.liveness import worker_name
    from cutune.tune.parallel import join, see_only
    from cutune.workflow import BackendChoice, backend_ref

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    see_only(device)  # before CUDA starts: this process and its workers see that GPU only
    with _user_errors():
        meter = backend_ref(BackendChoice(backend, replay, replay_pace, record=record)).build()
        name = worker_name(device)
        outcome = _tune_with_progress(
            lambda progress, cancel: join(
                storage, study, meter, worker=name, queue_start=random.random(), progress=progress, cancel=cancel
            ),
            0,
        )
    mine = sum(r.measured for r in outcome.records if r.worker == name)
    out.print(
        f"{name}: measured {mine} of the study's {outcome.measured} configurations; the search ended: "
        f"{outcome.stop.value}. The run that started the study selects and reports the best.",
        highlight=False,
    )
    if outcome.stop.value == "cancelled":
        raise typer.Exit(130)


def _liveness(grace: float) -> Liveness:
    from cutune.tune.options import Liveness

    return Liveness(heartbeat_s=min(5.0, grace / 4), grace_s=grace)


def _device_count() -> int:
    """CUDA devices for `--devices all` (NoGpuError without one: replaying, name the ordinals)."""
    from cutune.gpu.device import device_count

    try:
        count = device_count()
    except NoGpuError as e:
        count, why = 0, f" ({e})"
    else:
        why = ""
    if count == 0:
        raise NoGpuError(f"--devices all found no CUDA device{why}; when replaying, name the workers' ordinals (0,1)")
    return count


def _tune_with_progress(run: Callable[[Callable[[SearchProgress], None], threading.Event], T], budget: int) -> T:
    """Run the search in a thread with a live progress bar; Ctrl-C cancels after the current trial."""
    import threading

    cancel = threading.Event()
    outcome: list[T | BaseException] = []
    with _progress_bar() as bar:
        task = bar.add_task("measuring the original…", total=budget)

        def on_progress(p: SearchProgress) -> None:
            if cancel.is_set():
                return  # the description says it is stopping
            # one measurement each: the final figures come from separate interleaved re-measurement
            best = f"search best {1 / p.best:.2f}×, unconfirmed ({p.best_config})" if p.best else "best: original"
            description = f"{p.phase} · trials · {p.failures} failed · {best}"
            bar.update(task, completed=p.done, total=p.budget, description=description)

        def work() -> None:
            try:
                outcome.append(run(on_progress, cancel))
            except BaseException as e:  # handed to the main thread
                outcome.append(e)
            finally:
                done.set()

        def interrupted() -> None:
            cancel.set()
            bar.update(task, description="stopping after the current trial (Ctrl-C)…")

        done = threading.Event()
        threading.Thread(target=work, name="cutune-tune", daemon=True).start()
        _wait(done, interrupted)
    if not outcome:
        raise CutuneError("the search ended without a result or an error; this is a bug in cutune")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _wait(done: threading.Event, interrupted: Callable[[], None]) -> None:
    """Wait until `done` is set; each Ctrl-C (a KeyboardInterrupt here, wherever it lands) calls `interrupted`.

    Not `Thread.join`: on Python 3.11 a KeyboardInterrupt inside it can mark a running thread as stopped,
    and the search's result was then looked for before it existed (`KeyError: 'result'`)."""
    while True:
        try:
            while not done.wait(0.2):
                pass
            return
        except KeyboardInterrupt:
            interrupted()


@app.command(cls=Command)
def apply(
    file: FileArg,
    kernel: KernelOpt,
    write: Annotated[bool, typer.Option("--write", "-w", help="Rewrite the file.")] = False,
) -> None:
    """Write the stored tuning result into the source: a per-size dispatch at the launch, or the tuned values."""
    from cutune.project import stored_result
    from cutune.template.diff import unified_diff
    from cutune.workflow import apply_result

    with _user_errors():
        ctx = _open_checked(file, kernel)
        result = stored_result(ctx)
        if result is None:
            _fail(f"{kernel} in {file} has no stored result: run `cutune tune {file} -k {kernel}` first")
        applied = apply_result(ctx, result)
        if write:
            ctx.path.write_text(applied.text, encoding="utf-8")
    if not write:
        diff = unified_diff(ctx.model.text, applied.text, ctx.path.name)
        out.print(Syntax(diff, "diff", theme="ansi_dark", word_wrap=True))
    for note in applied.notes:
        out.print(f"[yellow]note:[/] {user_text(note)}")
    out.print(f"{'wrote' if write else 'would write'} {ctx.path} ({result.speedup:.2f}× {result.measured_on()})")
    if applied.flags:
        out.print(f"build it with {' '.join(applied.flags)} too: compile flags cannot be written into the source")


@app.command(cls=Command)
def agent(
    file: FileArg,
    kernel: KernelOpt,
    base_url: Annotated[
        str | None, typer.Option(help="An OpenAI-compatible endpoint (key from OPENAI_API_KEY / CUTUNE_LLM_API_KEY).")
    ] = None,
    model: Annotated[str, typer.Option(help="The LLM's model name (with --base-url).")] = "",
    iterations: Annotated[int, typer.Option(min=1, help="At most this many steps.")] = 6,
    arch: Annotated[
        str, typer.Option(help="Target for nvcc checks (and the compile-only steps without a GPU).")
    ] = "sm_90",
    target: Annotated[float, typer.Option(help="Stop once the ≥ 64 MB sizes reach this % of the floor.")] = 85.0,
    trials: Annotated[int, typer.Option(help="Trials of each step's brief tune.")] = 32,
    seconds: Annotated[float | None, typer.Option(help="Time budget for all steps, in seconds.")] = None,
    storage: Annotated[str | None, typer.Option(help="Optuna storage URL (default: a journal in .cutune/).")] = None,
    profile: Annotated[bool, typer.Option(help="Read Nsight Compute counters of each step's best (needs ncu).")] = True,
) -> None:
    """The agent: propose a variant, check it, tune briefly, analyse and profile, plan (GPU); compile-only without."""
    import optuna

    from cutune.agent import AgentSettings
    from cutune.workflow import BackendChoice, unavailable

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with _user_errors():
        ctx = _open_checked(file, kernel)
        settings = AgentSettings(
            kind="openai" if base_url else "builtin",
            base_url=base_url or "",
            model=model,
            max_iterations=iterations,
            arch=arch,
        )
        from cutune.project import tune_options

        tune_options(ctx, trials=trials, seconds=seconds, storage_url=storage)  # bad options fail with or without a GPU
        why = unavailable(BackendChoice())
        if why is not None:
            err.print(f"[bold yellow]{user_text(why)}: compile-only steps (nothing is measured).[/]")
            _compile_only_agent(ctx, settings)
            return
        _measured_agent(ctx, settings, target, trials, seconds, storage, profile)


def _measured_agent(
    ctx: KernelContext,
    settings: AgentSettings,
    target: float,
    trials: int,
    seconds: float | None,
    storage: str | None,
    profile: bool,
) -> None:
    from cutune.agent.steps import LoopOptions
    from cutune.workflow import AgentRequest, Hooks, agent_autotune

    options = LoopOptions(
        max_steps=settings.max_iterations,
        seconds=seconds,
        target_pct=target,
        trials=trials,
        profile=profile,
        arch=settings.arch,
    )
    request = AgentRequest(settings, options, storage_url=storage)
    with out.status("propose → check → tune → analyse → profile → plan…"):
        run = agent_autotune(ctx, request, Hooks(on_step=lambda r: out.print(r.render(), highlight=False)))
    out.print(f"stopped: {run.stop.value} — {run.message}", highlight=False)
    out.print(f"variants kept: {', '.join(v.name for v in run.kept) or 'none'}", highlight=False)


def _compile_only_agent(ctx: KernelContext, settings: AgentSettings) -> None:
    from cutune.agent import compile_only_test, run_agent

    test = compile_only_test(ctx, arch=settings.arch, cache_dir=_cache_dir(ctx))
    with out.status("templatize → compile-only test → analyze → plan…"):
        run = run_agent(ctx, settings, test)
    for step in run.steps:
        params = ", ".join(p.name for p in step.template.space.params) or "none"
        out.print(
            f"[bold]step {step.iteration + 1}[/] ({step.planner}) compile-only: "
            f"recipes {', '.join(step.plan.recipes)}; parameters {params}",
            highlight=False,
        )
        out.print(f"  {user_text(step.plan.reason or '-')}; test: {user_text(step.outcome.summary)}")
        if step.fallback:
            out.print(f"  [yellow]the LLM's plan was not used:[/] {user_text(step.fallback)}")
    out.print(f"stopped: {run.stop.value} — {run.message}", highlight=False)
    _templatize_summary(run.template)
    _compile_only_variants(ctx, settings.arch)
    out.print("Compile-only: nothing was measured; on a GPU `cutune agent` measures, tunes and profiles each step.")


def _compile_only_variants(ctx: KernelContext, arch: str) -> None:
    """The built-in transforms' variants (what the measured agent's steps propose), each compiled at its
    default configuration."""
    from cutune.agent.steps import combined_context, compile_check, variant_config
    from cutune.workflow.variants import variants_of

    combined = variants_of(ctx)
    with out.status("compiling the structural variants…"):
        for i, v in enumerate(combined.variants, 1):
            holding = combined_context(ctx, [v])  # the kernel with the original body and this variant
            problem = compile_check(holding, variant_config(holding.space, 1), arch)
            verdict = (
                f"[red]does not compile:[/] {user_text(problem)}" if problem else "compiles (default configuration)"
            )
            out.print(f"variant {i} {user_text(v.name)} (built-in transform): {verdict}")
    for r in combined.refusals:
        out.print(f"[dim]transform {r.recipe} refused: {user_text(r.reason)}[/]")


@app.command(cls=Command)
def capture(
    command: Annotated[
        list[str] | None, typer.Argument(help="The program to run, after `--` (e.g. -- python bench.py).")
    ] = None,
    kernel: Annotated[
        list[str] | None, typer.Option("--kernel", "-k", help="Record only this kernel (repeatable).")
    ] = None,
    data: Annotated[bool, typer.Option(help="Also keep each captured problem's input buffers.")] = False,
    log: Annotated[Path | None, typer.Option(help="The capture log (default: .cutune/capture/launches.jsonl).")] = None,
    show: Annotated[Path | None, typer.Option(help="List the kernels, problems and counts of a capture log.")] = None,
    replay: Annotated[Path | None, typer.Option(help="Write the specs from a capture log; run nothing.")] = None,
    root: Annotated[Path, typer.Option(help="The workspace whose .cu files define the kernels.")] = Path(),
) -> None:
    """Run a program on the GPU, record the launches of the workspace's kernels, and write their specs."""
    from cutune.capture.log import read_log
    from cutune.capture.run import capture as run_capture
    from cutune.capture.run import specs_from_log
    from cutune.cli_render.capture import render_log, render_specs

    with _user_errors():
        if show is not None:
            print_table(out, render_log(read_log(show)))
            return
        if replay is not None:
            captured = read_log(replay)
        else:
            run = run_capture(command or [], root, kernels=kernel or (), data=data, log_path=log)
            captured = run.log
            err.print(
                f"{user_text(run.log_path)}: {len(run.log.launches)} distinct launches of the workspace's kernels"
            )
            if run.returncode != 0:
                err.print(f"[yellow]the program exited with {run.returncode}[/]: specs come from what it launched")
        outcome = specs_from_log(captured, root, kernels=kernel or ())
    for line in (*captured.errors[:5], *outcome.notes):
        err.print(f"[yellow]note:[/] {user_text(line)}")
    for k in outcome.kernels:
        for note in k.notes:
            err.print(f"[yellow]{k.kernel}:[/] {user_text(note)}")
    if outcome.kernels:
        print_table(out, render_specs(outcome))
    for e in outcome.errors:
        err.print(f"[bold red]error:[/] {user_text(e)}")
    if not outcome.kernels and not outcome.errors:
        _fail("the program launched none of the workspace's kernels (`cutune capture --show LOG` lists what it did)")
    if outcome.errors:
        raise typer.Exit(1)


@app.command(cls=Command)
def serve(
    tcp: Annotated[str | None, typer.Option(help="HOST:PORT to listen on instead of stdio (debugging).")] = None,
) -> None:
    """Start the language server (stdio by default)."""
    from cutune.lsp.server import start, tcp_address

    with _user_errors():
        start(tcp_address(tcp) if tcp is not None else None)


def main() -> None:
    """Entry point of the `cutune` script and of `python -m cutune`."""
    try:
        app()
    except KeyboardInterrupt:  # outside a command (typer turns one inside into exit code 130)
        _exit_interrupted(announce=True)
    except SystemExit as e:
        if e.code == 130:  # Ctrl-C: reported by the command itself, or by typer
            _exit_interrupted(announce=_by_interrupt(e))
        raise
    finally:
        # the run's objects are never collected again: exiting skips a last collection over them (a second
        # on a 50,000-line file)
        gc.freeze()


def _by_interrupt(error: BaseException) -> bool:
    """Whether a KeyboardInterrupt caused `error` (typer's exit code 130 carries no message of its own)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _exit_interrupted(*, announce: bool) -> NoReturn:
    """Exit with code 130 now. Not through the interpreter's exit, which joins worker threads: one inside an
    NVRTC compile (which cannot be interrupted) would hold it for seconds. What finished is on disk already."""
    if announce:
        err.print("interrupted: the work that finished is kept")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)
