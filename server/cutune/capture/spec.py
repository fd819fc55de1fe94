"""A kernel's tuning spec from the launches a program made: sizes and weights, launch, template arguments.

The basis is the kernel's existing spec table, else the drafter's guess; the capture replaces what it saw
(sizes with their launch counts as weights, the launch geometry, template arguments, scalar values, the
dtypes of template element types) and checks the drafted array shapes against the allocations passed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cutune.capture.log import CaptureError
from cutune.capture.match import Captured, Number
from cutune.cuda.lists import split_top_level
from cutune.cuda.model import Parameter
from cutune.errors import ExpressionError
from cutune.spec import ArgSpec, KernelSpec, Role
from cutune.spec.draft import SIZEOF, element_bytes
from cutune.template.dtypes import C_TYPES, INTEGER_DTYPES, dtype_size, parse_c_type, struct_bytes
from cutune.template.expr import compile_expr
from cutune.template.model import Binding, Space

_TODO = "TODO"
_FACTORS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
_AXES = "xyz"


@dataclass(frozen=True)
class KernelCapture:
    """A kernel's spec made from a capture, and what the user should know about it."""

    path: Path
    kernel: str
    spec: KernelSpec
    launches: int  # launches of the chosen instantiation
    notes: tuple[str, ...]
    real_inputs: dict[int, dict[str, str]]  # size index → argument → snapshot file (with `--data`)


@dataclass
class _Problem:
    """One distinct problem: size values, the launch geometry it had, its launches."""

    sizes: dict[str, int]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    count: int
    extents: dict[str, int]
    snapshot: dict[str, str]


def spec_from_captures(
    basis: KernelSpec, captured: Sequence[Captured], limits: Mapping[str, int], data_dir: Path | None = None
) -> KernelCapture:
    """The spec `basis` becomes with what `captured` (launches of one kernel) saw; raises CaptureError where
    an array shape is larger than the allocation the program passed."""
    first = captured[0]
    notes: list[str] = []
    tuned = {p.name: p.default for p in basis.space.params} if basis.space else {}
    chosen = _instantiation(captured, set(tuned), notes)
    kernel = first.kernel
    template_args = dict(basis.template_args)
    for name, value in chosen[0].template_args.items():
        if name in tuned:
            if str(tuned[name]) != value:
                notes.append(f"the program launches {name} = {value}; the search starts from {tuned[name]}")
            continue
        template_args[name] = value
    typed = _structs(_typed_args(basis, kernel.params, template_args), kernel.params, chosen, notes)
    args, bound = _bounded(typed, basis, chosen, notes)
    names = list(dict.fromkeys((*basis.size_names(), *bound)))
    problems, values = _problems(basis, args, chosen, names, bound, notes, data_dir)
    args = tuple(replace(a, value=values[a.name]) if a.name in values else a for a in args)
    fixed = {**limits, **{k: v for k, v in tuned.items() if isinstance(v, int | bool)}}
    # `sizeof(T)` a drafted launch kept is the captured instantiation's (the draft could only guess T)
    sized = {t: size for t, c in template_args.items() if (size := element_bytes(c)) is not None}
    basis = replace(
        basis,
        grid=tuple(_sized(d, sized) for d in basis.grid),
        block=tuple(_sized(d, sized) for d in basis.block),
        shared_mem=_sized(basis.shared_mem, sized),
    )
    grid = _fit_dims("grid", basis.grid, [p.grid for p in problems], problems, fixed, bound, notes)
    block = _fit_dims("block", basis.block, [p.block for p in problems], problems, fixed, bound, notes)
    smem = _fit("shared_mem", basis.shared_mem, [p.smem for p in problems], problems, fixed, bound, notes)
    merged = _merged(problems, bound)
    # the program's own input values at each size, where --data kept them: tuning reads them instead of random
    kept = {name for p in merged for name in p.snapshot}
    args = tuple(
        replace(a, data=tuple(p.snapshot.get(a.name, "") for p in merged)) if a.name in kept else a for a in args
    )
    spec = replace(
        basis,
        args=args,
        template_args=template_args,
        sizes=tuple(p.sizes for p in merged),
        weights=tuple(float(p.count) for p in merged),
        grid=grid,
        block=block,
        shared_mem=smem,
    )
    spec = _without_unused_launch_params(spec, notes)
    _check_extents(spec, first.path, merged)
    left = [f"{key} = {text!r}" for key, text in _todos(spec)]
    if left:
        notes.append("still TODO (the capture could not tell): " + "; ".join(left))
    real = {i: p.snapshot for i, p in enumerate(merged) if p.snapshot}
    launches = sum(c.launch.count for c in chosen)
    return KernelCapture(first.path, kernel.name, spec, launches, tuple(dict.fromkeys(notes)), real)


def _instantiation(captured: Sequence[Captured], tuned: set[str], notes: list[str]) -> list[Captured]:
    """The launches of the most launched instantiation (a spec fixes its template arguments; the tuned ones
    are the search's to choose)."""
    groups: dict[tuple[tuple[str, str], ...], list[Captured]] = {}
    for c in captured:
        groups.setdefault(tuple(sorted((k, v) for k, v in c.template_args.items() if k not in tuned)), []).append(c)
    ranked = sorted(groups.values(), key=lambda g: -sum(c.launch.count for c in g))
    for other in ranked[1:]:
        args = ", ".join(f"{k} = {v}" for k, v in sorted(other[0].template_args.items()))
        notes.append(
            f"also launched as <{args}> ({sum(c.launch.count for c in other)} launches): the spec keeps the most "
            f"launched instantiation; a tuned configuration applies to every instantiation"
        )
    usable = [c for c in ranked[0] if c.problem is None]
    if not usable:
        raise CaptureError(f"{captured[0].path}: kernel {captured[0].kernel.name}: {ranked[0][0].problem}")
    return usable


def _typed_args(
    basis: KernelSpec, params: Sequence[Parameter], template_args: Mapping[str, str]
) -> tuple[ArgSpec, ...]:
    """The basis arguments with each template element type's dtype from the launched instantiation."""
    out = []
    for arg, param in zip(basis.args, params, strict=False):
        base = parse_c_type(param.type).base
        dtype = C_TYPES.get(template_args.get(base, ""))
        out.append(replace(arg, dtype=dtype) if dtype and base in template_args else arg)
    return (*out, *basis.args[len(out) :])


def _structs(
    args: Sequence[ArgSpec], params: Sequence[Parameter], chosen: Sequence[Captured], notes: list[str]
) -> tuple[ArgSpec, ...]:
    """Each scalar of a type no dtype names (a struct passed by value) as the bytes the launches passed
    (`bytesN`; its value is filled in with the other scalars'), unless they hold what looks like a device
    pointer: the memory it points to is the program's, gone once it exits."""
    out = []
    for i, (a, p) in enumerate(zip(args, params, strict=False)):
        raws = [c.launch.params[i].raw for c in chosen if c.launch.params is not None]
        if a.shape is not None or not a.dtype.startswith(_TODO) or not raws or parse_c_type(p.type).pointer:
            out.append(a)
            continue
        if any(_pointer_like(raw, c) for raw, c in zip(raws, chosen, strict=False)):
            notes.append(f"{a.name}: the `{p.type}` passed by value holds what looks like a device pointer")
            out.append(a)
            continue
        out.append(replace(a, dtype=f"bytes{len(raws[0])}", value=f"{_TODO}: the bytes passed"))
    return (*out, *args[len(out) :])


def _pointer_like(raw: bytes, c: Captured) -> bool:
    """Whether an 8-byte word of `raw` falls in the 4 GiB region of a pointer the same launch passed."""
    regions = {int.from_bytes(p.raw, "little") >> 32 for p in c.launch.params or () if p.is_pointer}
    words = (int.from_bytes(raw[k : k + 8], "little") for k in range(0, len(raw) - 7, 8))
    return any(w >> 32 in regions for w in words if w)


def _bounded(
    args: Sequence[ArgSpec], basis: KernelSpec, chosen: Sequence[Captured], notes: list[str]
) -> tuple[tuple[ArgSpec, ...], dict[str, str]]:
    """The arguments with each single-dimension array whose length the capture can only bound sized by the
    allocation the program passed (`bound`, a size variable of its own; written, it is compared as `inout`):
    one whose length no launch argument gives, and one whose drafted length is a guess that the allocation
    does not match at every launch. Also each such size variable → its array."""
    value_of = {a.value: a.name for a in args if a.value is not None}
    launch_names = set().union(*(_names(t) for t in (*basis.grid, *basis.block, basis.shared_mem)))
    shape_uses: dict[str, int] = {}
    for a in args:
        for n in {n for d in a.shape or () for n in _names(d)}:
            shape_uses[n] = shape_uses.get(n, 0) + 1
    taken = set(basis.size_names()) | {a.name for a in args}
    out, bound = [], {}
    for a in args:
        if a.shape is None or len(a.shape) != 1 or any(a.name not in c.extents for c in chosen):
            out.append(a)
            continue
        extents = [c.extents[a.name] for c in chosen]
        dim = a.shape[0]
        free = dim not in value_of and dim not in launch_names and shape_uses.get(dim) == 1
        if not free:
            scalar = value_of.get(dim, "")
            exact = all(c.scalars.get(scalar) == e // dtype_size(a.dtype) for c, e in zip(chosen, extents, strict=True))
            if not a.guessed or exact:
                out.append(a)
                continue
            dim = next(n for i in range(len(taken) + 1) if (n := f"n_{a.name}" + (f"_{i}" if i else "")) not in taken)
            taken.add(dim)
        written = a.role is Role.OUT
        out.append(replace(a, shape=(dim,), bound=True, role=Role.INOUT if written else a.role))
        bound[dim] = a.name
        notes.append(
            f"{a.name}: its length is the allocation the program passed ({dim}, an upper bound)"
            + ("; written, so compared as inout: the elements the kernel leaves keep their values" if written else "")
        )
    return tuple(out), bound


def _names(text: str) -> frozenset[str]:
    """The names an expression reads (none for a TODO the drafter left)."""
    try:
        return compile_expr(text).names
    except ExpressionError:
        return frozenset()


def _problems(
    basis: KernelSpec,
    args: Sequence[ArgSpec],
    chosen: Sequence[Captured],
    names: list[str],
    bound: Mapping[str, str],
    notes: list[str],
    data_dir: Path | None,
) -> tuple[list[_Problem], dict[str, str]]:
    """Each launch as size values: from the scalars passed to size arguments, the grid and block dimensions
    the basis writes as a size alone, and (last) the allocations of the arrays only they bound; and the values
    of the scalars that are no size."""
    scalar_vars = {a.name: str(a.value) for a in args if a.value is not None and a.value in names}
    literal_args = [a for a in args if a.value is not None and a.value not in names and not a.dtype.startswith(_TODO)]
    problems = []
    for c in chosen:
        sizes: dict[str, int] = {}
        for scalar, var in scalar_vars.items():
            value = c.scalars.get(scalar)
            if isinstance(value, int) and not isinstance(value, bool):
                sizes.setdefault(var, value)
        for dims, got in ((basis.grid, c.launch.grid), (basis.block, c.launch.block)):
            for text, value in zip(dims, got, strict=False):
                if text in names and text not in sizes:
                    sizes[text] = value
        for var, name in bound.items():
            arg = next(a for a in args if a.name == name)
            sizes[var] = c.extents[name] // dtype_size(arg.dtype)
        for var in names:
            if var not in sizes:
                sizes[var] = basis.sizes[0][var]
                notes.append(f"no launch argument gives {var}; it keeps the drafted {basis.sizes[0][var]}")
        snapshot = {}
        if c.launch.data is not None and data_dir is not None:  # what the kernel reads: its outputs' are no input
            for i, (file, _n) in c.launch.data.files.items():
                if i < len(args) and args[i].role is not Role.OUT:
                    snapshot[args[i].name] = str(data_dir / c.launch.data.folder / file)
        problems.append(
            _Problem(sizes, c.launch.grid, c.launch.block, c.launch.smem, c.launch.count, dict(c.extents), snapshot)
        )
    values = _literal_values(literal_args, chosen, problems, notes)
    return problems, values


def _literal_values(
    args: Sequence[ArgSpec], chosen: Sequence[Captured], problems: list[_Problem], notes: list[str]
) -> dict[str, str]:
    """The value of each scalar that is no size: one value for all launches is written in; an integer that
    varies becomes a size variable of its own; a float that varies keeps the most launched value."""
    out = {}
    for arg in args:
        values = [c.scalars.get(arg.name) for c in chosen]
        if any(v is None for v in values):
            continue
        if len(set(values)) > 1 and arg.dtype in INTEGER_DTYPES:
            for p, v in zip(problems, values, strict=True):
                p.sizes[arg.name] = int(v)  # type: ignore[arg-type]
            out[arg.name] = arg.name
            continue
        heaviest = max(zip(values, chosen, strict=True), key=lambda vc: vc[1].launch.count)[0]
        if len(set(values)) > 1:
            seen = ", ".join(sorted({repr(v) for v in values}))
            notes.append(f"{arg.name} varies over the launches ({seen}); the spec uses {heaviest!r}")
        out[arg.name] = _literal(heaviest, arg.dtype)  # type: ignore[arg-type]
    return out


def _literal(value: Number, dtype: str) -> str:
    if (size := struct_bytes(dtype)) is not None:  # little-endian bytes, as the struct lies in memory
        return f"0x{int(value):0{2 * size}x}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.7g}" if dtype in ("float32", "float16", "bfloat16") else repr(value)
    return str(value)


def _sized(text: str, sizes: Mapping[str, str]) -> str:
    """`text` with `sizeof(T)` of a type parameter whose captured C type is known written as its bytes."""
    return SIZEOF.sub(lambda m: sizes.get(m.group(1), m.group(0)), text)


def _fit_dims(
    key: str,
    basis: tuple[str, ...],
    values: Sequence[tuple[int, int, int]],
    problems: list[_Problem],
    fixed: Mapping[str, int],
    bound: Collection[str],
    notes: list[str],
) -> tuple[str, ...]:
    """A grid or block: per axis, an expression that gives every captured value."""
    if len(basis) == 1 and basis[0].startswith(_TODO):
        basis = _written_dims(basis[0])
    axes = max([len(basis)] + [i + 1 for v in values for i in range(3) if v[i] != 1])
    dims = [
        _fit(
            f"{key}_{_AXES[i]}",
            basis[i] if i < len(basis) else "1",
            [v[i] for v in values],
            problems,
            fixed,
            bound,
            notes,
        )
        for i in range(axes)
    ]
    while len(dims) > 1 and dims[-1] == "1":
        dims.pop()
    return tuple(dims)


def _fit(
    key: str,
    basis: str,
    values: Sequence[int],
    problems: list[_Problem],
    fixed: Mapping[str, int],
    bound: Collection[str],
    notes: list[str],
) -> str:
    """The basis expression where it gives every captured value, else the simplest expression over the sizes
    (no allocation bound: a launch does not follow one) that does, else a size variable `key` holding each
    problem's value (per-size literals)."""
    envs = [{**fixed, **p.sizes} for p in problems]
    for candidate in _candidates(basis, values, {k: v for k, v in problems[0].sizes.items() if k not in bound}):
        if all(_gives(candidate, env, v) for env, v in zip(envs, values, strict=True)):
            if candidate != basis and not basis.startswith(_TODO) and basis != "1":
                notes.append(
                    f"{key.split('_')[0]} {basis!r} does not give the launched values; it is now {candidate!r}"
                )
            return candidate
    for p, v in zip(problems, values, strict=True):
        p.sizes[key] = v
    notes.append(f"no expression over the sizes gives every launched {key}: each size carries it as `{key}`")
    return key


_WRITTEN = re.compile(r"the launch writes `(.+)`")
_QUALIFIER = re.compile(r"\b(?:\w+::)+")


def _written_dims(todo: str) -> tuple[str, ...]:
    """Per axis, what the launch writes, as the drafter quoted it in its TODO (`dim3(a, b)` → a, b): a
    candidate once namespaces are dropped (`ns::ceil_div` → `ceil_div`), kept only if every launch agrees."""
    m = _WRITTEN.search(todo)
    if m is None:
        return (todo,)
    text = _QUALIFIER.sub("", m.group(1)).strip()
    inner = re.fullmatch(r"dim3\s*\((.*)\)", text)
    parts = split_top_level(inner.group(1)) if inner else [text]
    return tuple(f"{_TODO}: {p.strip()}" for p in parts)


def _candidates(basis: str, values: Sequence[int], sizes: Mapping[str, int]) -> list[str]:
    names = sorted(sizes)
    written = basis.removeprefix(f"{_TODO}:").strip() if basis.startswith(f"{_TODO}:") else None
    out = [written] if written else [] if basis.startswith(_TODO) else [basis]
    if len(set(values)) == 1:
        out.append(str(values[0]))
    out += names
    for n in names:
        for c in _FACTORS:
            out += [f"ceil_div({n}, {c})", f"{n} // {c}", f"{n} * {c}", f"min({n}, {c})"]
    out += [f"{a} * {b}" for i, a in enumerate(names) for b in names[i:]]
    return out


def _gives(text: str, env: Mapping[str, Number], value: int) -> bool:
    try:
        got = compile_expr(text).evaluate(env)
    except ExpressionError:
        return False
    return not isinstance(got, bool) and got == value


def _merged(problems: list[_Problem], bound: Collection[str]) -> list[_Problem]:
    """Launches with the same size values (allocation bounds aside) are one problem; their counts add up, the
    smallest allocation holds."""
    out: dict[tuple[tuple[str, int], ...], _Problem] = {}
    for p in problems:
        key = tuple(sorted((k, v) for k, v in p.sizes.items() if k not in bound))
        kept = out.get(key)
        if kept is None:
            out[key] = _Problem(dict(p.sizes), p.grid, p.block, p.smem, p.count, dict(p.extents), dict(p.snapshot))
            continue
        kept.sizes.update({k: min(v, p.sizes[k]) for k, v in kept.sizes.items() if k in bound})
        kept.count += p.count
        kept.extents = {k: min(v, p.extents.get(k, v)) for k, v in kept.extents.items()}
        kept.snapshot = kept.snapshot or p.snapshot
    return sorted(out.values(), key=lambda p: tuple(v for k, v in p.sizes.items() if k not in bound))


def _without_unused_launch_params(spec: KernelSpec, notes: list[str]) -> KernelSpec:
    """The spec without the launch parameters no fitted grid, block or shared memory uses any more (the
    program's launch follows no expression they are in), nor the constraints that name them."""
    if spec.space is None:
        return spec
    used = set().union(*(compile_expr(t).names for t in (*spec.grid, *spec.block, spec.shared_mem)))
    gone = {p.name for p in spec.space.params if p.binding is Binding.LAUNCH and p.name not in used}
    if not gone:
        return spec
    notes.append(f"{', '.join(sorted(gone))} no longer searched: the launches follow no expression over it")
    kept = tuple(c for c in spec.space.constraints if not compile_expr(c).names & gone)
    space = Space(tuple(p for p in spec.space.params if p.name not in gone), kept)
    return replace(spec, space=space, constraints=tuple(c for c in spec.constraints if c in kept))


def _check_extents(spec: KernelSpec, path: Path, problems: Sequence[_Problem]) -> None:
    """Every array's shape fits the allocation the program passed for it, at every captured size."""
    for p in problems:
        shapes = spec.array_shapes(p.sizes)
        for arg in spec.args:
            extent = p.extents.get(arg.name)
            if arg.shape is None or extent is None:
                continue
            need = math.prod(shapes[arg.name]) * dtype_size(arg.dtype)
            if need > extent:
                sizes = ", ".join(f"{k} = {v}" for k, v in p.sizes.items())
                raise CaptureError(
                    f"{path}: kernel {spec.kernel}: argument {arg.name!r} has shape [{', '.join(arg.shape)}] = "
                    f"{need} bytes at {sizes}, but the program passed an allocation of {extent} bytes: fix the "
                    f"shape in the spec"
                )


def _todos(spec: KernelSpec) -> list[tuple[str, str]]:
    texts: list[tuple[str, str]] = [("grid", t) for t in spec.grid] + [("block", t) for t in spec.block]
    texts += [(f"template_args.{k}", v) for k, v in spec.template_args.items()]
    for a in spec.args:
        texts += [(f"{a.name}.dtype", a.dtype), (f"{a.name}.value", a.value or "")]
        texts += [(f"{a.name}.shape", s) for s in a.shape or ()]
    return [(k, t) for k, t in texts if t.startswith(_TODO)]
