"""block_threads: the threads per block a kernel is launched with, as a parameter."""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.model import Kernel, SourceModel, TemplateParamKind
from cutune.cuda.syntax import int_value
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import Draft, KernelRewrite, KernelSource, Recipe
from cutune.template.recipes.host import HostResolver, Origin, OriginKind

NAME = "BLOCK_THREADS"
CANDIDATES = (32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class _Site:
    """One launch with the origin of its block size."""

    line: int
    origin: Origin
    resolver: HostResolver
    call: Node


class BlockThreads(Recipe):
    name = "block_threads"
    description = "threads per block, from the launch's literal, a host constant or a template argument"

    def apply(self, model: SourceModel, kernel: Kernel, draft: Draft) -> Draft:
        src = KernelSource(model, kernel)
        sites = self._sites(src)
        members = {s.origin.name for s in sites if s.origin.kind is OriginKind.MEMBER}
        if members and len(members) == 1 and all(s.origin.kind is OriginKind.MEMBER for s in sites):
            name = members.pop() or NAME
            default = src.member_value(name)
            if not isinstance(default, int) or isinstance(default, bool):
                self.refuse(f"the tuning struct has no integer member {name}")
            return self._draft(src, draft, name, default, src.binding_of(name), src.struct_comment(name))
        value = self._agreed_value(src, sites)
        tparam = self._template_param(src, sites, value)
        self._check_body(src, value, tparam)
        name = tparam or NAME
        rewrite = KernelRewrite(src, self.name)
        done: set[int] = set()
        for site in sites:
            self._rewrite_literal(rewrite, src, site.origin.node, name, done)
            grid = site.call.child_by_field_name("arguments")
            config = next(c for c in site.call.children if c.type == "kernel_call_syntax")
            for expr in site.resolver.closure(config.named_children[0]):
                for lit in _literals(src, expr):
                    v = int_value(src.text(lit))
                    if v in (value, value - 1) and lit.start_byte not in done:
                        done.add(lit.start_byte)
                        ref = src.ref(name, lit.start_byte)
                        rewrite.replace_node(lit, ref if v == value else f"({ref} - 1)")
            del grid
            if tparam is not None:
                for targ in self._targ_literals(src, site, tparam):
                    self._rewrite_literal(rewrite, src, targ, name, done)
        capped = any(s.origin.capped for s in sites)
        comment = "threads per block (at most: the launch takes the min with the problem size)" if capped else "threads per block"
        rewrite.member(name, value, comment, in_kernel=False)
        binding = Binding.TEMPLATE if tparam else Binding.LAUNCH
        return self._draft(src, draft, name, value, binding, comment, text=rewrite.result())

    def _sites(self, src: KernelSource) -> list[_Site]:
        launches = src.launches()
        if not launches:
            self.refuse(f"no launch of {src.kernel.name} in this file, so its threads per block are unknown")
        sites = []
        for _, call in launches:
            config = next(c for c in call.children if c.type == "kernel_call_syntax")
            exprs = [c for c in config.named_children if c.type != "comment"]
            if len(exprs) < 2:
                self.refuse(f"the launch at line {src.line(call)} has no block size")
            resolver = HostResolver(src, call)
            origin = resolver.resolve(exprs[1])
            where = f"line {src.line(origin.node)}"
            if origin.kind is OriginKind.MULTI_DIM:
                self.refuse(f"multi-dimensional blocks not supported yet (`{src.text(origin.node)}` at {where})")
            if origin.kind is OriginKind.MACRO:
                self.refuse(f"the block size comes from the macro {origin.name} ({where}); macros are not rewritten yet")
            if origin.kind is OriginKind.RUNTIME:
                self.refuse(f"the block size `{src.text(origin.node)}` ({where}) is computed at run time, "
                            "with no literal to tune")
            sites.append(_Site(src.line(call), origin, resolver, call))
        return sites

    def _agreed_value(self, src: KernelSource, sites: list[_Site]) -> int:
        values = {s.origin.value for s in sites}
        if len(values) > 1 or any(s.origin.kind is OriginKind.MEMBER for s in sites):
            found = ", ".join(f"{s.origin.value if s.origin.kind is OriginKind.LITERAL else src.text(s.origin.node)} "
                              f"at line {s.line}" for s in sites)
            self.refuse(f"launch sites disagree on the block size: {found}")
        value = values.pop()
        assert value is not None  # LITERAL origins carry their value
        return value

    def _template_param(self, src: KernelSource, sites: list[_Site], value: int) -> str | None:
        """The kernel's own integer template parameter that receives the block size at every launch."""
        for i, tp in enumerate(src.kernel.template_params):
            if tp.kind is not TemplateParamKind.VALUE:
                continue
            origins = []
            for site in sites:
                targs = _template_arguments(site.call)
                origins.append(site.resolver.resolve(targs[i]) if i < len(targs) else None)
            if all(o is not None and o.kind is OriginKind.LITERAL and o.value == value for o in origins):
                return tp.name
        return None

    def _targ_literals(self, src: KernelSource, site: _Site, tparam: str) -> list[Node]:
        i = next(i for i, tp in enumerate(src.kernel.template_params) if tp.name == tparam)
        origin = site.resolver.resolve(_template_arguments(site.call)[i])
        return [origin.node] if origin.kind is OriginKind.LITERAL else []

    def _check_body(self, src: KernelSource, value: int, tparam: str | None) -> None:
        """Refuse when the kernel body hard-codes the block size (a shared array sized for the block)."""
        for lit in src.in_body("number_literal"):
            if int_value(src.text(lit)) != value:
                continue
            decl = lit.parent
            while decl is not None and decl.type not in ("declaration", "compound_statement"):
                decl = decl.parent
            line = src.line(lit)
            if decl is not None and decl.type == "declaration" and "__shared__" in src.text(decl).split("[")[0]:
                self.refuse(f"the shared array `{' '.join(src.text(decl).split())}` (line {line}) is sized for "
                            f"{value} threads; make its size a parameter first")
            self.refuse(f"the kernel body hard-codes {value} (line {line}), which looks tied to the block size")
        del tparam

    def _rewrite_literal(self, rewrite: KernelRewrite, src: KernelSource, node: Node, name: str, done: set[int]) -> None:
        if node.type == "number_literal" and node.start_byte not in done:
            done.add(node.start_byte)
            rewrite.replace_node(node, src.ref(name, node.start_byte))

    def _draft(self, src: KernelSource, draft: Draft, name: str, value: int, binding: Binding, comment: str,
               text: str | None = None) -> Draft:
        values = tuple(sorted({v for v in CANDIDATES if v <= 1024} | {value}))
        constraints = [f"{name} <= max_threads_per_block"]
        if value % 32 == 0:
            constraints.append(f"{name} % warp_size == 0")
        bounds = src.kernel.launch_bounds
        cap = int_value(bounds.max_threads) if bounds is not None else None
        if cap is not None:
            constraints.append(f"{name} <= {cap}")  # __launch_bounds__ caps the block (until launch_bounds ties it)
        param = TunableParam(name, values, value, binding, description=comment)
        return draft.extend(param, constraints=tuple(constraints), text=text).with_block_threads(name)


def _template_arguments(call: Node) -> list[Node]:
    fn = call.child_by_field_name("function")
    while fn is not None and fn.type == "qualified_identifier":
        fn = fn.child_by_field_name("name")
    if fn is None or fn.type != "template_function":
        return []
    args = fn.child_by_field_name("arguments")
    return [c for c in args.named_children if c.type != "comment"] if args is not None else []


def _literals(src: KernelSource, node: Node) -> list[Node]:
    from cutune.template.recipes.base import descendants

    return descendants(node, "number_literal")
