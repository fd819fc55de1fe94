"""What cutune knows about one version of one document: its kernels, their contexts, results and staleness."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cutune.apply.dispatch import MARKER
from cutune.cuda.model import Kernel, SourceModel, TypeDecl
from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError
from cutune.lsp.results import ResultStore
from cutune.lsp.worker import Cancelled
from cutune.project import KernelContext, open_kernel
from cutune.spec import spec_path_for
from cutune.template.tuning import tuning_name
from cutune.tune.result import TuneResult
from cutune.workflow import result_is_current


@dataclass(frozen=True)
class KernelView:
    """One kernel as the editor shows it."""

    kernel: Kernel
    struct: TypeDecl | None  # its `<kernel>_tuning` struct, once templatized
    result: TuneResult | None
    stale: bool  # the result was measured on another source
    applied: bool  # the source holds the result's configuration already
    error: CutuneError | None  # why the kernel could not be templatized or its spec read


@dataclass
class DocumentAnalysis:
    """One document version, analysed; kernel contexts are made on first use and kept."""

    uri: str
    path: Path
    version: int | None
    model: SourceModel
    kernels: tuple[KernelView, ...] = ()
    _contexts: dict[str, KernelContext | CutuneError] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def context(self, kernel: str) -> KernelContext:
        """The kernel templatized in memory with its spec; raises CutuneError when that fails."""
        with self._lock:
            found = self._contexts.get(kernel)
        if found is None:
            try:
                found = open_kernel(self.path, kernel, text=self.model.text)
            except CutuneError as e:
                found = e
            with self._lock:
                self._contexts[kernel] = found
        if isinstance(found, CutuneError):
            raise found
        return found

    def view(self, kernel: str) -> KernelView | None:
        """The view of a kernel by name."""
        return next((v for v in self.kernels if v.kernel.name == kernel), None)

    def view_at(self, line: int) -> KernelView | None:
        """The kernel whose definition, tuning struct or launch site covers a (zero-based) line."""
        for v in self.kernels:
            spans = [v.kernel.span] if v.struct is None else [v.kernel.span, v.struct.span]
            if any(s.start.line <= line <= s.end.line for s in spans):
                return v
        # one pass over the launches: a lookup per kernel would walk them all for each kernel
        site = next((s for s in self.model.launches if s.span.start.line <= line <= s.span.end.line), None)
        return self.view(site.kernel) if site is not None else None

    @property
    def spec_path(self) -> Path:
        """The spec file beside the source."""
        return spec_path_for(self.path)


def _never() -> bool:
    return False


def analyze(
    uri: str, path: Path, text: str, version: int | None, results: ResultStore, stop: Callable[[], bool] = _never
) -> DocumentAnalysis:
    """Parse a document and look at each kernel; templatizes in memory only the kernels that need it. Raises
    Cancelled as soon as `stop()` says the analysis is no longer wanted (checked between kernels)."""
    model = parse_source(text, str(path))
    analysis = DocumentAnalysis(uri, path, version, model)
    structs = {t.name: t for t in model.types}
    stored = results.stored(path)
    views = []
    for k in model.kernels:
        if stop():
            raise Cancelled(f"analysis of {uri} version {version}")
        views.append(_view(analysis, k, structs.get(tuning_name(k.name)), results.get(path, k.name, stored)))
    analysis.kernels = tuple(views)
    return analysis


def _view(analysis: DocumentAnalysis, kernel: Kernel, struct: TypeDecl | None, result: TuneResult | None) -> KernelView:
    """A kernel's view; templatized kernels get their spec checked and tuned ones their staleness."""
    if struct is None and result is None:
        return KernelView(kernel, struct, result, stale=False, applied=False, error=None)
    try:
        ctx = analysis.context(kernel.name)
    except CutuneError as e:
        return KernelView(kernel, struct, result, stale=result is not None, applied=False, error=e)
    stale = result is not None and not result_is_current(ctx, result)
    applied = result is not None and _holds(ctx, result)
    return KernelView(kernel, struct, result, stale, applied, ctx.spec_error)


def _holds(ctx: KernelContext, result: TuneResult) -> bool:
    """Whether the source's current values (the template's defaults) are the result's best configuration."""
    current = ctx.template.space.default()
    if result.dispatch is not None and len(result.dispatch.configs) > 1:  # written at the launch instead
        return f"{MARKER} {ctx.kernel.name}," in ctx.model.text
    return all(current.get(name) == value for name, value in result.best.items())
