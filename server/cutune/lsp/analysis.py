"""What cutune knows about one version of one document: its kernels, their contexts, results and staleness."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cutune.apply.dispatch import MARKER
from cutune.cuda.edit import NO_SHIFT, Edit, Shift
from cutune.cuda.model import Kernel, LaunchExtent, LiteralKind, SourceModel, TunableLiteral, TypeDecl
from cutune.cuda.parse import parse_source
from cutune.cuda.syntax import check_stop, stoppable
from cutune.errors import CutuneError, ParseStopped
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

    found: Kernel  # the kernel where the analysis that parsed it found it
    struct: TypeDecl | None  # its `<kernel>_tuning` struct, once templatized (where it is now)
    result: TuneResult | None
    stale: bool  # the result was measured on another source
    applied: bool  # the source holds the result's configuration already
    error: CutuneError | None  # why the kernel could not be templatized or its spec read
    shift: Shift = NO_SHIFT  # how edits above it moved it since (lsp/incremental.py)

    @property
    def name(self) -> str:
        """The kernel's name."""
        return self.found.name

    @functools.cached_property
    def kernel(self) -> Kernel:
        """The kernel where it is now (moved when first read: after an edit, most kernels are never read)."""
        return self.shift.kernel(self.found)

    def lines(self) -> tuple[int, int]:
        """The (zero-based) first and last lines of its definition, without moving the kernel."""
        span = self.found.span
        return span.start.line + self.shift.lines, span.end.line + self.shift.lines

    def body(self) -> tuple[int, int]:
        """The byte range of its `{ ... }` body, without moving the kernel."""
        body = self.found.body_span
        return body.start_byte + self.shift.bytes, body.end_byte + self.shift.bytes


@dataclass
class DocumentAnalysis:
    """One document version, analysed; kernel contexts are made on first use and kept."""

    uri: str
    path: Path
    version: int | None
    model: SourceModel
    kernels: tuple[KernelView, ...] = ()
    launches: tuple[LaunchExtent, ...] = ()
    # the names of literals whose kernel is the one kernel using them: an edit naming one may change whose it is
    owned_names: frozenset[str] = frozenset()
    # made from the analysis of another version (lsp/incremental.py): that version, the edit between them, and
    # the kernels looked at again (the others are as they were, moved)
    moved_from: tuple[int | None, Edit, frozenset[str]] | None = None
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
        return next((v for v in self.kernels if v.name == kernel), None)

    def view_at(self, line: int) -> KernelView | None:
        """The kernel whose definition, tuning struct or launch site covers a (zero-based) line."""
        for v in self.kernels:
            first, last = v.lines()
            if first <= line <= last or (
                v.struct is not None and v.struct.span.start.line <= line <= v.struct.span.end.line
            ):
                return v
        # one pass over the launches: a lookup per kernel would walk them all for each kernel
        site = next((s for s in self.launches if s.first_line <= line <= s.last_line), None)
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
    Cancelled as soon as `stop()` says the analysis is no longer wanted (asked while parsing, while the model
    is built, and between kernels)."""
    try:
        with stoppable(stop):
            model = parse_source(text, str(path))
            analysis = DocumentAnalysis(uri, path, version, model)
            structs = {t.name: t for t in model.types}
            stored = results.stored(path)
            views = []
            for k in model.kernels:
                check_stop()
                tuned = results.get(path, k.name, stored)
                views.append(kernel_view(analysis, k, structs.get(tuning_name(k.name)), tuned))
            analysis.kernels = tuple(views)
            analysis.launches = model.launch_extents
            analysis.owned_names = owned_names(model.literals)
    except ParseStopped:
        raise Cancelled(f"analysis of {uri} version {version}") from None
    return analysis


SHARED_KINDS = frozenset((LiteralKind.DEFINE, LiteralKind.CONSTEXPR, LiteralKind.VECTOR_WIDTH))


def owned_names(literals: Iterable[TunableLiteral]) -> frozenset[str]:
    """The names of the literals that belong to whichever one kernel uses them (a `#define`, a `constexpr`)."""
    return frozenset(lit.name for lit in literals if lit.kind in SHARED_KINDS and lit.name)


def kernel_view(
    analysis: DocumentAnalysis, kernel: Kernel, struct: TypeDecl | None, result: TuneResult | None
) -> KernelView:
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
