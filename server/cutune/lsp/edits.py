"""The workspace edits cutune offers: templatize a kernel, draft its spec, apply a tuned configuration."""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types

from cutune.lsp.analysis import DocumentAnalysis
from cutune.lsp.convert import DocumentChange, append_to, document_edit, line_edits, new_file, path_uri
from cutune.project import KernelContext
from cutune.spec import dump_kernel_spec
from cutune.tune.result import TuneResult
from cutune.workflow import apply_result


@dataclass(frozen=True)
class Edit:
    """A workspace edit and what it does, for a code action or `workspace/applyEdit`."""

    title: str
    edit: types.WorkspaceEdit
    note: str = ""  # what the user must also do once it is applied


def spec_changes(ctx: KernelContext) -> list[DocumentChange]:
    """Create the spec file with a drafted table for the kernel, or append the table; nothing if it has one."""
    if ctx.spec is not None or ctx.spec_error is not None:
        return []
    text = dump_kernel_spec(ctx.drafted_spec(), ctx.spec_path.parent)
    uri = path_uri(ctx.spec_path)
    if ctx.spec_path.exists():
        return [append_to(uri, ctx.spec_path.read_text(encoding="utf-8"), text)]
    return new_file(uri, text)


def templatize_edit(analysis: DocumentAnalysis, ctx: KernelContext) -> Edit | None:
    """The rewrite as minimal line edits, with the drafted spec; None when there is nothing to do."""
    changes: list[DocumentChange] = []
    source = line_edits(analysis.model.text, ctx.template.source)
    if source:
        changes.append(document_edit(analysis.uri, analysis.version, source))
    changes += spec_changes(ctx)
    if not changes:
        return None
    params = ", ".join(p.name for p in ctx.template.space.params) or "no parameters"
    return Edit(f"Templatize {ctx.kernel.name} ({params})", types.WorkspaceEdit(document_changes=changes))


def draft_spec_edit(ctx: KernelContext) -> Edit | None:
    """Only the drafted spec; None when the kernel has one (or a broken one the user must fix)."""
    changes = spec_changes(ctx)
    if not changes:
        return None
    return Edit(f"Draft a tuning spec for {ctx.kernel.name}", types.WorkspaceEdit(document_changes=changes))


def apply_edit(analysis: DocumentAnalysis, ctx: KernelContext, result: TuneResult) -> Edit:
    """Write the tuned configuration into the source (templatizing the kernel too, if it is not yet)."""
    applied = apply_result(ctx, result)
    edits = line_edits(analysis.model.text, applied.text)
    change = document_edit(analysis.uri, analysis.version, edits)
    what = "per-size dispatch" if result.dispatch is not None and len(result.dispatch.configs) > 1 else "configuration"
    where = result.replayed.label() if result.replayed is not None else f"on {result.device}"
    title = f"Apply tuned {what} of {ctx.kernel.name} ({result.speedup:.2f}× {where})"
    notes = list(applied.notes)  # e.g. a size range left to the original where a variant's launch has no host spelling
    if applied.flags:  # FLAG and DEFINE parameters
        notes.append(
            f"build {ctx.kernel.name} with {' '.join(applied.flags)} too: compile flags cannot be written into "
            "the source"
        )
    return Edit(title, types.WorkspaceEdit(document_changes=[change]), "; ".join(notes))
