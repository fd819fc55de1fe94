"""Diagnostics of an analysed document: results, tunable literals, and what the user must fix."""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from cutune.cuda.model import LiteralKind, SourceModel, TunableLiteral
from cutune.cuda.text import Position
from cutune.errors import SpecError
from cutune.lsp import describe
from cutune.lsp.analysis import DocumentAnalysis, KernelView
from cutune.lsp.convert import line_range, lsp_range, path_uri
from cutune.lsp.lenses import Window
from cutune.lsp.wire import CONVERTER, Serialized
from cutune.lsp.worker import Cancelled

SOURCE = "cutune"
TUNED = "tuned"
STALE = "stale-result"
LITERAL = "tunable-literal"
SPEC_MISSING = "spec-missing"
SPEC_INVALID = "spec-invalid"
TEMPLATIZE_FAILED = "templatize-failed"
PARSE_ERROR = "parse-error"
MAX_PARSE_ISSUES = 10  # a badly broken file needs a few pointers, not hundreds


@dataclass(frozen=True, slots=True)
class Placed:
    """A diagnostic written as JSON once, but for its range: the range moves with edits above it."""

    start: Position
    end: Position
    code: str
    rest: str  # the JSON members after `range`

    def json(self, lines: int = 0) -> str:
        """The diagnostic as JSON, `lines` lower than it was found."""
        s, e = self.start, self.end
        return (
            f'{{"range":{{"start":{{"line":{s.line + lines},"character":{s.character}}},'
            f'"end":{{"line":{e.line + lines},"character":{e.character}}}}},{self.rest}}}'
        )


def placed(diagnostic: types.Diagnostic) -> Placed:
    """A diagnostic as JSON but for its range."""
    members = CONVERTER.unstructure(diagnostic)
    r = diagnostic.range
    del members["range"]
    return Placed(
        Position(r.start.line, r.start.character),
        Position(r.end.line, r.end.character),
        str(diagnostic.code),
        json.dumps(members, separators=(",", ":"))[1:-1],
    )


@dataclass(frozen=True)
class DocumentDiagnostics:
    """The diagnostics of one analysed document: its parse issues, then each kernel's (as the analysis lists
    its kernels), kept apart so that an edit's analysis re-uses those of the kernels it did not change."""

    issues: tuple[Placed, ...]
    # each kernel's, and how many lines edits above them moved them since they were made
    kernels: tuple[tuple[tuple[Placed, ...], int], ...]

    def serialized(self, uri: str, window: Window | None = None) -> Serialized:
        """The parameters of `textDocument/publishDiagnostics`; with a `window` (lines), the tunable-literal hints
        in it only: an editor shows hints under the text, never in its list of problems, and the 20,000 of a
        200,000-line file were 5 MB that the editor decoded after every edit."""
        items = ",".join(
            p.json(lines)
            for group, lines in ((self.issues, 0), *self.kernels)
            for p in group
            if window is None or p.code != LITERAL or window[0] <= p.start.line + lines <= window[1]
        )
        return Serialized(f'{{"uri":{json.dumps(uri)},"diagnostics":[{items}]}}')


def document_diagnostics(analysis: DocumentAnalysis, stop: Callable[[], bool] = lambda: False) -> DocumentDiagnostics:
    """The diagnostics of the `.cu` document itself; raises Cancelled once `stop()` says they are not wanted."""
    issues = tuple(
        placed(
            types.Diagnostic(
                range=lsp_range(issue.span),
                message=f"{issue.message}; cutune skips this region",
                severity=types.DiagnosticSeverity.Information,
                code=PARSE_ERROR,
                source=SOURCE,
            )
        )
        for issue in analysis.model.issues[:MAX_PARSE_ISSUES]
    )
    # the file's literals found once and grouped: a lookup per kernel walks the whole file each time
    literals: dict[str | None, list[TunableLiteral]] = {}
    for lit in analysis.model.literals:
        literals.setdefault(lit.kernel, []).append(lit)
    slots = _launch_slots(analysis.model)
    found = []
    for view in analysis.kernels:
        if stop():
            raise Cancelled(f"diagnostics of {analysis.uri} version {analysis.version}")
        own = view_diagnostics(analysis, view) + literal_diagnostics(view, literals.get(view.name, ()), slots)
        found.append((tuple(placed(d) for d in own), 0))
    return DocumentDiagnostics(issues, tuple(found))


def spec_diagnostics(analysis: DocumentAnalysis) -> list[types.Diagnostic]:
    """The diagnostics of the document's spec file: its errors, at their lines."""
    return [
        _diagnostic(_spec_range(v.error), v.error.detail, types.DiagnosticSeverity.Warning, SPEC_INVALID, v.name)
        for v in analysis.kernels
        if isinstance(v.error, SpecError) and _is_file(v.error.path, analysis.spec_path)
    ]


def view_diagnostics(analysis: DocumentAnalysis, view: KernelView) -> list[types.Diagnostic]:
    """A kernel's diagnostics about itself: its result, and what keeps it from being tuned."""
    name = view.name
    at = lsp_range(view.kernel.name_span)
    found = []
    if view.result is not None:
        severity = types.DiagnosticSeverity.Information
        found.append(
            _diagnostic(
                at, describe.result_message(view.result, view.stale), severity, STALE if view.stale else TUNED, name
            )
        )
    if isinstance(view.error, SpecError):
        found.append(_spec_problem(analysis, view.error, at, name))
    elif view.error is not None:
        found.append(
            _diagnostic(
                at, f"cannot templatize {name}: {view.error}", types.DiagnosticSeverity.Warning, TEMPLATIZE_FAILED, name
            )
        )
    elif view.struct is not None and analysis.context(name).spec is None:
        message = (
            f"no tuning spec for {name} in {analysis.spec_path.name}: draft one (quick fix), then check its "
            "sizes and argument shapes"
        )
        found.append(_diagnostic(at, message, types.DiagnosticSeverity.Warning, SPEC_MISSING, name))
    return found


def literal_diagnostics(
    view: KernelView, literals: Sequence[TunableLiteral], slots: _Slots | None = None
) -> list[types.Diagnostic]:
    """The hints on a kernel's hard-coded tuning choices, until it is templatized (`slots` tells which launch
    expression a launch literal is in)."""
    if view.struct is not None:
        return []
    return [
        _diagnostic(
            lsp_range(lit.span),
            describe.literal_message(lit, slots.of(lit) if slots is not None else None),
            types.DiagnosticSeverity.Hint,
            LITERAL,
            view.name,
        )
        for lit in literals
    ]


class _Slots:
    """Which `<<<grid, block, smem, stream>>>` expression a byte is written in, by bisection over every launch's
    configuration spans."""

    def __init__(self, spans: list[tuple[int, int, int]]) -> None:
        self._spans = sorted(spans)
        self._starts = [start for start, _, _ in self._spans]

    def of(self, literal: TunableLiteral) -> int | None:
        """The slot a launch literal is written in; None elsewhere (e.g. in a `dim3 block(...)` declared before
        the launch)."""
        if literal.kind is not LiteralKind.LAUNCH_DIM:
            return None
        at = literal.span.start_byte
        i = bisect.bisect_right(self._starts, at) - 1
        if i >= 0 and at < self._spans[i][1]:
            return self._spans[i][2]
        return None


def _launch_slots(model: SourceModel) -> _Slots:
    return _Slots(list(model.launch_configs))  # byte ranges only: building every launch site cost more than the rest


def _spec_problem(analysis: DocumentAnalysis, error: SpecError, at: types.Range, kernel: str) -> types.Diagnostic:
    """The warning on the kernel, pointing at the spec's line when the spec is the problem."""
    diagnostic = _diagnostic(at, f"tuning spec: {error}", types.DiagnosticSeverity.Warning, SPEC_INVALID, kernel)
    if error.path is not None and Path(error.path).exists():
        location = types.Location(uri=path_uri(Path(error.path)), range=_spec_range(error))
        diagnostic.related_information = [types.DiagnosticRelatedInformation(location=location, message=error.detail)]
    return diagnostic


def _spec_range(error: SpecError) -> types.Range:
    return line_range(max(error.line - 1, 0) if error.line is not None else 0)  # SpecError lines count from 1


def _is_file(path: str | None, expected: Path) -> bool:
    return path is not None and Path(path).resolve() == expected.resolve()


def _diagnostic(
    at: types.Range, message: str, severity: types.DiagnosticSeverity, code: str, kernel: str
) -> types.Diagnostic:
    return types.Diagnostic(
        range=at, message=message, severity=severity, code=code, source=SOURCE, data={"kernel": kernel}
    )
