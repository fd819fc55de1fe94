"""group_items: a one-element-per-thread kernel whose threads reduce over aligned groups of G lanes by warp
butterflies (a quantiser's absolute maximum and sum over 32 values, then a scale, each lane its own int8, the
group's first lane its statistics) gives each thread GROUP_ITEMS consecutive elements, so a group is reduced over
G / GROUP_ITEMS lanes, each thread first combining its own, and the grid's x extent shrinks by GROUP_ITEMS.

Each thread plays the original threads `t * GROUP_ITEMS + p` (p < GROUP_ITEMS): the global index
`i = blockIdx.x * blockDim.x + threadIdx.x` becomes `(…) * GROUP_ITEMS + p`. The statements before the reductions
run for every p and keep the values to reduce; the reductions run over the thread's values and its group's lanes;
then, for every p, the reduced values are those of original lane p and the statements after run as written (a
`return` of the original thread is a `continue` of its p), with the locals they read from before either kept per p
(GROUP_KEEP 1, where they are scalars or pointers) or computed again by the statements before (GROUP_KEEP 0: those
only compute locals, so they give the same values). Inside a recipe's loop over block-chunks, each chunk is the
body. The lanes of an original group of G are the G / GROUP_ITEMS aligned lanes that play them, so the butterfly's
steps at offsets G/2 … GROUP_ITEMS become shuffles at offsets divided by GROUP_ITEMS and those below are exchanges
among a thread's own values: every original lane's value is reproduced in the butterfly's order, bit for bit. Where
any order gives the same bits (extrema, integer sums) the thread first combines its values and shuffles once per
step; a float sum keeps the order, shuffling each of its values.

Which G / GROUP_ITEMS original lanes a thread plays is a parameter too, GROUP_STRIDED (offered where a reduction
keeps its order): at 0, lanes `t * GROUP_ITEMS + p`, as above; at 1, lanes `t + p * G / GROUP_ITEMS` of its group,
so the butterfly's first steps (offsets G/2 … G/GROUP_ITEMS) pair a thread's own values and the later ones whole
threads. The order is the original's either way, but at 1 a thread's values are all equal once its own steps are
done (each step's combine is commutative: a sum), so each later step is one shuffle, not GROUP_ITEMS: a quantiser's
float sum over 32 lanes at 4 elements a thread takes 3 shuffles instead of 12, bit for bit the original's total.

Refused, with the reason, where that does not hold: no global thread index over x, no butterfly over a warp's
aligned groups (a full mask, offsets halving from a power of two), the index or thread and block builtins read
elsewhere, other exchanges between lanes (shuffles, votes, helpers that do them), threads of a block cooperating
(shared memory, barriers), the statements before the reductions writing anything but locals, a `return` inside a
loop or switch, work between the reductions, no `if (i >= n) return;` right after the index. The launch keeps the
block (whole warps: its constraint) and divides the grid's x extent by GROUP_ITEMS, rounding up: the original
threads played past the original grid meet that bound (a floor division lost the last block's elements at a
ragged size, found by the checks on the GPU).
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from dataclasses import dataclass
from typing import NoReturn

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.syntax import declarator_name, nested_scope
from cutune.errors import TransformRefused
from cutune.spec import KernelSpec
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.recipes.index_bits import HELPER as INDEX_TYPE
from cutune.template.variants.block_items import _BLOCK_WIDE, _WARP_WIDE, _called_helpers
from cutune.template.variants.butterfly import (
    OWN,
    PARTNER,
    REDUCE_CALL,
    Butterfly,
    helper_butterfly,
    read_butterfly,
    texts_names,
)
from cutune.template.variants.canonical.guard import _chunk as guard_chunk
from cutune.template.variants.canonical.guard import _thread_index as guard_thread_index
from cutune.template.variants.loops import kernel_source, line_indent, squeezed
from cutune.template.variants.model import Launch, Provenance, Transform, Variant

NAME = "group_items"
ITEMS = "GROUP_ITEMS"
KEEP = "GROUP_KEEP"  # 1: the locals the statements after the reductions read kept per element; 0: computed again
STRIDED = "GROUP_STRIDED"  # 1: a thread plays lanes G / GROUP_ITEMS apart; 0: GROUP_ITEMS consecutive ones
ITEM = "cutune_p"  # which of its GROUP_ITEMS original threads a thread plays
PREFIX = "cutune_g"  # the variant's own names
_VALUES = (1, 2, 4, 8)
_BUILTINS = re.compile(r"(threadIdx|blockIdx|blockDim|gridDim)\s*\.\s*x")
_LANES = re.compile(r"__shfl|__ballot|__syncwarp|__any|__all|__reduce_|__match|threadIdx|blockIdx|laneid")
# names of helpers defined elsewhere that may exchange values between a warp's or block's threads
_COLLECTIVE = re.compile(r"reduce|sync|shfl|ballot|warp|block|barrier|cooperative", re.IGNORECASE)
_WRITES_MEMORY = re.compile(r"\b(?:atomic\w*|printf|__st\w*|asm)\s*\(")


@dataclass(frozen=True)
class _Reduction:
    statement: Node
    butterfly: Butterfly  # over the kernel's variable (its `var` is the kernel's name)
    var_type: str
    helper: str  # the helper called, "" for a loop in the kernel


class GroupItems(Transform):
    """GROUP_ITEMS consecutive elements per thread of a kernel reducing groups of lanes by warp butterflies."""

    name = NAME
    chains_onto = False  # the chained bodies (split over blocks) have no top-level thread index

    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        """The variant of `kernel` with GROUP_ITEMS elements per thread, or TransformRefused saying why not."""
        src = kernel_source(self.name, model, kernel)
        body_text = src.text(src.body)
        if "shfl" not in body_text and not REDUCE_CALL.search(body_text):
            self.refuse("no warp reduction (a `__shfl_xor_sync` butterfly, or a call of a helper that is one)")
        statements = _statements(src.body)
        lone = [s for s in statements if s.type != "preproc_call"]
        # a recipe's chunks (`for (u = 0; u < K; ++u)` over blocks' worth of threads): each chunk is the body
        chunk = guard_chunk(src, lone[0]) if len(lone) == 1 else None
        scope = chunk[0] if chunk is not None else src.body
        statements = _statements(scope)
        for s in statements:
            if s.type.startswith("preproc") and not src.text(s).lstrip("# \t").startswith("pragma"):
                self.refuse(f"a preprocessor directive at line {src.line(s)} splits the body")
        index = next((s for s in statements if _index(src, s, chunk) is not None), None)
        if index is None:
            self.refuse("no global thread index over x (`i = blockIdx.x * blockDim.x + threadIdx.x`) in the body")
        value = _index(src, index, chunk)
        assert value is not None  # `index` was found by it
        if chunk is not None:
            self._check_chunk(src, chunk[0])
        found = self._reductions(src, statements, spec)
        at = [statements.index(r.statement) for r in found]
        between = [s for s in statements[at[0] : at[-1] + 1] if s.type != "preproc_call" and s not in _nodes(found)]
        if between:
            self.refuse(f"work between the reductions (line {src.line(between[0])})")
        if statements.index(index) > at[0]:
            self.refuse("the thread index is computed after the reduction")
        prologue, epilogue = statements[: at[0]], statements[at[-1] + 1 :]
        if prologue and prologue[-1].type == "preproc_call":
            prologue = prologue[:-1]  # the reduction's own `#pragma unroll`
        self._check_body(src, index, value, found)
        self._check_prologue(src, prologue, index)
        self._check_guard(src, prologue, index)
        locals_ = {r.butterfly.var: r for r in found}
        for r in found:
            if _declaration_of(src, prologue, r.butterfly.var) is None:
                self.refuse(f"reduces `{r.butterfly.var}`, which is not a local declared before the reduction")
        group = min(r.butterfly.group for r in found)
        values = tuple(v for v in _VALUES if v <= group)
        # lanes G / GROUP_ITEMS apart pay only where an order is kept, and need one group size to be apart by
        strided = len({r.butterfly.group for r in found}) == 1 and any(_ordered(r) for r in found)
        played = f"({src.text(value)}) * {ITEMS} + {ITEM}"  # the original thread a thread plays as its ITEM-th
        if strided:
            apart = f"({group} / {ITEMS})"
            spread = f"({src.text(value)}) / {apart} * {group} + ({src.text(value)}) % {apart} + {ITEM} * {apart}"
            played = f"({STRIDED} ? {spread} : {played})"
        replacements = [(value.start_byte, value.end_byte, played)]
        replacements += [(n.start_byte, n.end_byte, "continue;") for n in src.in_body("return_statement")]
        before = _region(src, prologue, replacements)
        after = _region(src, epilogue, replacements)
        arrays = [f"{PREFIX}{k}" for k in range(len(found))]
        header = [
            f"// cutune {NAME}: {ITEMS} consecutive elements per thread (it plays the original threads "
            f"t * {ITEMS} + {ITEM}),",
            f"// their values combined before the groups' shuffles over {group} / {ITEMS} lanes",
        ]
        if strided:
            header.append(
                f"// (at {STRIDED} 1 the lanes t + {ITEM} * {group} / {ITEMS} of its group: its own values paired "
                "first)"
            )
        recomputed = _phases(src, prologue, found, arrays, before, after, None, strided)
        carried = _carried(src, prologue, epilogue, set(locals_))
        # 4: the GROUP_ITEMS the searches of llama.cpp's quantize_q8_1 kept most often (runs 32-96)
        first = 4 if 4 in values else None
        params = [
            TunableParam(
                ITEMS, values, 1, Binding.TEMPLATE, description="consecutive elements per thread", try_first=first
            )
        ]
        if strided:
            params.append(
                TunableParam(
                    STRIDED,
                    (0, 1),
                    0,
                    Binding.TEMPLATE,
                    description="1: a thread plays lanes G / GROUP_ITEMS apart (one shuffle a step); 0: consecutive",
                )
            )
        if carried is None:
            lines = [*header, *recomputed]
        else:  # keeping the locals per element or computing them again: the compiler's code differs, the GPU decides
            kept = _phases(src, prologue, found, arrays, before, after, carried, strided)
            lines = [
                *header,
                f"if constexpr ({KEEP}) {{",
                textwrap.indent("\n".join(kept), "  "),
                "} else {",
                textwrap.indent("\n".join(recomputed), "  "),
                "}",
            ]
            params.append(
                TunableParam(
                    KEEP, (0, 1), 0, Binding.TEMPLATE, description="1: locals kept per element; 0: computed again"
                )
            )
        indent = line_indent(src.data, statements[0].start_byte)
        closing = line_indent(src.data, scope.end_byte - 1) if chunk is not None else ""
        head = src.data[src.body.start_byte + 1 : scope.start_byte + 1].decode("utf-8")
        tail = src.data[scope.end_byte - 1 : src.body.end_byte - 1].decode("utf-8")
        inner = head + "\n" + textwrap.indent("\n".join(lines), indent) + "\n" + closing + tail
        constraints: tuple[str, ...] = ()
        if spec is not None:
            constraints = (f"({spec.block[0]}) % 32 == 0",)
        kinds = ", ".join(
            f"{r.helper or 'a butterfly'} of {r.butterfly.var}"
            + ("" if r.butterfly.exact else " (in the original's order)")
            for r in found
        )
        return Variant(
            name=NAME,
            body=inner,
            params=tuple(params),
            constraints=constraints,
            launch=Launch(
                grid=(f"ceil_div({{grid}}, {ITEMS})", "{grid}", "{grid}"),
                block=("{block}", "{block}", "{block}"),
                shared_mem="{shared_mem}",
            ),
            provenance=Provenance(
                self.name,
                note=f"{ITEMS} elements per thread over groups of {group} lanes: {kinds} (line {src.line(index)})",
            ),
        )

    def _check_guard(self, src: KernelSource, prologue: list[Node], index: Node) -> None:
        """The index must be bounded first thing after it is computed (`if (i >= n) return;`, `continue` in a
        recipe's chunk): the grid rounds up
        to whole GROUP_ITEMS, and the original threads played past the original grid are sent away by it (they
        are past n wherever the original's launch covers its work; where it does not, its outputs differ from
        the variant's and the checks say so)."""
        declared = index.child_by_field_name("declarator")  # `T i = …;` (the index's form: `_index`)
        name = src.text(declared.child_by_field_name("declarator") or declared) if declared is not None else ""
        after = prologue[prologue.index(index) + 1 :] if index in prologue else []
        guard = re.compile(rf"if\s*\(\s*{re.escape(name)}\s*>=\s*[^;{{}}]+\)\s*\{{?\s*(?:return|continue)\s*;\s*\}}?")
        if not name or not after or not guard.fullmatch(src.text(after[0])):
            self.refuse(
                "no bound on the thread index right after it (`if (i >= n) return;`): a grid rounded up to whole "
                f"{ITEMS} would run threads the original never had"
            )

    def refuse(self, reason: str) -> NoReturn:
        """Stop: the kernel cannot take several elements per thread, for `reason`."""
        raise TransformRefused(self.name, reason)

    def _reductions(self, src: KernelSource, statements: list[Node], spec: KernelSpec | None) -> list[_Reduction]:
        """The top-level statements that are warp butterflies, in order."""
        include_dirs = spec.include_dirs if spec is not None else ()
        names: dict[str, int] | None = None
        found: list[_Reduction] = []
        for s in statements:
            text, helper = src.text(s), ""
            loop = _lone_loop(s)
            if loop is not None and "shfl" in text:
                text = src.text(loop)
                var = _updated(text) or ""
                var_type = _type_of(src, statements, var)
                if var_type is None:
                    self.refuse(f"the shuffle loop at line {src.line(s)} does not reduce a plain local of the kernel")
                names = names if names is not None else texts_names(src.model, include_dirs)
                read = read_butterfly(text, names, var_type)
            elif s.type == "expression_statement" and (call := REDUCE_CALL.fullmatch(text.strip())) is not None:
                var, helper = call.group("x"), call.group("f")
                var_type = _type_of(src, statements, var)
                if var_type is None:
                    continue
                read = helper_butterfly(src.model, helper, call.group("w"), var_type, include_dirs)
            else:
                continue
            if isinstance(read, str):
                self.refuse(f"the reduction at line {src.line(s)}{f' ({helper})' if helper else ''}: {read}")
            if read is not None:
                found.append(_Reduction(s, dataclasses.replace(read, var=var), var_type, helper))
        if not found:
            self.refuse(
                "no warp reduction at the body's top level (a `__shfl_xor_sync` butterfly loop, or `x = f(x);` of a "
                "helper that is one; one inside a branch or loop, or lone shuffle steps, are not read)"
            )
        if len({r.butterfly.var for r in found}) != len(found):
            self.refuse("reduces one variable twice")
        return found

    def _check_body(self, src: KernelSource, index: Node, value: Node, found: list[_Reduction]) -> None:
        """Refuse what would see the change of threads: builtins read beside the index, other lane exchanges, block
        cooperation, returns from nested statements, names of the variant's own."""
        inside = [(r.statement.start_byte, r.statement.end_byte) for r in found]
        for node in src.in_body("field_expression"):
            if (
                _BUILTINS.fullmatch(squeezed(src.text(node)))
                and not value.start_byte <= node.start_byte < value.end_byte
            ):
                self.refuse(f"reads {squeezed(src.text(node))} beside the thread index (line {src.line(node)})")
        for node in src.in_body("identifier", "namespace_identifier", "type_qualifier", "type_identifier"):
            text = src.text(node)
            if any(a <= node.start_byte < b for a, b in inside):
                continue
            if _WARP_WIDE.fullmatch(text):
                self.refuse(
                    f"exchanges values between lanes through {text} beside the reductions (line {src.line(node)})"
                )
            if _BLOCK_WIDE.fullmatch(text) or text == "__shared__":
                self.refuse(f"threads of a block cooperate through {text} (line {src.line(node)})")
            if text in ("threadIdx", "blockIdx") and (node.parent is None or node.parent.type != "field_expression"):
                self.refuse(f"reads {text} whole (line {src.line(node)})")
            if text.startswith(PREFIX) or text == ITEM:
                self.refuse(f"already names something {text} (line {src.line(node)})")
        if "__shared__" in src.text(src.body):
            self.refuse("declares shared memory: a block would hold the threads of several original blocks")
        helpers = {r.helper for r in found}
        defined = dict(_called_helpers(src))
        for called, text in defined.items():
            if called not in helpers and _LANES.search(text):
                self.refuse(f"calls {called}, which exchanges values between lanes or reads the thread's place")
        for call in src.in_body("call_expression"):
            callee = src.text(call).split("(", 1)[0].split("<", 1)[0].split("::")[-1].strip()
            if any(a <= call.start_byte < b for a, b in inside):
                continue
            if callee not in helpers and callee not in defined and _COLLECTIVE.search(callee):
                self.refuse(
                    f"calls {callee} (line {src.line(call)}), not found here: it may exchange values between lanes"
                )
        if re.search(r"\basm\b", src.text(src.body)):
            self.refuse("inline PTX, which the rewrite cannot follow")
        if src.in_body("lambda_expression", "goto_statement"):
            self.refuse("a lambda or goto, which the rewrite does not follow")
        name = declarator_name(index.children_by_field_name("declarator")[0].child_by_field_name("declarator"))
        if name is None or name.type != "identifier":
            self.refuse("the thread index is not a plain local")
        var = src.text(name)
        for n in src.in_body("assignment_expression", "update_expression"):
            target = n.child_by_field_name("left" if n.type == "assignment_expression" else "argument")
            if target is not None and src.text(target) == var:
                self.refuse(f"writes the thread index {var} (line {src.line(n)})")
        for ret in src.in_body("return_statement"):
            if nested_scope(ret, src.body) is not None:  # a lambda is refused before: a loop or switch
                self.refuse(f"returns from inside a loop or switch (line {src.line(ret)})")

    def _check_chunk(self, src: KernelSource, scope: Node) -> None:
        """Refuse a `break` of the chunk loop: inside the loop over a thread's elements it would end that one."""
        for n in descendants(scope, "break_statement"):
            if nested_scope(n) == scope.parent:
                self.refuse(f"leaves the loop over its chunks with `break` (line {src.line(n)})")

    def _check_prologue(self, src: KernelSource, prologue: list[Node], index: Node) -> None:
        """Refuse statements before the reductions that write anything but plain locals (they run twice)."""
        plain = {
            src.text(n)
            for s in prologue
            for d in descendants(s, "init_declarator", "declaration")
            if (n := d.child_by_field_name("declarator")) is not None and n.type == "identifier"
        }
        for s in prologue:
            if _WRITES_MEMORY.search(src.text(s)):
                self.refuse(f"the statement at line {src.line(s)} writes memory before the reduction")
            for n in descendants(s, "assignment_expression", "update_expression"):
                target = n.child_by_field_name("left" if n.type == "assignment_expression" else "argument")
                if target is None or target.type != "identifier" or src.text(target) not in plain:
                    self.refuse(
                        f"writes `{src.text(target) if target is not None else '?'}` before the reduction "
                        f"(line {src.line(n)}): that part runs twice, and may only compute locals"
                    )


@dataclass(frozen=True)
class _Carried:
    """A local of the part before the reductions that the rest reads, kept per element between them."""

    name: str
    array_type: str  # the element type of the array keeping it
    restore: str  # its declaration again, its value `@value@`


# the types a local may be kept in an array of: arithmetic scalars (index_bits' integer of either width among them),
# and pointers to anything
_SCALAR = re.compile(
    r"(?:(?:unsigned|signed|short|long|int|char|float|double|bool|size_t|u?int(?:8|16|32|64)_t|half|__half"
    rf"|__nv_bfloat16|nv_bfloat16)\s*)+|{INDEX_TYPE}\s*<[\w\s,]*>"
)


def _carried(src: KernelSource, prologue: list[Node], epilogue: list[Node], reduced: set[str]) -> list[_Carried] | None:
    """The locals the statements before the reductions declare and those after read, each as it can be kept per
    element; None where one cannot (a reference, an array, a class type, a static or constexpr local)."""
    read = {src.text(n) for s in epilogue for n in descendants(s, "identifier")}
    carried: list[_Carried] = []
    for s in prologue:
        if s.type != "declaration":
            continue
        declarators = s.children_by_field_name("declarator")
        for d in declarators:
            target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            name = declarator_name(target)
            if name is None or src.text(name) not in read or src.text(name) in reduced:
                continue
            if any(c.type == "storage_class_specifier" for c in s.children) or "constexpr" in src.text(s).split():
                return None
            specifiers = src.data[s.start_byte : declarators[0].start_byte].decode("utf-8").strip()
            assert target is not None
            if target.type == "identifier":
                element = re.sub(r"\b(?:const|volatile)\b", "", specifiers).strip()
                if not _SCALAR.fullmatch(element):
                    return None
            elif target.type == "pointer_declarator" and target.child_by_field_name("declarator") == name:
                if any(c.type == "type_qualifier" for c in target.children):
                    return None
                element = f"{specifiers} *"
            else:
                return None
            carried.append(_Carried(src.text(name), element, f"{specifiers} {src.text(target)} = @value@;"))
    return carried


def _phases(
    src: KernelSource,
    prologue: list[Node],
    found: list[_Reduction],
    arrays: list[str],
    before: str,
    after: str,
    carried: list[_Carried] | None,
    strided: bool,
) -> list[str]:
    """The body over the thread's elements: the part before the reductions for each, keeping the values to reduce,
    the reductions, then the rest for each; with the locals the rest reads kept per element (`carried`), or with
    the part before computed again (None: it only computes locals, so it gives the same ones)."""
    names = [r.butterfly.var for r in found]
    keep = [f"{a}[{ITEM}] = {var};" for a, var in zip(arrays, names, strict=True)]
    declared = [f"{r.var_type} {a}[{ITEMS}] = {{}};" for r, a in zip(found, arrays, strict=True)]
    reductions = [_reduce(r, a, strided) for r, a in zip(found, arrays, strict=True)]
    if carried is None:
        first = [before, *keep]
        second = [before, *(f"{var} = {a}[{ITEM}];" for a, var in zip(arrays, names, strict=True)), after]
        return [*declared, _per_item(first), *reductions, _per_item(second)]
    alive = f"{PREFIX}alive"
    declared += [
        f"bool {alive}[{ITEMS}] = {{}};",
        *(f"{c.array_type} {PREFIX}c{k}[{ITEMS}];" for k, c in enumerate(carried)),
    ]
    first = [
        before,
        *keep,
        *(f"{PREFIX}c{k}[{ITEM}] = {c.name};" for k, c in enumerate(carried)),
        f"{alive}[{ITEM}] = true;",
    ]
    second = [
        f"if (!{alive}[{ITEM}]) continue;",
        *(c.restore.replace("@value@", f"{PREFIX}c{k}[{ITEM}]") for k, c in enumerate(carried)),
        *(f"{_prefix(src, prologue, var)}{var} = {a}[{ITEM}];" for a, var in zip(arrays, names, strict=True)),
        after,
    ]
    return [*declared, _per_item(first), *reductions, _per_item(second)]


def _prefix(src: KernelSource, statements: list[Node], var: str) -> str:
    """The declaration specifiers of the top-level local `var` (`float `), to declare it again."""
    declaration = _declaration_of(src, statements, var)
    assert declaration is not None  # checked before
    first = declaration.children_by_field_name("declarator")[0]
    return src.data[declaration.start_byte : first.start_byte].decode("utf-8")


def _nodes(found: list[_Reduction]) -> list[Node]:
    """The statements of the reductions."""
    return [r.statement for r in found]


def _lone_loop(statement: Node) -> Node | None:
    """The statement if it is a `for` loop, or the one loop of a block holding nothing else (an inlined helper's)."""
    if statement.type == "for_statement":
        return statement
    if statement.type != "compound_statement":
        return None
    inner = [c for c in statement.named_children if c.type not in ("comment", "preproc_call")]
    return inner[0] if len(inner) == 1 and inner[0].type == "for_statement" else None


def _statements(scope: Node) -> list[Node]:
    """A block's statements (and preprocessor lines), without comments."""
    return [c for c in scope.named_children if c.type != "comment"]


def _index(src: KernelSource, statement: Node, chunk: tuple[Node, str, str] | None) -> Node | None:
    """The value of `T i = blockIdx.x * blockDim.x + threadIdx.x;` (any order, casts; in a chunk loop over u < K,
    `(blockIdx.x * K + u) * blockDim.x + threadIdx.x`), or None."""
    found = guard_thread_index(src, statement, chunk)
    if found is None or found[2] != "x" or found[3] is not None:
        return None
    return found[1]


def _updated(text: str) -> str | None:
    """The variable a shuffle loop's single update writes (`x = …` or `x op= …`)."""
    m = re.search(r"\)\s*\{?\s*([A-Za-z_]\w*)\s*[-+*|&^]?=(?!=)", text)
    return m.group(1) if m else None


def _type_of(src: KernelSource, statements: list[Node], var: str) -> str | None:
    """The type of the top-level local `var` (a plain, non-const scalar), or None."""
    declaration = _declaration_of(src, statements, var)
    if declaration is None:
        return None
    type_node = declaration.child_by_field_name("type")
    qualifiers = [src.text(c) for c in declaration.children if c.type in ("type_qualifier", "storage_class_specifier")]
    if type_node is None or qualifiers or src.text(type_node) == "auto":
        return None
    return src.text(type_node)


def _declaration_of(src: KernelSource, statements: list[Node], var: str) -> Node | None:
    """The top-level declaration of `var` as a plain variable (not a reference, pointer or array)."""
    for s in statements:
        if s.type != "declaration":
            continue
        for d in s.children_by_field_name("declarator"):
            target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            if target is not None and target.type == "identifier" and src.text(target) == var:
                return s
    return None


def _region(src: KernelSource, statements: list[Node], replacements: list[tuple[int, int, str]]) -> str:
    """The text of consecutive statements, dedented, with the replacements inside them made."""
    if not statements:
        return ""
    start, end = statements[0].start_byte, statements[-1].end_byte
    line_start = src.data.rfind(b"\n", 0, start) + 1
    if not src.data[line_start:start].strip():
        start = line_start
    parts: list[bytes] = []
    at = start
    for a, b, text in sorted(r for r in replacements if start <= r[0] and r[1] <= end):
        parts += [src.data[at:a], text.encode("utf-8")]
        at = b
    parts.append(src.data[at:end])
    return textwrap.dedent(b"".join(parts).decode("utf-8"))


def _per_item(parts: list[str]) -> str:
    """A loop over the thread's original threads running `parts`."""
    inner = "\n".join(textwrap.indent(p, "  ") for p in parts if p)
    return "\n".join(["#pragma unroll", f"for (int {ITEM} = 0; {ITEM} < {ITEMS}; ++{ITEM}) {{", inner, "}"])


def _ordered(r: _Reduction) -> bool:
    """Whether the reduction keeps the original's order (a float sum) and combines commutatively, so that once a
    thread's own steps are done its values are all equal."""
    flat = "".join(r.butterfly.combine.split())
    commutative = flat in {f"{OWN}+({PARTNER})", f"{OWN}+{PARTNER}", f"({PARTNER})+{OWN}", f"{PARTNER}+{OWN}"}
    return not r.butterfly.exact and commutative


def _reduce(r: _Reduction, values: str, strided: bool) -> str:
    """The group's butterfly over the thread's values `values[p]` (each becomes original lane p's result); where
    `strided` offers GROUP_STRIDED, its two orders of steps under `if constexpr`."""
    b = r.butterfly

    def combine(own: str, partner: str) -> str:
        return b.combine.replace(OWN, own).replace(PARTNER, partner)

    # the offsets of whole threads, in threads: G/2 … GROUP_ITEMS (consecutive lanes), G/(2·GROUP_ITEMS) … 1 (apart)
    first = f"({b.group // 2}) / {ITEMS}"
    if b.exact:  # any order gives the same bits: the thread's values first, one shuffle per step
        acc = f"{values}_all"
        lines = [
            "{",
            f"  {r.var_type} {acc} = {values}[0];",
            "#pragma unroll",
            f"  for (int {PREFIX}q = 1; {PREFIX}q < {ITEMS}; ++{PREFIX}q)",
            f"    {acc} = {combine(acc, f'{values}[{PREFIX}q]')};",
            "#pragma unroll",
            f"  for (int {PREFIX}o = {first}; {PREFIX}o > 0; {PREFIX}o >>= 1) {{",
            f"    {acc} = {combine(acc, f'__shfl_xor_sync({b.mask}, {acc}, {PREFIX}o)')};",
            "  }",
            "#pragma unroll",
            f"  for (int {PREFIX}q = 0; {PREFIX}q < {ITEMS}; ++{PREFIX}q) {values}[{PREFIX}q] = {acc};",
            "}",
        ]
        return "\n".join(lines)
    own = f"{values}[{PREFIX}q]"
    between = [
        "#pragma unroll",
        f"for (int {PREFIX}o = {first}; {PREFIX}o > 0; {PREFIX}o >>= 1) {{  // between threads, each value",
        "#pragma unroll",
        f"  for (int {PREFIX}q = 0; {PREFIX}q < {ITEMS}; ++{PREFIX}q) {{",
        f"    {own} = {combine(own, f'__shfl_xor_sync({b.mask}, {own}, {PREFIX}o)')};",
        "  }",
        "}",
    ]
    within = [
        "#pragma unroll",
        f"for (int {PREFIX}o = {ITEMS} / 2; {PREFIX}o > 0; {PREFIX}o >>= 1) {{  // within the thread",
        f"  {r.var_type} {PREFIX}t[{ITEMS}];",
        "#pragma unroll",
        f"  for (int {PREFIX}q = 0; {PREFIX}q < {ITEMS}; ++{PREFIX}q) {PREFIX}t[{PREFIX}q] = "
        f"{combine(own, f'{values}[{PREFIX}q ^ {PREFIX}o]')};",
        "#pragma unroll",
        f"  for (int {PREFIX}q = 0; {PREFIX}q < {ITEMS}; ++{PREFIX}q) {own} = {PREFIX}t[{PREFIX}q];",
        "}",
    ]
    consecutive = [*between, *within]  # lanes t·GROUP_ITEMS + p: the first steps pair threads
    if not (strided and _ordered(r)):
        return "\n".join(["{", *_indented(consecutive), "}"])
    acc = f"{values}_all"
    # lanes t + p·G/GROUP_ITEMS: the first steps pair the thread's own values, which then are all equal
    apart = [
        *within,
        f"{r.var_type} {acc} = {values}[0];",
        "#pragma unroll",
        f"for (int {PREFIX}o = {first}; {PREFIX}o > 0; {PREFIX}o >>= 1) {{  // between threads, one value",
        f"  {acc} = {combine(acc, f'__shfl_xor_sync({b.mask}, {acc}, {PREFIX}o)')};",
        "}",
        "#pragma unroll",
        f"for (int {PREFIX}q = 0; {PREFIX}q < {ITEMS}; ++{PREFIX}q) {own} = {acc};",
    ]
    return "\n".join([f"if constexpr ({STRIDED}) {{", *_indented(apart), "} else {", *_indented(consecutive), "}"])


def _indented(lines: list[str]) -> list[str]:
    """Lines one level in (pragmas stay at the line's start, as the preprocessor reads them anywhere)."""
    return [line if line.startswith("#") else f"  {line}" for line in lines]
