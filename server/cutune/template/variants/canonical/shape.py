"""The kernel's body as text, for the quick look each canonical step takes before it reads the syntax tree: a step
whose shape cannot occur in the text returns at once (on a 50,000-line file, reading the tree costs milliseconds)."""

from __future__ import annotations

from cutune.cuda.model import SourceModel


def kernel_body(model: SourceModel, kernel: str) -> str:
    """The text of `kernel`'s body, braces included."""
    span = model.kernel(kernel).body_span
    return model.text.encode("utf-8")[span.start_byte : span.end_byte].decode("utf-8", errors="replace")
