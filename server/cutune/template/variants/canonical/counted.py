"""counted: a block-stride loop written as a count of strides with a bounds check inside, read as the stride loop
it is.

    for (int i = 0; i < COUNT; i++) {                for (int c = START; c < min(BOUND, COUNT * STEP); c += STEP) {
      if (i * STEP + START < BOUND) {          →       BODY   (every `i * STEP + START` written `c`)
        BODY                                         }
      }
    }

where STEP is the block size and START the thread index (written directly or through locals). Thread `t`
visits `c = t + i·STEP` for `i < COUNT`, below BOUND: exactly the indices below both BOUND and COUNT·STEP,
as the original did. Where BODY reads `i` otherwise, `i = (c - START) / STEP` is declared first.

The same count kept as the offset of a round (llama.cpp's `col0`), the element a local of the body:

    for (int c0 = 0; c0 < N; c0 += STEP) {           for (int c = START; c < N; c += STEP) {
      const int c = c0 + START;                  →     BODY
      if (c < N) BODY                                }
    }

Thread `t` visits `c = t + c0` for the rounds `c0 < N` where `c < N`: as `t ≥ 0`, exactly the indices from `t`
below N in steps of STEP. The loop reads `c0` nowhere else, nor changes N.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.loops import indented, index_form, line_indent, local_values, written_names

NAME = "counted_loops"
PREFIX = "cutune_idx"
_SHAPE = re.compile(r"\bfor\s*\([^;]*=\s*0\s*;")  # a loop counting from 0
_CHECK = re.compile(r"\bif\s*\(\s*\(?\s*\w+\s*[*<]")  # a bounds check on `i * STEP + ...` or on an element


def counted_to_stride(model: SourceModel, kernel: str) -> SourceModel | str | None:
    """The model with `kernel`'s counted block-stride loops written as stride loops; why not; None when it has none."""
    text = kernel_body(model, kernel)
    if not _SHAPE.search(text) or not _CHECK.search(text):
        return None
    src = KernelSource(model, model.kernel(kernel))
    locals_ = local_values(src)
    written = written_names(src, src.body)
    edits = EditList(src.data)
    reasons: list[str] = []
    done: list[tuple[int, int]] = []
    for loop in src.in_body("for_statement"):
        if any(a <= loop.start_byte < b for a, b in done):
            continue
        try:
            result = _rewrite(src, loop, locals_, written, f"{PREFIX}{len(done)}")
        except _Refused as e:
            reasons.append(f"the loop at line {src.line(loop)} {e}")
            continue
        if result is not None:
            edits.replace(loop.start_byte, loop.end_byte, result)
            done.append((loop.start_byte, loop.end_byte))
    if edits.edits:
        return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)
    return "; ".join(reasons) if reasons else None


class _Refused(Exception):
    """The loop has the shape, but a rewrite could change what it does (the message says why)."""


def _rewrite(src: KernelSource, loop: Node, locals_: dict[str, str], written: set[str], var: str) -> str | None:
    """The stride loop's text, or None when the loop is not of this shape; _Refused when it cannot be rewritten."""
    init, cond, update = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    body = loop.child_by_field_name("body")
    if init is None or cond is None or update is None or body is None:
        return None
    head = re.fullmatch(r"(?:int|unsigned|unsignedint|int64_t|size_t)(\w+)=0;?", "".join(src.text(init).split()))
    if head is None:
        return None
    i = head.group(1)
    count = re.fullmatch(rf"{i}<(.+)", "".join(src.text(cond).split()))
    if count is not None and re.fullmatch(rf"{i}\+=(\w+(?:\.x)?)", "".join(src.text(update).split())):
        return _offset_rounds(src, loop, i, count.group(1), locals_, written)
    if count is None or "".join(src.text(update).split()) not in (f"{i}++", f"++{i}", f"{i}+=1"):
        return None
    statements = (
        [c for c in body.named_children if c.type != "comment"] if body.type == "compound_statement" else [body]
    )
    guard = statements[0] if len(statements) == 1 else None
    condition = guard.child_by_field_name("condition") if guard is not None and guard.type == "if_statement" else None
    test = condition.named_children[0] if condition is not None and condition.named_children else None
    if guard is None or test is None or test.type != "binary_expression" or src.field(test, "operator") != "<":
        return None
    index = test.child_by_field_name("left")
    if index is None or not _block_stride(src, index, i, locals_):
        return None
    if guard.child_by_field_name("alternative") is not None:
        raise _Refused("has an else branch on its bounds check")
    bound = src.field(test, "right")
    names = set(re.findall(r"[A-Za-z_]\w*", f"{bound} {count.group(1)}"))
    if names & (written | {i}):
        raise _Refused(f"has a bound or count that changes ({sorted(names & (written | {i}))[0]})")
    inner = guard.child_by_field_name("consequence")
    if inner is None or i in written_names(src, inner):
        raise _Refused(f"changes {i} inside its body")
    product, start = _parts(src, index, i)
    terms = {index_form(src.text(product)), index_form(src.text(start))}
    edits = [(n, _without(src, n, terms, var)) for n in _sums(src, inner)]
    pieces, pos = [], inner.start_byte
    for n, new in ((n, t) for n, t in edits if t is not None):
        pieces += [src.data[pos : n.start_byte].decode(), new]
        pos = n.end_byte
    pieces.append(src.data[pos : inner.end_byte].decode())
    text = _unbraced(src, inner, "".join(pieces))
    start_text = "threadIdx.x"  # START and STEP are the builtins (or locals holding them): written as such
    step = "blockDim.x"
    lines = []
    if re.search(rf"\b{re.escape(i)}\b", text):
        lines.append(f"const int {i} = ({var} - {start_text}) / {step};")
    lines.append(text)
    header = f"for (int {var} = {start_text}; {var} < min({bound}, ({count.group(1)}) * {step}); {var} += {step}) {{"
    indent = line_indent(src.data, loop.start_byte)
    return indented("\n".join([header, *(indented(ln, "  ") for ln in lines), "}"]), indent).lstrip()


def _offset_rounds(
    src: KernelSource, loop: Node, c0: str, bound: str, locals_: dict[str, str], written: set[str]
) -> str | None:
    """The stride loop of `for (c0 = 0; c0 < N; c0 += STEP) { const int c = c0 + START; if (c < N) BODY }`, or
    None when the loop is not of this shape; _Refused when it cannot be rewritten."""
    step = "".join(src.field(loop, "update").split()).split("+=", 1)[1]
    if index_form(locals_.get(step, step)) != "blockDim.x":
        return None
    body = loop.child_by_field_name("body")
    statements = [c for c in body.named_children if c.type != "comment"] if body is not None else []
    if body is None or body.type != "compound_statement" or len(statements) != 2:
        return None
    declaration, guard = statements
    declarators = declaration.children_by_field_name("declarator") if declaration.type == "declaration" else []
    value = declarators[0].child_by_field_name("value") if len(declarators) == 1 else None
    name = declarators[0].child_by_field_name("declarator") if len(declarators) == 1 else None
    if value is None or name is None or name.type != "identifier" or guard.type != "if_statement":
        return None
    terms = sorted(index_form(locals_.get(t, t)) for t in "".join(src.text(value).split()).split("+"))
    if terms != sorted([c0, "threadIdx.x"]):
        return None
    var = src.text(name)
    condition = guard.child_by_field_name("condition")
    test = "".join(src.text(condition).split()) if condition is not None else ""
    if test not in (f"({var}<{bound})", f"({bound}>{var})"):
        return None
    if guard.child_by_field_name("alternative") is not None:
        raise _Refused("has an else branch on its bounds check")
    inner = guard.child_by_field_name("consequence")
    assert inner is not None  # an if statement always has one
    if set(re.findall(r"[A-Za-z_]\w*", bound)) & (written | {c0}) or {c0, var} & written_names(src, inner):
        raise _Refused(f"changes {c0}, {var} or its bound {bound} while it runs")
    if re.search(rf"\b{re.escape(c0)}\b", src.text(inner)):
        raise _Refused(f"reads the round's offset {c0} besides its element {var}")
    kind = src.field(declaration, "type").strip() or "int"
    text = _unbraced(src, inner, src.text(inner))
    header = f"for ({kind} {var} = threadIdx.x; {var} < {bound}; {var} += blockDim.x) {{"
    indent = line_indent(src.data, loop.start_byte)
    return indented("\n".join([header, indented(text, "  "), "}"]), indent).lstrip()


def _unbraced(src: KernelSource, inner: Node, text: str) -> str:
    """`text` (the statement `inner`, maybe rewritten) without its braces and their indentation, for a new loop."""
    if inner.type != "compound_statement":
        return text
    text = text.strip()[1:-1].strip("\n")
    margin = line_indent(src.data, inner.named_children[0].start_byte) if inner.named_children else ""
    return "\n".join(ln[len(margin) :] if ln.startswith(margin) else ln for ln in text.split("\n"))


def _sums(src: KernelSource, node: Node) -> list[Node]:
    """The outermost `+` chains under `node`, in source order."""
    found: list[Node] = []
    for n in descendants(node, "binary_expression"):
        if src.field(n, "operator") == "+" and not any(o.start_byte <= n.start_byte < o.end_byte for o in found):
            found.append(n)
    return found


def _without(src: KernelSource, chain: Node, terms: set[str], var: str) -> str | None:
    """The chain's text with its terms `i * STEP` and START written as `var`, or None when it lacks them."""
    flat: list[Node] = []

    def walk(n: Node) -> None:
        if n.type == "binary_expression" and src.field(n, "operator") == "+":
            for side in ("left", "right"):
                child = n.child_by_field_name(side)
                if child is not None:
                    walk(child)
        else:
            flat.append(n)

    walk(chain)
    matched = [t for t in flat if index_form(src.text(t)) in terms]
    if {index_form(src.text(t)) for t in matched} != terms or len(matched) != 2:
        return None
    return " + ".join([*(src.text(t) for t in flat if t not in matched), var])


def _parts(src: KernelSource, index: Node, i: str) -> tuple[Node, Node]:
    """(`i * STEP`, START) of the index `i * STEP + START` (either order)."""
    left, right = index.child_by_field_name("left"), index.child_by_field_name("right")
    assert left is not None and right is not None
    return (left, right) if re.search(rf"\b{re.escape(i)}\b", src.text(left)) else (right, left)


def _block_stride(src: KernelSource, index: Node, i: str, locals_: dict[str, str]) -> bool:
    """Whether `index` is `i * STEP + START` with STEP the block size and START the thread index."""
    if index.type != "binary_expression" or src.field(index, "operator") != "+":
        return False
    product, start = _parts(src, index, i)
    resolved = re.sub(r"[A-Za-z_]\w*", lambda m: locals_.get(m.group(0), m.group(0)), src.text(product))
    return index_form(locals_.get(src.text(start).strip(), src.text(start))) == "threadIdx.x" and index_form(
        resolved
    ) in (f"{i}*blockDim.x", f"blockDim.x*{i}")
