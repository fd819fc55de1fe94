"""specialize: an integral size argument compiled in as a constant when the problem fixes it.

The kernel gets a template parameter `<ARG>_CT = 0`, its argument becomes `<arg>_rt`, and the body starts
with `const T arg = ARG_CT > 0 ? ARG_CT : arg_rt;`: at 0 (the default) nothing changes; set to the
problem's value, divisions, modulos and loop bounds by it become constants.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from cutune.cuda.access import device_definitions
from cutune.cuda.model import Kernel, Parameter, SourceModel
from cutune.template.model import Binding, Refusal, TunableParam
from cutune.template.recipes.base import Draft, KernelRewrite, KernelSource, Recipe, descendants

_QUALIFIERS = re.compile(r"\b(const|constexpr|volatile|__restrict__|__restrict|restrict|static)\b")
INTEGRAL = (
    frozenset(
        f"{sign}{base}"
        for sign in ("", "unsigned ", "signed ")
        for base in ("int", "long", "long int", "long long", "long long int", "short", "char")
    )
    | {"unsigned", "uint", "size_t", "ssize_t", "index_t"}
    | {f"{u}int{b}_t" for u in ("", "u") for b in (8, 16, 32, 64)}
)
_COMMENT = "// cutune: sizes compiled in as constants when specialised (0 = the run-time argument)"


def static_param(arg: str) -> str:
    """The template parameter that carries a specialised argument's value, e.g. HEAD_SIZE_CT."""
    return f"{arg.upper()}_CT"


def runtime_param(arg: str) -> str:
    """The new name of a specialised kernel argument, e.g. head_size_rt."""
    return f"{arg}_rt"


def param_name(arg: str) -> str:
    """The tunable (bool) parameter that switches the specialisation, e.g. SPECIALIZE_HEAD_SIZE."""
    return f"SPECIALIZE_{arg.upper()}"


class Specialize(Recipe):
    name = "specialize"
    description = "integral size arguments used as divisors or loop bounds, compiled in as constants per problem"

    def apply(self, model: SourceModel, kernel: Kernel, draft: Draft) -> Draft:
        src = KernelSource(model, kernel)
        recovered = [
            p.name.removesuffix("_rt")
            for p in kernel.params
            if p.name.endswith("_rt") and src.template_param(static_param(p.name.removesuffix("_rt")))
        ]
        candidates: list[Parameter] = []
        reasons: list[str] = []
        for p in kernel.params:
            if p.name.removesuffix("_rt") in recovered or "*" in p.type or "&" in p.type or "[" in p.type:
                continue  # pointers and references are data, not sizes
            reason = self._reason(src, p)
            if reason is None:
                candidates.append(p)
            else:
                reasons.append(f"{p.name}: {reason}")
        if not candidates and not recovered:
            self.refuse("; ".join(reasons) if reasons else "the kernel takes no integral size arguments")
        text = self._rewrite(src, candidates) if candidates else None
        params = [_param(arg) for arg in recovered + [p.name for p in candidates]]
        return draft.extend(*params, text=text, refusals=tuple(Refusal(self.name, r) for r in reasons))

    def _reason(self, src: KernelSource, p: Parameter) -> str | None:
        """Why argument `p` is not worth specialising; None when it is."""
        base = base_type(p.type)
        if base not in INTEGRAL:
            return f"a {base}, not an integral size"
        if src.taken(static_param(p.name)):
            return f"{static_param(p.name)} is already taken"
        for node in src.in_body("assignment_expression", "update_expression"):
            target = node.child_by_field_name("left") or node.child_by_field_name("argument")
            if target is not None and src.text(target).strip() == p.name:
                return f"assigned in the kernel (line {src.line(node)})"
        if not _gains(src, p.name):
            return "nothing to gain: never used (even through a local) in a division, modulo or loop bound"
        return None

    def _rewrite(self, src: KernelSource, candidates: list[Parameter]) -> str:
        rewrite = KernelRewrite(src, self.name)
        first = next((c for c in src.body.named_children), None)
        indent_at = first.start_byte if first is not None else src.body.end_byte
        line_start = src.data.rfind(b"\n", 0, indent_at) + 1
        indent = src.data[line_start:indent_at].decode() if first is not None else "  "
        lines = [_COMMENT]
        for p in candidates:
            decl = src.root.descendant_for_byte_range(p.span.start_byte, p.span.end_byte)
            ident = next(n for n in descendants(decl, "identifier") if src.text(n) == p.name) if decl else None
            if ident is None:
                self.refuse(f"the declaration of argument {p.name} could not be read")
            rewrite.replace_node(ident, runtime_param(p.name))
            base = base_type(p.type)
            rewrite.template_param(f"{base} {static_param(p.name)} = 0")
            ct = static_param(p.name)
            lines.append(f"const {base} {p.name} = {ct} > 0 ? {ct} : {runtime_param(p.name)};")
        rewrite.insert(src.body.start_byte + 1, "".join(f"\n{indent}{line}" for line in lines))
        return rewrite.result()


def _param(arg: str) -> TunableParam:
    return TunableParam(
        param_name(arg),
        (False, True),
        False,
        Binding.SPECIALIZE,
        arg=arg,
        description=f"compile {arg} in as a constant (one build per value of {arg})",
    )


def _gains(src: KernelSource, name: str) -> bool:
    """Whether `name`, or an integral local computed from it, divides, takes a modulus or bounds a loop, in
    the kernel or in a device function of the file it is passed to."""
    return _gains_in(src, src.body, name, depth=0)


_MAX_CALL_DEPTH = 4


def _gains_in(src: KernelSource, body: Node, name: str, *, depth: int) -> bool:
    derived = _derived(src, body, name)
    uses = [i for i in descendants(body, "identifier") if src.text(i) in derived]
    if any(_divides_or_bounds(i) for i in uses):
        return True
    if depth >= _MAX_CALL_DEPTH:
        return False
    for call in descendants(body, "call_expression"):
        args = call.child_by_field_name("arguments")
        positions = [
            i
            for i, a in enumerate(c for c in (args.named_children if args else []) if c.type != "comment")
            if a.type == "identifier" and src.text(a) in derived
        ]
        callee = _callee(src, call) if positions else None
        if callee is None:
            continue
        params, callee_body = callee
        if any(i < len(params) and _gains_in(src, callee_body, params[i], depth=depth + 1) for i in positions):
            return True
    return False


def _callee(src: KernelSource, call: Node) -> tuple[list[str], Node] | None:
    """The parameter names and body of the device function of this file a call names, if there is one."""
    fn = call.child_by_field_name("function")
    name = src.text(fn).split("<")[0].split("::")[-1].strip() if fn is not None else ""
    return next(iter(device_definitions(src.model, src.root, src.data, name)), None)


def _derived(src: KernelSource, body: Node, name: str) -> set[str]:
    """`name` and the integral locals computed from it, in one function body."""
    derived = {name}
    inits = []
    for decl in descendants(body, "declaration"):
        type_node = decl.child_by_field_name("type")
        if type_node is None or base_type(src.text(type_node)) not in INTEGRAL:
            continue  # float values computed from a size gain nothing from it being constant
        for d in decl.children_by_field_name("declarator"):
            if d.type == "init_declarator":
                inits.append((d.child_by_field_name("declarator"), d.child_by_field_name("value")))
    grew = True
    while grew:
        grew = False
        for target, value in inits:
            if target is None or value is None or src.text(target) in derived:
                continue
            if any(src.text(i) in derived for i in descendants(value, "identifier")):
                derived.add(src.text(target))
                grew = True
    return derived


def base_type(type_text: str) -> str:
    """A type without cv-qualifiers and restrict, whitespace normalized."""
    return " ".join(_QUALIFIERS.sub(" ", type_text).split())


def _divides_or_bounds(ident: Node) -> bool:
    """Whether an identifier sits in a divisor, a modulus or a for loop's condition."""
    node, parent = ident, ident.parent
    while parent is not None and parent.type not in ("compound_statement", "function_definition"):
        operator = parent.child_by_field_name("operator")
        on_right = parent.child_by_field_name("right") == node
        if on_right and operator is not None and operator.type in ("/", "%", "/=", "%="):
            return True
        if parent.type == "for_statement" and parent.child_by_field_name("condition") == node:
            return True
        node, parent = parent, parent.parent
    return False
