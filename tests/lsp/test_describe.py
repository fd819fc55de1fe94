"""The words of hints agree with what templatize does."""

from __future__ import annotations

from pathlib import Path

from cutune.cuda.model import LiteralKind
from cutune.cuda.parse import parse_source
from cutune.lsp.describe import literal_message
from cutune.project import open_kernel

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "merge_attn_states.cu"
KERNEL = "merge_attn_states_kernel"


def test_a_pack_width_hint_does_not_promise_what_templatize_refuses() -> None:
    model = parse_source(SAMPLE.read_text(encoding="utf-8"), str(SAMPLE))
    widths = [lit for lit in model.literals_of(KERNEL) if lit.kind is LiteralKind.VECTOR_WIDTH]
    assert widths, "the sample loads 16-byte packs"
    template = open_kernel(SAMPLE, KERNEL).template
    assert any(r.recipe == "vector_width" for r in template.refused)  # templatize does not tune it ...
    hint = literal_message(widths[0], None)
    assert "templatize to tune" not in hint and "structural variant" in hint  # ... and the hint says so
    others = [lit for lit in model.literals_of(KERNEL) if lit.kind is not LiteralKind.VECTOR_WIDTH]
    assert all("templatize to tune" in literal_message(lit, None) for lit in others)
