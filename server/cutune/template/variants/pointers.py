"""The pointers of a kernel: which parameters they are based on, for transforms that move a load or a store."""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.syntax import declarator_name
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.loops import written_names


@dataclass(frozen=True)
class Pointers:
    """The kernel's pointers: its pointer parameters (which of them `__restrict__`), its local pointers, and the value
    of each local pointer set once, where it is declared."""

    params: frozenset[str]
    restrict: frozenset[str]
    locals: frozenset[str]
    values: dict[str, Node]

    @classmethod
    def of(cls, src: KernelSource) -> Pointers:
        """The pointers of the kernel `src`."""
        params = [p for p in src.kernel.params if "*" in p.type]
        locals_: set[str] = set()
        values: dict[str, Node] = {}
        written = written_names(src, src.body)
        for d in src.in_body("declaration"):
            for declarator in d.children_by_field_name("declarator"):
                init = declarator.type == "init_declarator"
                inner = declarator.child_by_field_name("declarator") if init else declarator
                name = declarator_name(inner)
                if inner is None or inner.type != "pointer_declarator" or name is None:
                    continue
                locals_.add(src.text(name))
                value = declarator.child_by_field_name("value") if init else None
                if value is not None and src.text(name) not in written:
                    values[src.text(name)] = value
        return cls(
            frozenset(p.name for p in params),
            frozenset(p.name for p in params if "__restrict__" in p.type),
            frozenset(locals_),
            values,
        )

    @property
    def names(self) -> frozenset[str]:
        """Every pointer's name."""
        return self.params | self.locals

    def bases(self, src: KernelSource, name: str, seen: frozenset[str] = frozenset()) -> set[str] | None:
        """The pointer parameters the pointer `name` is based on: itself for a parameter; for a local pointer set
        once, where it is declared, those of the pointers its value names (`dst_t * y = yy + i * QK_K;`); None where
        that is not known (a local pointer set elsewhere, or declared without a value)."""
        if name in self.params:
            return {name}
        if name not in self.locals:
            return set()
        value = self.values.get(name)
        if value is None or name in seen:
            return None
        found: set[str] = set()
        for used in {src.text(n) for n in descendants(value, "identifier")} & self.names:
            based = self.bases(src, used, seen | {name})
            if based is None:
                return None
            found |= based
        return found
