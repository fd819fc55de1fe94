"""unroll: each `#pragma unroll N` in the kernel as a parameter UNROLL, UNROLL_2, ..."""

from __future__ import annotations

import re

from tree_sitter import Node

from cutune.cuda.model import Kernel, SourceModel
from cutune.cuda.syntax import int_value
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import Draft, KernelRewrite, KernelSource, Recipe

CANDIDATES = (1, 2, 4, 8, 16)
_PRAGMA = re.compile(r"\s*unroll\b\s*(?:\(?\s*(\w+)\s*\)?)?\s*$")


class Unroll(Recipe):
    name = "unroll"
    description = "the factor of each `#pragma unroll N` loop"

    def apply(self, model: SourceModel, kernel: Kernel, draft: Draft) -> Draft:
        src = KernelSource(model, kernel)
        rewrite = KernelRewrite(src, self.name)
        params: list[TunableParam] = []
        bare = 0
        used: set[str] = set()
        for pragma, span, factor in self._pragmas(src):
            if factor is None:
                bare += 1
                continue
            comment = f"#pragma unroll factor of the loop `{_loop_header(src, pragma)}`"
            value = int_value(factor)
            member = src.member_int(factor)
            if value is None and member is not None and src.template_param(factor):
                params.append(_param(factor, member, src.member_comment(factor, comment)))  # already written
                used.add(factor)
                continue
            if value is None:
                continue  # a named factor templatize did not write: leave it to its author
            name = _free_name(src, used)
            used.add(name)
            rewrite.replace(*span, name)
            rewrite.member(name, value, comment, in_kernel=True)
            params.append(_param(name, value, comment))
        if not params:
            if bare:
                self.refuse(
                    "only bare `#pragma unroll` here: it unrolls fully, as the trip count decides, so there "
                    "is no factor to tune"
                )
            self.refuse("no `#pragma unroll N` in the kernel")
        return draft.extend(*params, text=rewrite.result())

    def _pragmas(self, src: KernelSource) -> list[tuple[Node, tuple[int, int], str | None]]:
        """Each `#pragma unroll` in the body: the directive, its factor's byte range and text (None: bare)."""
        found = []
        for call in src.in_body("preproc_call"):
            directive = call.child_by_field_name("directive")
            arg = call.child_by_field_name("argument")
            if directive is None or arg is None or src.text(directive) != "#pragma":
                continue
            m = _PRAGMA.match(src.text(arg))
            if m:
                start = arg.start_byte + len(src.text(arg)[: m.start(1)].encode()) if m.group(1) else arg.start_byte
                found.append((call, (start, start + len(m.group(1) or "")), m.group(1)))
        return found


def _param(name: str, value: int, comment: str) -> TunableParam:
    return TunableParam(name, tuple(sorted(set(CANDIDATES) | {value})), value, Binding.TEMPLATE, description=comment)


def _free_name(src: KernelSource, used: set[str]) -> str:
    n = 1
    while True:
        name = "UNROLL" if n == 1 else f"UNROLL_{n}"
        if name not in used and not src.taken(name):
            return name
        n += 1


def _loop_header(src: KernelSource, pragma: Node) -> str:
    """The loop a pragma applies to, as `for (...)`, shortened."""
    loop = pragma.next_named_sibling
    if loop is None:
        return "?"
    body = loop.child_by_field_name("body")
    header = src.data[loop.start_byte : body.start_byte if body is not None else loop.end_byte]
    text = " ".join(header.decode("utf-8", errors="replace").split())
    return text if len(text) <= 60 else text[:57] + "..."
