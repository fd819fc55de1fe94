"""The command line: a thin adapter over the core (templatize, check, tune, serve)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from cutune.errors import CutuneError

if TYPE_CHECKING:
    from cutune.gpu.backend import Backend, Job
    from cutune.project import KernelContext
    from cutune.template.model import Space, Template
    from cutune.tune.options import TuneOptions
    from cutune.tune.result import TuneResult
    from cutune.tune.search import Progress as SearchProgress

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    help="Make existing CUDA kernels faster: templatize their choices, check and tune them on a GPU.",
)
# wide enough for the result tables when the output is a file or a pipe (rich assumes 80 columns)
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

FileArg = Annotated[Path, typer.Argument(help="A .cu/.cuh file.", show_default=False)]
KernelOpt = Annotated[str, typer.Option("--kernel", "-k", help="The __global__ kernel's name.")]


def _fail(e: Exception) -> None:
    err.print(f"[bold red]error:[/] {e}", highlight=False)
    raise typer.Exit(2)


@app.command()
def kernels(file: FileArg) -> None:
    """List the kernels of a file, their launch sites and their hard-coded tunable choices."""
    from cutune.cuda.parse import parse_source
    from cutune.project import read_source

    try:
        path, text = read_source(file)
    except CutuneError as e:
        _fail(e)
    model = parse_source(text, str(path))
    table = Table(title=str(path))
    for col in ("kernel", "line", "template params", "launch sites", "tunable literals"):
        table.add_column(col)
    for k in model.kernels:
        lits = ", ".join(
            f"{lit.kind.value}{'(' + lit.name + ')' if lit.name else ''}={lit.value}"
            for lit in model.literals_of(k.name)
        )
        table.add_row(
            k.name + (" [yellow](parse errors)[/]" if k.has_errors else ""),
            str(k.span.start.line + 1),
            ", ".join(tp.name for tp in k.template_params) or "-",
            ", ".join(str(s.span.start.line + 1) for s in model.launches_of(k.name)) or "-",
            lits or "-",
        )
    out.print(table)
    for issue in model.issues[:10]:
        err.print(f"[yellow]{path}:{issue.span.start.line + 1}: {issue.message}[/]", highlight=False)


@app.command()
def templatize(
    file: FileArg,
    kernel: KernelOpt,
    write: Annotated[bool, typer.Option("--write", "-w", help="Rewrite the file and create its spec.")] = False,
    recipes: Annotated[str | None, typer.Option(help="Comma-separated recipe names (default: all).")] = None,
) -> None:
    """Make a kernel's hidden choices explicit parameters; print (or write) the rewrite and a drafted spec."""
    from cutune.project import templatize_file

    try:
        res = templatize_file(file, kernel, write=write, recipes=tuple(recipes.split(",")) if recipes else None)
    except CutuneError as e:
        _fail(e)
    if res.diff:
        out.print(Syntax(res.diff, "diff", theme="ansi_dark", word_wrap=True))
    else:
        out.print("[dim]no change to the source (already templatized, or no recipe applied)[/]")
    _templatize_summary(res.context.template)
    if write:
        out.print(f"{'wrote' if res.wrote_source else 'unchanged'} {res.context.path}")
        if res.wrote_spec:
            out.print(f"wrote {res.context.spec_path} — check its sizes and argument shapes before tuning")
        else:
            out.print(f"kept the existing {res.context.spec_path}")
    else:
        out.print(f"\n[bold]drafted spec[/] ({res.context.spec_path.name}):")
        out.print(Syntax(res.spec_text, "toml", theme="ansi_dark"))


def _templatize_summary(tpl: Template, space: Space | None = None) -> None:
    """The parameters (of `space` when given: the spec's narrowing of the template's), and the recipes."""
    shown = space or tpl.space
    title = f"parameters of {tpl.kernel}" + (" (as the spec narrows them)" if shown is not tpl.space else "")
    table = Table(title=title)
    for col in ("name", "binding", "default", "values"):
        table.add_column(col)
    for p in shown.params:
        table.add_row(p.name, p.binding.value, str(p.default), ", ".join(map(str, p.values)))
    out.print(table)
    for c in shown.constraints:
        out.print(f"constraint: {c}", highlight=False)
    out.print(f"applied: {', '.join(tpl.applied) or 'none'}", highlight=False)
    for r in tpl.refused:
        out.print(f"[dim]refused {r.recipe}: {r.reason}[/]", highlight=False)


@app.command()
def check(
    file: FileArg,
    kernel: KernelOpt,
    arch: Annotated[str, typer.Option(help="Target GPU architecture.")] = "sm_90",
    limit: Annotated[int, typer.Option(help="Compile at most this many configurations (a sample).")] = 64,
    jobs: Annotated[int | None, typer.Option(help="Parallel compiles (default: CPU count).")] = None,
) -> None:
    """Compile every configuration (or a sample) with nvcc for a target: registers, spills, occupancy."""
    from cutune.project import open_kernel

    try:
        _run_check(open_kernel(file, kernel), arch, limit=limit, jobs=jobs)
    except CutuneError as e:
        _fail(e)


def _run_check(ctx: KernelContext, arch: str, *, limit: int, jobs: int | None) -> None:
    from cutune.check import check_kernel, render_check
    from cutune.project import workspace_dir

    with out.status("compiling configurations with nvcc…"):
        report = check_kernel(
            ctx, arch=arch, limit=limit, jobs=jobs, cache_dir=workspace_dir(ctx.path) / ".cutune" / "cache"
        )
    out.print(render_check(report))
    out.print(
        "[yellow]compile-only:[/] the compiler's resource counts and the theoretical occupancy on "
        f"{arch}; nothing ran. Measured tuning needs a CUDA GPU: `cutune tune {ctx.path} --kernel "
        f"{ctx.kernel.name}` on a machine with one."
    )


@app.command()
def tune(
    file: FileArg,
    kernel: KernelOpt,
    trials: Annotated[int, typer.Option(help="Trial budget.")] = 200,
    seconds: Annotated[float, typer.Option(help="Time budget for the search, in seconds.")] = 600.0,
    sampler: Annotated[str, typer.Option(help="auto, grid, tpe or random.")] = "auto",
    storage: Annotated[str | None, typer.Option(help="Optuna storage URL (default: a journal in .cutune/).")] = None,
    backend: Annotated[str, typer.Option(help="cupy, or replay (recorded measurements).")] = "cupy",
    replay: Annotated[Path | None, typer.Option(help="Recording for --backend replay.")] = None,
    record: Annotated[Path | None, typer.Option(help="Append every measurement to this recording.")] = None,
    warm_l2: Annotated[bool, typer.Option("--warm-l2", help="Keep the L2 cache warm between reps.")] = False,
    arch: Annotated[str, typer.Option(help="Target for the compile-only fallback without a GPU.")] = "sm_90",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the result JSON here too.")] = None,
) -> None:
    """Templatize, measure the original, search the space on the GPU, and report the speedup."""
    import optuna

    from cutune.gpu.backend import TimingOptions
    from cutune.gpu.device import gpu_available

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the progress bar says what matters
    from cutune.gpu.registry import create_backend
    from cutune.project import build_job, open_kernel, tune_options
    from cutune.tune.report import render_result

    try:
        ctx = open_kernel(file, kernel)
        if backend == "cupy" and not gpu_available():
            err.print(
                "[bold yellow]No CUDA GPU (or CuPy) here: measured tuning needs a CUDA GPU.[/] Doing the "
                "useful part that needs none: templatize and a compile-only check."
            )
            _templatize_summary(ctx.template, ctx.space)
            _run_check(ctx, arch, limit=32, jobs=None)
            raise typer.Exit(0)
        job = build_job(ctx, timing=TimingOptions(flush_l2=not warm_l2))
        options = tune_options(ctx, trials=trials, seconds=seconds, sampler=sampler, storage_url=storage)
        if backend == "replay":
            if replay is None:
                raise CutuneError("--backend replay needs --replay FILE (a recording)")
            meter = create_backend("replay", record=record, path=replay)
        else:
            meter = create_backend(backend, record=record)
        result = _tune_with_progress(job, meter, options, trials)
    except CutuneError as e:
        _fail(e)
    out.print(render_result(result))
    if output is not None:
        from cutune.tune.result import write_result

        write_result(result, output)
        out.print(f"wrote {output}")
    if result.stop == "cancelled":
        err.print("stopped: every finished trial is kept in the study; run the same command to resume")
        raise typer.Exit(130)


def _tune_with_progress(job: Job, meter: Backend, options: TuneOptions, budget: int) -> TuneResult:
    """Run the search in a thread with a live progress bar; Ctrl-C cancels after the current trial."""
    import threading

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cutune.tune.run import tune as run_tune

    cancel = threading.Event()
    box: dict[str, object] = {}
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err
    ) as bar:
        task = bar.add_task("measuring the original…", total=budget)

        def on_progress(p: SearchProgress) -> None:
            best = f"best {1 / p.best:.2f}× ({p.best_config})" if p.best else "best: original"
            bar.update(task, completed=p.done, total=p.budget, description=f"trials · {p.failures} failed · {best}")

        def work() -> None:
            try:
                box["result"] = run_tune(job, meter, options, progress=on_progress, cancel=cancel)
            except BaseException as e:  # handed to the main thread
                box["error"] = e

        thread = threading.Thread(target=work, name="cutune-tune", daemon=True)
        thread.start()
        while thread.is_alive():
            try:
                thread.join(0.2)
            except KeyboardInterrupt:
                cancel.set()
                bar.update(task, description="stopping after the current trial (Ctrl-C)…")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]


@app.command()
def agent(
    file: FileArg,
    kernel: KernelOpt,
    base_url: Annotated[
        str | None, typer.Option(help="An OpenAI-compatible endpoint (key from OPENAI_API_KEY / CUTUNE_LLM_API_KEY).")
    ] = None,
    model: Annotated[str, typer.Option(help="The LLM's model name (with --base-url).")] = "",
    iterations: Annotated[int, typer.Option(help="At most this many templatize → test → plan rounds.")] = 3,
    arch: Annotated[str, typer.Option(help="Target for the compile-only test.")] = "sm_90",
) -> None:
    """Let the agent propose templates (built-in rules, or an LLM) and test each by compiling it."""
    from cutune.agent import AgentSettings, compile_only_test, run_agent
    from cutune.project import open_kernel, workspace_dir

    try:
        ctx = open_kernel(file, kernel)
        settings = AgentSettings(
            kind="openai" if base_url else "builtin",
            base_url=base_url or "",
            model=model,
            max_iterations=iterations,
            arch=arch,
        )
        test = compile_only_test(ctx, arch=arch, cache_dir=workspace_dir(ctx.path) / ".cutune" / "cache")
        with out.status("templatize → compile-only test → analyze → plan…"):
            run = run_agent(ctx, settings, test)
    except CutuneError as e:
        _fail(e)
    for step in run.steps:
        params = ", ".join(p.name for p in step.template.space.params) or "none"
        out.print(
            f"[bold]step {step.iteration + 1}[/] ({step.planner}): recipes {', '.join(step.plan.recipes)}; "
            f"parameters {params}",
            highlight=False,
        )
        out.print(f"  {step.plan.reason or '-'}; test: {step.outcome.summary}", highlight=False)
        if step.fallback:
            out.print(f"  [yellow]the LLM's plan was not used:[/] {step.fallback}", highlight=False)
    out.print(f"stopped: {run.stop.value} — {run.message}", highlight=False)
    _templatize_summary(run.template)
    out.print("The agent proposes templates; `cutune tune` picks the numbers on a GPU.")


@app.command()
def serve(
    tcp: Annotated[str | None, typer.Option(help="HOST:PORT to listen on instead of stdio (debugging).")] = None,
) -> None:
    """Start the language server (stdio by default)."""
    from cutune.lsp.server import start

    start(tcp)


def main() -> None:
    """Entry point for `python -m cutune`."""
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
