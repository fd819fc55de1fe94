"""block_threads: the threads per block a kernel is launched with, as a parameter."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.model import Kernel, Macro, SourceModel, TemplateParamKind
from cutune.cuda.syntax import int_value
from cutune.errors import ExpressionError
from cutune.template.expr import compile_expr
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import Draft, KernelRewrite, KernelSource, Recipe, descendants
from cutune.template.recipes.host import HostResolver, Origin, OriginKind, launch_config

NAME = "BLOCK_THREADS"
_CUB_BLOCK = re.compile(r"(?:::)?cub::Block\w+\s*<")
_STATIC_ASSERT = re.compile(r"\bstatic_assert\s*\(\s*([^,;]+?)\s*(?:,[^;]*)?\)\s*;")
_CUB_CALL = re.compile(r"\)\s*\.\s*(?:Reduce|Sum|InclusiveSum|ExclusiveSum)\s*\(([^;]*)\)\s*;")
CANDIDATES = (32, 64, 128, 256, 512, 1024)
_PLAIN = "threads per block"
_CAPPED = "threads per block (at most: the launch takes the min with the problem size)"


@dataclass(frozen=True)
class _Site:
    """One launch with the origin of its block size."""

    line: int
    origin: Origin
    resolver: HostResolver  # at the launch
    call: Node
    instantiated: bool = False  # the origin is where a host template or macro around the launch is instantiated


class BlockThreads(Recipe):
    name = "block_threads"
    description = "threads per block, from the launch's literal, a host constant or a template argument"

    def apply(self, model: SourceModel, kernel: Kernel, draft: Draft) -> Draft:
        src = KernelSource(model, kernel)
        sites = self._sites(src)
        members = {s.origin.name for s in sites if s.origin.kind is OriginKind.MEMBER}
        if len(members) == 1 and all(s.origin.kind is OriginKind.MEMBER for s in sites):
            return self._recovered(src, draft, members.pop() or NAME)
        macros = {s.origin.name for s in sites if s.origin.kind is OriginKind.MACRO}
        if macros:
            return self._macro(src, draft, sites, macros)
        tparam, targs = self._template_param(src, sites)
        if tparam is not None and len({s.origin.value for s in sites}) > 1:
            return self._dispatched(src, draft, sites, tparam)
        value = self._agreed_value(src, sites)
        caps = self._check_body(src, value)
        name = tparam or NAME
        rewrite = KernelRewrite(src, self.name)
        done: set[int] = set()
        for site in sites:
            literals = [site.origin.node]
            for expr in site.resolver.closure(launch_config(site.call)[0]) if not site.instantiated else []:
                literals += [
                    lit for lit in descendants(expr, "number_literal") if int_value(src.text(lit)) == value - 1
                ]
                literals += [lit for lit in descendants(expr, "number_literal") if int_value(src.text(lit)) == value]
            for lit in literals + targs:
                if lit.type != "number_literal" or lit.start_byte in done:
                    continue
                done.add(lit.start_byte)
                ref = src.ref(name, lit.start_byte)
                rewrite.replace_node(lit, ref if int_value(src.text(lit)) == value else f"({ref} - 1)")
        comment = _CAPPED if any(s.origin.capped for s in sites) else _PLAIN
        rewrite.member(name, value, comment, in_kernel=False)
        binding = Binding.TEMPLATE if tparam else Binding.LAUNCH
        return self._draft(src, draft, name, value, binding, comment, text=rewrite.result(), caps=caps)

    def _dispatched(self, src: KernelSource, draft: Draft, sites: list[_Site], tparam: str) -> Draft:
        """A launcher that picks among instantiations `k<T, 128><<<g, 128>>>`, `k<T, 512><<<g, 512>>>` at run
        time: the kernel's template parameter, searched among the values the launcher can reach (any other
        would need a new case); the source stays, the first case being the default."""
        values = [s.origin.value for s in sites if s.origin.value is not None]
        cases = ", ".join(str(v) for v in dict.fromkeys(values))
        comment = f"threads per block (the launcher dispatches {cases} at run time: searched among them)"
        param = TunableParam(tparam, tuple(sorted(set(values))), values[0], Binding.TEMPLATE, description=comment)
        constraints = (f"{tparam} <= max_threads_per_block", *_asserted(src, tparam))
        return draft.extend(param, constraints=constraints, block_threads=tparam)

    def _recovered(self, src: KernelSource, draft: Draft, name: str) -> Draft:
        """The parameter of a launch already written as `<kernel>_tuning::NAME`."""
        value = src.member_int(name)
        if value is None:
            self.refuse(f"the launch uses {src.struct_name}::{name}, which is not an integer member of the struct")
        return self._draft(src, draft, name, value, src.binding_of(name), src.member_comment(name, _PLAIN))

    def _macro(self, src: KernelSource, draft: Draft, sites: list[_Site], macros: set[str | None]) -> Draft:
        """A block size from `#ifndef X / #define X 128`: X itself, set with -DX= (the source stays)."""
        name = next(iter(macros))
        if len(macros) > 1 or name is None or any(s.origin.kind is not OriginKind.MACRO for s in sites):
            found = ", ".join(f"`{src.text(s.origin.node)}` at line {s.line}" for s in sites)
            self.refuse(f"launch sites disagree on the block size: {found}")
        macro = next(m for m in src.model.macros if m.name == name)
        value = int_value(macro.value.strip().strip("()"))
        line = macro.span.start.line + 1
        if value is None or value < 1:
            self.refuse(
                f"the block size comes from the macro {name} (line {line}), whose value `{macro.value}` is no integer"
            )
        if not _overridable(src.model.text, macro):
            self.refuse(
                f"the block size comes from the macro {name} (line {line}), which is not inside `#ifndef {name}`, "
                f"so -D{name}= cannot override it; wrap it to make it tunable"
            )
        caps = self._check_body(src, value)
        return self._draft(src, draft, name, value, Binding.DEFINE, _PLAIN, caps=caps)

    def _sites(self, src: KernelSource) -> list[_Site]:
        launches = src.launches()
        if not launches:
            self.refuse(f"no launch of {src.kernel.name} in this file, so its threads per block are unknown")
        sites = []
        for _, call in launches:
            config = launch_config(call)
            if len(config) < 2:
                self.refuse(f"the launch at line {src.line(call)} has no block size")
            resolver = HostResolver(src, call)
            found = resolver.resolve_all(config[1])
            for origin, at in found:
                where = f"line {src.line(origin.node)}"
                if origin.kind is OriginKind.MULTI_DIM:
                    self.refuse(f"multi-dimensional blocks not supported yet (`{src.text(origin.node)}` at {where})")
                if origin.kind is OriginKind.RUNTIME:
                    note = f": {origin.note}" if origin.note else ""
                    self.refuse(
                        f"the block size `{src.text(origin.node)}` ({where}) is computed at run time{note}, "
                        "with no literal to tune"
                    )
                sites.append(_Site(src.line(call), origin, resolver, call, instantiated=at is not resolver))
        return sites

    def _agreed_value(self, src: KernelSource, sites: list[_Site]) -> int:
        values = {s.origin.value for s in sites}
        if len(values) > 1 or any(s.origin.kind is OriginKind.MEMBER for s in sites):
            found = ", ".join(
                f"{s.origin.value if s.origin.kind is OriginKind.LITERAL else src.text(s.origin.node)} at line "
                f"{src.line(s.origin.node) if s.instantiated else s.line}"
                for s in sites
            )
            self.refuse(f"launch sites disagree on the block size: {found}")
        value = values.pop()
        if value is None or value < 1:
            self.refuse("the block size literal could not be read")
        return value

    def _template_param(self, src: KernelSource, sites: list[_Site]) -> tuple[str | None, list[Node]]:
        """The kernel's own integer template parameter that receives the block size at every launch (and
        every instantiation of the host template or macro around it), with the literals passing it."""
        calls = {s.call.start_byte: s for s in sites}  # one resolver per launch; its sites in order
        for i, tp in enumerate(src.kernel.template_params):
            if tp.kind is not TemplateParamKind.VALUE:
                continue
            literals: list[Node] = []
            for start, first in calls.items():
                args = _template_arguments(first.call)
                found = first.resolver.resolve_all(args[i]) if i < len(args) else []
                blocks = [s.origin.value for s in sites if s.call.start_byte == start]
                if [o.value if o.kind is OriginKind.LITERAL else None for o, _ in found] != blocks:
                    break
                literals += [o.node for o, _ in found]
            else:
                return tp.name, literals
        return None, []

    def _check_body(self, src: KernelSource, value: int) -> tuple[str, ...]:
        """Refuse when the kernel body hard-codes the block size, e.g. a shared array sized for the block;
        a cub block primitive sized `value` whose every use covers `blockDim.x` threads only caps it."""
        caps: list[str] = []
        for lit in src.in_body("number_literal"):
            if int_value(src.text(lit)) != value:
                continue
            cub = _cub_block_type(src, lit)
            if cub is not None and _over_block_dim(src):
                caps.append(f"{{name}} <= {value}")  # `{cub}` handles any block of at most `value` threads
                continue
            if cub is not None:
                self.refuse(
                    f"`{cub}` (line {src.line(lit)}) works on exactly {value} threads; pass blockDim.x as its "
                    "number of valid items (e.g. `.Reduce(v, op, blockDim.x)`) to make the block size tunable"
                )
            decl = lit.parent
            while decl is not None and decl.type not in ("declaration", "compound_statement"):
                decl = decl.parent
            line = src.line(lit)
            if decl is not None and decl.type == "declaration" and "__shared__" in src.text(decl).split("[")[0]:
                self.refuse(
                    f"the shared array `{' '.join(src.text(decl).split())}` (line {line}) is sized for "
                    f"{value} threads; make its size a parameter first"
                )
            self.refuse(f"the kernel body hard-codes {value} (line {line}), which looks tied to the block size")
        return tuple(caps)

    def _draft(
        self,
        src: KernelSource,
        draft: Draft,
        name: str,
        value: int,
        binding: Binding,
        comment: str,
        text: str | None = None,
        caps: tuple[str, ...] = (),
    ) -> Draft:
        values = tuple(sorted(set(CANDIDATES) | {value}))
        constraints = [f"{name} <= max_threads_per_block", *(c.format(name=name) for c in caps)]
        constraints += _asserted(src, name) if binding is Binding.TEMPLATE else []
        if value % 32 == 0:
            constraints.append(f"{name} % warp_size == 0")
        bounds = src.kernel.launch_bounds
        cap = int_value(bounds.max_threads) if bounds is not None else None
        if cap is not None:
            constraints.append(f"{name} <= {cap}")  # until launch_bounds ties __launch_bounds__ to the parameter
        param = TunableParam(name, values, value, binding, description=comment)
        return draft.extend(param, constraints=tuple(constraints), text=text, block_threads=name)


def _overridable(text: str, macro: Macro) -> bool:
    """Whether `#define NAME` sits right inside `#ifndef NAME` (or `#if !defined(NAME)`): -DNAME= wins."""
    before = text[: macro.span.start_byte].rstrip().rsplit("\n", 1)[-1]
    return (
        re.fullmatch(rf"\s*#\s*(?:ifndef\s+{macro.name}|if\s+!\s*defined\s*\(?\s*{macro.name}\s*\)?)\s*", before)
        is not None
    )


def _cub_block_type(src: KernelSource, literal: Node) -> str | None:
    """`cub::BlockReduce<float, 1024>` when the literal is a template argument of a cub block primitive."""
    args = literal.parent
    owner = args.parent if args is not None and args.type == "template_argument_list" else None
    if owner is None or owner.type != "template_type":
        return None
    outer = owner.parent if owner.parent is not None and owner.parent.type == "qualified_identifier" else owner
    text = " ".join(src.text(outer).split())
    return text if _CUB_BLOCK.match(text) else None


def _over_block_dim(src: KernelSource) -> bool:
    """Whether every cub block reduction or scan call in the kernel names blockDim.x as its valid items."""
    calls = _CUB_CALL.findall(" ".join(src.text(src.body).split()))
    return bool(calls) and all(args.replace(" ", "").endswith(",blockDim.x") for args in calls)


def _asserted(src: KernelSource, name: str) -> list[str]:
    """The kernel's `static_assert`s on `name` that read as spec constraints (`NUM_THREADS % 32 == 0`)."""
    found = []
    for m in _STATIC_ASSERT.finditer(src.text(src.body)):
        condition = " ".join(m.group(1).replace("&&", " and ").replace("||", " or ").split())
        if re.search(rf"\b{name}\b", condition) is None:
            continue
        try:
            expr = compile_expr(condition)
        except ExpressionError:
            continue
        if expr.names <= {name}:
            found.append(condition)
    return found


def _template_arguments(call: Node) -> list[Node]:
    """The template arguments written at a launch `ns::k<...><<<...>>>(...)`."""
    fn = call.child_by_field_name("function")
    while fn is not None and fn.type == "qualified_identifier":
        fn = fn.child_by_field_name("name")
    if fn is None or fn.type != "template_function":
        return []
    args = fn.child_by_field_name("arguments")
    return [c for c in args.named_children if c.type != "comment"] if args is not None else []
