"""Code actions: templatize (a rewrite), each structural variant of the kernel (a rewrite), and quick fixes for
cutune's own diagnostics."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types

from cutune.cuda.edit import Edit as TextEdit
from cutune.cuda.edit import Overlaps
from cutune.cuda.text import Position
from cutune.errors import CutuneError
from cutune.lsp import diagnostics
from cutune.lsp.analysis import DocumentAnalysis, KernelView
from cutune.lsp.convert import document_edit, line_edits, lsp_position
from cutune.lsp.edits import Edit, apply_edit, draft_spec_edit, templatize_edit
from cutune.project import KernelContext
from cutune.template.variants import keep_variant
from cutune.workflow import variants_of

KINDS = [types.CodeActionKind.RefactorRewrite, types.CodeActionKind.QuickFix]


Offer = tuple[Edit, tuple[str, ...]]  # an edit, and the codes of the diagnostics it fixes


def kernel_offers(analysis: DocumentAnalysis, view: KernelView) -> list[Offer] | None:
    """Every edit offered for one kernel (the costly part: it templatizes the kernel and proposes its
    variants); None when the kernel cannot be templatized (its warning diagnostic says why)."""
    try:
        ctx = analysis.context(view.name)
    except CutuneError:
        return None
    offers: list[tuple[Edit | None, tuple[str, ...]]] = [
        (templatize_edit(analysis, ctx) if view.struct is None else None, (diagnostics.LITERAL,)),
        (draft_spec_edit(ctx) if view.struct is not None else None, (diagnostics.SPEC_MISSING,)),
        (_apply(analysis, view), (diagnostics.TUNED,)),
    ]
    offers += [(edit, ()) for edit in variant_edits(analysis, ctx)]
    return [(edit, codes) for edit, codes in offers if edit is not None]


def actions_for(kernel: str, offers: Sequence[Offer], params: types.CodeActionParams) -> list[types.CodeAction]:
    """A kernel's offers as the actions a request asks for: rewrites, and quick fixes of its diagnostics."""
    ours = [
        d
        for d in params.context.diagnostics
        if d.source == diagnostics.SOURCE and (d.data or {}).get("kernel") == kernel
    ]
    found = []
    for edit, codes in offers:
        fixes = [d for d in ours if d.code in codes]
        found.append(_action(edit, types.CodeActionKind.RefactorRewrite, []))
        if fixes:
            found.append(_action(edit, types.CodeActionKind.QuickFix, fixes))
    only = [_kind(k) for k in params.context.only or ()]
    return [a for a in found if not only or any(_kind(a.kind).startswith(k) for k in only)]


def _apply(analysis: DocumentAnalysis, view: KernelView) -> Edit | None:
    if view.result is None or view.stale or not view.result.significant:
        return None
    try:
        return apply_edit(analysis, analysis.context(view.name), view.result)
    except CutuneError:
        return None


def variant_edits(analysis: DocumentAnalysis, ctx: KernelContext) -> list[Edit]:
    """One rewrite per structural variant of the kernel: the file with the variant as the kernel's body and,
    where its launch differs, the launches rewritten (a variant whose launch the host cannot spell is not
    offered: the file would launch it wrong)."""
    try:
        combined = variants_of(ctx)
    except CutuneError:  # e.g. the kernel holds variants already
        return []
    edits = []
    for v in combined.variants:
        try:
            kept = keep_variant(ctx.template_model, ctx.kernel.name, v, {})
        except CutuneError:
            continue
        change = document_edit(analysis.uri, analysis.version, line_edits(analysis.model.text, kept))
        note = f": {v.provenance.note}" if v.provenance.note else ""
        params = ", ".join(p.name for p in v.params) or "no parameters"
        title = f"Rewrite {ctx.kernel.name} as variant {v.name} ({v.provenance.origin}{note}; {params})"
        edits.append(Edit(title, types.WorkspaceEdit(document_changes=[change])))
    return edits


def moved_offers(offers: Sequence[Offer], uri: str, version: int | None, edit: TextEdit) -> list[Offer]:
    """A kernel's offers after an edit that did not change it: the edits of its document moved and made for
    `version` (the editor refuses them on another). Raises Overlaps when one touches the edited text."""
    moved = []
    for offer, codes in offers:
        changes = [
            document_edit(uri, version, [_moved(e, edit) for e in c.edits])
            if isinstance(c, types.TextDocumentEdit) and c.text_document.uri == uri
            else c
            for c in offer.edit.document_changes or []
        ]
        moved.append((Edit(offer.title, types.WorkspaceEdit(document_changes=changes), offer.note), codes))
    return moved


def _moved(e: types.TextEdit | types.AnnotatedTextEdit | types.SnippetTextEdit, edit: TextEdit) -> types.TextEdit:
    if not isinstance(e, types.TextEdit) or isinstance(e, types.AnnotatedTextEdit):
        raise Overlaps(e)
    r = e.range
    start, end = edit.range(Position(r.start.line, r.start.character), Position(r.end.line, r.end.character))
    if (start.line, start.character) > (end.line, end.character):  # an insertion where the edit was
        raise Overlaps(e)
    return types.TextEdit(range=types.Range(start=lsp_position(start), end=lsp_position(end)), new_text=e.new_text)


def _kind(kind: types.CodeActionKind | str | None) -> str:
    return kind.value if isinstance(kind, types.CodeActionKind) else str(kind)


def _action(edit: Edit, kind: types.CodeActionKind, fixes: Sequence[types.Diagnostic]) -> types.CodeAction:
    return types.CodeAction(
        title=edit.title, kind=kind, diagnostics=list(fixes) or None, edit=edit.edit, is_preferred=bool(fixes) or None
    )
