"""Reading `<stem>.tune.toml` files into KernelSpecs, with errors that name the file, line and key."""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from cutune.errors import ExpressionError, SpecError
from cutune.limits import BUILTIN, DeviceLimits
from cutune.spec.locate import KeyPath, dotted, key_lines, line_of
from cutune.spec.model import ArgSpec, IncludeRules, Init, KernelSpec, Role, SpecFile, Tolerance
from cutune.template.dtypes import C_TYPES, DTYPES, INTEGER_DTYPES, struct_bytes
from cutune.template.expr import CONSTANTS, FUNCTIONS, compile_expr
from cutune.template.model import PDL, Binding, Space, TunableParam, Value

WEIGHT = "weight"  # a size entry's weight in the overall figure, not a size variable
TODO = "TODO"  # a string value starting with this is a placeholder left by `draft_spec`

KERNEL_KEYS = (
    "grid", "block", "shared_mem", "template_args", "sizes", "tolerance", "reference", "bytes_moved",
    "flags", "defines", "include_dirs", "includes", "constraints", "args", "params", "multiple_of",
)  # fmt: skip
INCLUDES_KEYS = ("drop", "substitute")
ARG_KEYS = ("name", "dtype", "role", "shape", "value", "init", "low", "high", "scale", "data", "bound")
PARAM_KEYS = ("values", "default", "binding", "flag", "arg", "description", "try_first")
TOLERANCE_KEYS = ("rtol", "atol")
LIMIT_NAMES = frozenset(DeviceLimits(arch="").as_names())

_KINDS = {
    bool: "a boolean",
    int: "an integer",
    float: "a float",
    str: "a string",
    list: "an array",
    dict: "a table",
}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column \d+\)$")


def spec_path_for(source_path: str | os.PathLike[str]) -> Path:
    """The spec file of a source: `<stem>.tune.toml` beside `<stem>.cu`."""
    return Path(source_path).with_suffix(".tune.toml")


def load_spec(path: str | os.PathLike[str]) -> SpecFile:
    """Read and validate a spec file; raises SpecError naming file, line and key."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError("no tuning spec here (write one, or draft it from the kernel)", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"cannot read the spec: {e}", path=str(path)) from None
    return parse_spec(text, path)


def parse_spec(text: str, path: str | os.PathLike[str] | None = None) -> SpecFile:
    """Parse and validate spec text; `path` is only used in messages and kept in the result."""
    where = None if path is None else str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message = str(e)
        m = _TOML_POSITION.search(message)
        line = int(m.group(1)) if m else text.count("\n") + 1
        raise SpecError(f"not valid TOML: {_TOML_POSITION.sub('', message)}", path=where, line=line) from None
    reader = _Reader(text, where)
    reader.check_keys(data, (), ("kernel",))
    kernels = reader.table(data.get("kernel", {}), ("kernel",))
    if not kernels:
        raise reader.error((), "no [kernel.<name>] table: a spec describes at least one kernel")
    return SpecFile(where, {name: _read_kernel(reader, name, raw) for name, raw in kernels.items()})


class _Reader:
    """Typed access to the parsed TOML with errors positioned in the original text."""

    def __init__(self, text: str, path: str | None) -> None:
        self.path = path
        self.lines = key_lines(text)

    def error(self, at: KeyPath, message: str) -> SpecError:
        return SpecError(message, path=self.path, line=line_of(self.lines, at) or 1, key=dotted(at) or None)

    def check_keys(self, table: dict[str, Any], at: KeyPath, allowed: Collection[str]) -> None:
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, list(allowed), n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(allowed)}"
                raise self.error((*at, key), f"unknown key {key!r}; {hint}")

    def table(self, value: Any, at: KeyPath, allowed: Collection[str] | None = None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(at, f"expected a table, got {_kind(value)}")
        if allowed is not None:
            self.check_keys(value, at, allowed)
        return value

    def array(self, value: Any, at: KeyPath) -> list[Any]:
        if not isinstance(value, list):
            raise self.error(at, f"expected an array, got {_kind(value)}")
        return value

    def string(self, value: Any, at: KeyPath) -> str:
        if not isinstance(value, str):
            raise self.error(at, f"expected a string, got {_kind(value)}")
        return value

    def strings(self, value: Any, at: KeyPath) -> tuple[str, ...]:
        return tuple(self.string(v, (*at, i)) for i, v in enumerate(self.array(value, at)))

    def text_table(self, value: Any, at: KeyPath) -> dict[str, str]:
        """A table of C++ text values; numbers and bools are written as C++ would spell them."""
        out = {}
        for key, v in self.table(value, at).items():
            if isinstance(v, bool):
                v = str(v).lower()
            elif isinstance(v, int | float):
                v = str(v)
            out[key] = self.string(v, (*at, key))
        return out

    def boolean(self, value: Any, at: KeyPath) -> bool:
        if not isinstance(value, bool):
            raise self.error(at, f"expected true or false, got {_kind(value)}")
        return value

    def number(self, value: Any, at: KeyPath) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(at, f"expected a number, got {_kind(value)}")
        return float(value)

    def choice(self, value: Any, at: KeyPath, options: Collection[str], aliases: dict[str, str] | None = None) -> str:
        """One of `options`; a wrong value gets a suggestion (from `aliases` first, e.g. C type names)."""
        text = self.string(value, at)
        if text not in options:
            close = difflib.get_close_matches(text, list(options), n=1)
            if aliases and text in aliases:
                close = [aliases[text]]
            hint = f"did you mean {close[0]!r}?" if close else f"one of: {', '.join(options)}"
            raise self.error(at, f"{text!r} is not allowed; {hint}")
        return text

    def identifier(self, value: Any, at: KeyPath, what: str) -> str:
        text = self.string(value, at)
        if not _IDENTIFIER.fullmatch(text):
            raise self.error(at, f"{what} {text!r} is not an identifier")
        return text

    def expression(self, value: Any, at: KeyPath, known: Collection[str]) -> str:
        """An expression (string or number) whose names are all in `known`, as text."""
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.error(at, f"expected an expression (string or number), got {_kind(value)}")
        text = value if isinstance(value, str) else str(value)
        try:
            compile_expr(text).check_names(known)
        except ExpressionError as e:
            raise self.error(at, str(e)) from None
        return text


def _kind(value: Any) -> str:
    return _KINDS.get(type(value), type(value).__name__)


def _todo_keys(value: Any, at: KeyPath) -> Iterator[KeyPath]:
    if isinstance(value, str) and value.startswith(TODO):
        yield at
    elif isinstance(value, dict):
        for key, v in value.items():
            yield from _todo_keys(v, (*at, key))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _todo_keys(v, (*at, i))


def _read_kernel(reader: _Reader, name: str, raw: Any) -> KernelSpec:
    at: KeyPath = ("kernel", name)
    table = reader.table(raw, at, KERNEL_KEYS)
    todos = list(_todo_keys(table, at))
    if todos:
        listed = ", ".join(dotted(t) for t in todos)
        raise reader.error(todos[0], f"fill in the TODO placeholders first: {listed}")
    for required in ("grid", "block", "sizes", "args"):
        if required not in table:
            raise reader.error(at, f"missing key {required!r}")
    sizes = _read_sizes(reader, table["sizes"], (*at, "sizes"))
    size_names = set(sizes[0])
    multiple_of = _read_multiple_of(reader, table.get("multiple_of", {}), at, sizes)
    params = _read_params(reader, table.get("params", {}), (*at, "params"), size_names)
    param_names = {p.name for p in params}
    launch_names = size_names | param_names | LIMIT_NAMES
    args = _read_args(reader, table["args"], (*at, "args"), size_names)

    def dims(key: str) -> tuple[str, ...]:
        value = table[key]
        items = value if isinstance(value, list) else [value]
        if not 1 <= len(items) <= 3:
            raise reader.error((*at, key), f"{key} takes 1 to 3 expressions, got {len(items)}")
        where = (lambda i: (*at, key, i)) if isinstance(value, list) else (lambda i: (*at, key))
        return tuple(reader.expression(v, where(i), launch_names) for i, v in enumerate(items))

    grid, block = dims("grid"), dims("block")
    shared_mem = reader.expression(table.get("shared_mem", "0"), (*at, "shared_mem"), launch_names)
    constraints = tuple(
        reader.expression(c, (*at, "constraints", i), launch_names)
        for i, c in enumerate(reader.array(table.get("constraints", []), (*at, "constraints")))
    )
    _check_launch_params(reader, params, (*grid, *block, shared_mem), (*at, "params"))
    bytes_moved = table.get("bytes_moved")
    if bytes_moved is not None:
        bytes_moved = reader.expression(bytes_moved, (*at, "bytes_moved"), size_names | param_names)
    spec = KernelSpec(
        kernel=name,
        args=args,
        sizes=sizes,
        grid=grid,
        block=block,
        shared_mem=shared_mem,
        template_args=reader.text_table(table.get("template_args", {}), (*at, "template_args")),
        space=Space(params, constraints) if params else None,
        tolerance=_read_tolerance(reader, table.get("tolerance"), (*at, "tolerance")),
        reference=reader.string(table.get("reference", "original"), (*at, "reference")),
        bytes_moved=bytes_moved,
        flags=reader.strings(table.get("flags", []), (*at, "flags")),
        defines=reader.text_table(table.get("defines", {}), (*at, "defines")),
        include_dirs=_beside(reader.path, reader.strings(table.get("include_dirs", []), (*at, "include_dirs"))),
        includes=_read_includes(reader, table.get("includes", {}), (*at, "includes")),
        path=reader.path,
        constraints=constraints,
        multiple_of=multiple_of,
        weights=_read_weights(reader, table["sizes"], (*at, "sizes")),
        line=line_of(reader.lines, at),
        lines={dotted(p[2:]): n for p, n in reader.lines.items() if p[:2] == at and len(p) > 2},
    )
    for a in spec.args:
        if a.data and len(a.data) != len(spec.sizes):
            raise reader.error(
                (*at, "args", spec.args.index(a), "data"),
                f"{a.name!r} lists data for {len(a.data)} sizes; the spec has {len(spec.sizes)}",
            )
    _check_every_size(spec)
    return spec


MAX_ELEMENTS = 1 << 32  # per array: 16 GiB of fp32; beyond, a size is a typo, not a workload
MAX_GRID = (2**31 - 1, 65535, 65535)  # CUDA's grid limits, the same on every GPU cutune tunes on


def _check_every_size(spec: KernelSpec) -> None:
    """Evaluate the spec's expressions at every size, as a GPU run would before its first launch, so that a
    spec that cannot run fails here, with or without a GPU: division by zero, a fractional or negative
    dimension, an array over MAX_ELEMENTS, a grid over CUDA's limits or a block over the threads a block may
    have. Grid and block are evaluated with the parameters' defaults (the original configuration) where the
    spec lists them; parameters of the templatize recipes are unknown here."""
    defaults = dict(spec.space.default()) if spec.space is not None else {}
    numbers = {k: v for k, v in defaults.items() if not isinstance(v, str)}
    # a representative GPU (the fewest SMs of the built-in parts): launches that scale with `sm_count` need one
    limits = min(BUILTIN.values(), key=lambda d: d.sm_count)
    launch_texts = (*spec.grid, *spec.block, spec.shared_mem)
    for size in spec.sizes:
        at = ", ".join(f"{k}={v}" for k, v in size.items())
        try:
            shapes = spec.array_shapes(size)
            scalars = spec.scalar_values(size)
            spec.moved_bytes(size, numbers)
            names = {**limits.as_names(), **size, **numbers}
            known = all(compile_expr(t).names <= names.keys() for t in launch_texts)
            grid, block, _ = spec.launch(names) if known else ((1, 1, 1), (1, 1, 1), 0)
        except SpecError as e:
            raise SpecError(f"{e.detail} at size {at}", path=e.path, line=e.line, key=e.key) from None
        for i, a in enumerate(spec.args):
            struct = struct_bytes(a.dtype)
            if struct is not None and not (isinstance(scalars[a.name], int) and 0 <= scalars[a.name] < 256**struct):
                raise spec.error(
                    f"args[{i}].value",
                    f"{a.name} is {struct} bytes: its value must be an integer from 0 to 0x{'ff' * struct}, "
                    f"got {scalars[a.name]!r} at size {at}",
                )
            elements = 1
            for n in shapes.get(a.name, ()):
                elements *= n
            if elements > MAX_ELEMENTS:
                raise spec.error(
                    f"args[{i}].shape",
                    f"{a.name} has {elements:,} elements at size {at}: more than the {MAX_ELEMENTS:,} allowed",
                )
        if any(g > m for g, m in zip(grid, MAX_GRID, strict=True)):
            raise spec.error("grid", f"grid {grid} at size {at} is over CUDA's limits {MAX_GRID}")
        if block[0] * block[1] * block[2] > limits.max_threads_per_block:
            raise spec.error(
                "block", f"block {block} at size {at} has more than {limits.max_threads_per_block} threads"
            )


def _check_launch_params(
    reader: _Reader, params: tuple[TunableParam, ...], launch: tuple[str, ...], at: KeyPath
) -> None:
    used = set().union(*(compile_expr(t).names for t in launch))
    for p in params:
        # PDL bound to the launch alone: a kernel that waits on griddepcontrol itself, launched with or without
        # the attribute (see template/recipes/pdl.py)
        if p.binding is Binding.LAUNCH and p.name not in used and p.name != PDL:
            raise reader.error(
                (*at, p.name, "binding"),
                f"{p.name} has binding 'launch' but no grid/block/shared_mem uses it",
            )


def _check_name(reader: _Reader, name: str, at: KeyPath, what: str) -> None:
    if not _IDENTIFIER.fullmatch(name):
        raise reader.error(at, f"{what} {name!r} is not an identifier")
    if name in LIMIT_NAMES or name in CONSTANTS or name in FUNCTIONS:
        raise reader.error(at, f"{what} {name!r} would hide the built-in name {name!r}; rename it")


def _read_sizes(reader: _Reader, value: Any, at: KeyPath) -> tuple[dict[str, int], ...]:
    entries = reader.array(value, at)
    if not entries:
        raise reader.error(at, "sizes is empty: give at least one problem size")
    sizes: list[dict[str, int]] = []
    for i, raw in enumerate(entries):
        entry = {k: v for k, v in reader.table(raw, (*at, i)).items() if k != WEIGHT}
        for key, v in entry.items():
            _check_name(reader, key, (*at, i, key), "size variable")
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise reader.error((*at, i, key), f"size {key} must be a non-negative integer, got {v!r}")
        if sizes and set(entry) != set(sizes[0]):
            missing = ", ".join(sorted(set(sizes[0]) - set(entry))) or "none"
            extra = ", ".join(sorted(set(entry) - set(sizes[0]))) or "none"
            raise reader.error(
                (*at, i),
                f"every size must set the same variables as sizes[0] (missing: {missing}; extra: {extra})",
            )
        sizes.append(dict(entry))
    return tuple(sizes)


def _read_weights(reader: _Reader, entries: list[Any], at: KeyPath) -> tuple[float, ...]:
    """Each size's `weight` in the overall figure (default 1); empty when no size gives one."""
    if not any(WEIGHT in entry for entry in entries):
        return ()
    weights = []
    for i, entry in enumerate(entries):
        weight = reader.number(entry.get(WEIGHT, 1.0), (*at, i, WEIGHT))
        if weight <= 0:
            raise reader.error((*at, i, WEIGHT), f"weight must be positive, got {weight:g}")
        weights.append(weight)
    return tuple(weights)


def _read_multiple_of(reader: _Reader, value: Any, at: KeyPath, sizes: tuple[dict[str, int], ...]) -> dict[str, int]:
    """`multiple_of = { d = 8 }`: divisors the kernel relies on; every listed size must respect them."""
    here = (*at, "multiple_of")
    out: dict[str, int] = {}
    for name, m in reader.table(value, here).items():
        if name not in sizes[0]:
            raise reader.error((*here, name), f"{name!r} is not a size variable (sizes set: {', '.join(sizes[0])})")
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise reader.error((*here, name), f"multiple_of.{name} must be a positive integer, got {m!r}")
        for i, size in enumerate(sizes):
            if size[name] % m:
                raise reader.error(
                    (*at, "sizes", i, name), f"size {name} = {size[name]} is not a multiple of {m} (multiple_of.{name})"
                )
        out[name] = m
    return out


def _read_params(reader: _Reader, value: Any, at: KeyPath, size_names: set[str]) -> tuple[TunableParam, ...]:
    params = []
    for name, raw in reader.table(value, at).items():
        here = (*at, name)
        _check_name(reader, name, here, "parameter")
        if name in size_names:
            raise reader.error(here, f"parameter {name!r} has the name of a size variable")
        table = reader.table(raw, here, PARAM_KEYS)
        for required in ("values", "default"):
            if required not in table:
                raise reader.error(here, f"missing key {required!r}")
        values = tuple(
            _read_value(reader, v, (*here, "values", i))
            for i, v in enumerate(reader.array(table["values"], (*here, "values")))
        )
        if not values:
            raise reader.error((*here, "values"), "values is empty")
        if len({type(v) for v in values}) > 1:
            raise reader.error((*here, "values"), "values mix types (use all integers, all booleans or all strings)")
        if len(set(values)) != len(values):
            raise reader.error((*here, "values"), "values repeat")
        default = _read_value(reader, table["default"], (*here, "default"))
        if default not in values or type(default) is not type(values[0]):
            kind = "" if type(default) is type(values[0]) else f" ({_kind(default)}, not {_kind(values[0])} like them)"
            raise reader.error((*here, "default"), f"default {default!r} is not one of the values {list(values)}{kind}")
        try_first = _read_value(reader, table["try_first"], (*here, "try_first")) if "try_first" in table else None
        if try_first is not None and (try_first not in values or type(try_first) is not type(values[0])):
            raise reader.error((*here, "try_first"), f"try_first {try_first!r} is not one of the values {list(values)}")
        binding = Binding(
            reader.choice(table.get("binding", "template"), (*here, "binding"), [b.value for b in Binding])
        )
        flag = reader.string(table["flag"], (*here, "flag")) if "flag" in table else None
        arg = reader.string(table["arg"], (*here, "arg")) if "arg" in table else None
        if binding is Binding.FLAG and flag is None:
            raise reader.error((*here, "binding"), "binding 'flag' needs a `flag` (e.g. \"-maxrregcount={}\")")
        if binding is Binding.SPECIALIZE and arg not in size_names:
            raise reader.error(
                (*here, "arg" if arg else "binding"),
                f"binding 'specialize' needs `arg` naming a size variable, got {arg!r}",
            )
        params.append(
            TunableParam(
                name=name,
                values=values,
                default=default,
                binding=binding,
                flag=flag,
                arg=arg,
                description=reader.string(table.get("description", ""), (*here, "description")),
                try_first=try_first,
            )
        )
    return tuple(params)


def _read_value(reader: _Reader, value: Any, at: KeyPath) -> Value:
    if not isinstance(value, int | str):  # bool is an int
        raise reader.error(at, f"a parameter value must be an integer, boolean or string, got {_kind(value)}")
    return value


def _read_args(reader: _Reader, value: Any, at: KeyPath, size_names: set[str]) -> tuple[ArgSpec, ...]:
    args: list[ArgSpec] = []
    for i, raw in enumerate(reader.array(value, at)):
        here = (*at, i)
        table = reader.table(raw, here, ARG_KEYS)
        for required in ("name", "dtype"):
            if required not in table:
                raise reader.error(here, f"missing key {required!r}")
        name = reader.identifier(table["name"], (*here, "name"), "arg name")
        if any(a.name == name for a in args):
            raise reader.error((*here, "name"), f"arg {name!r} is listed twice")
        if ("shape" in table) == ("value" in table):
            raise reader.error(here, f"arg {name!r} needs either `shape` (an array) or `value` (a scalar)")
        role = Role(reader.choice(table.get("role", "in"), (*here, "role"), [r.value for r in Role]))
        common: dict[str, Any] = {
            "name": name,
            "dtype": _dtype(reader, table, (*here, "dtype")),
            "role": role,
            "line": line_of(reader.lines, here),
        }
        if "value" in table:
            extra = [k for k in ("init", "low", "high", "scale", "data", "bound") if k in table]
            if extra:
                raise reader.error((*here, extra[0]), f"{extra[0]} applies to arrays; scalar {name!r} has a value")
            if role is not Role.IN:
                raise reader.error((*here, "role"), f'scalar {name!r} can only be an input (role = "in")')
            args.append(ArgSpec(**common, value=reader.expression(table["value"], (*here, "value"), size_names)))
            continue
        dims = reader.array(table["shape"], (*here, "shape"))
        if not dims:
            raise reader.error((*here, "shape"), f"array {name!r} needs at least one dimension")
        shape = tuple(reader.expression(d, (*here, "shape", j), size_names) for j, d in enumerate(dims))
        low = reader.number(table.get("low", -1.0), (*here, "low"))
        high = reader.number(table.get("high", 1.0), (*here, "high"))
        init = Init(reader.choice(table.get("init", "normal"), (*here, "init"), [m.value for m in Init]))
        if init in (Init.UNIFORM, Init.RANDINT) and not low < high:
            raise reader.error(
                (*here, "high" if "high" in table else "low"), f"low ({low}) must be below high ({high})"
            )
        if init is Init.PERMUTATION and common["dtype"] not in INTEGER_DTYPES:
            raise reader.error((*here, "init"), f"init 'permutation' needs an integer dtype, not {common['dtype']!r}")
        scale = reader.number(table.get("scale", 1.0), (*here, "scale"))
        data = _read_data(reader, table.get("data", []), (*here, "data"), name, role)
        bound = reader.boolean(table.get("bound", False), (*here, "bound"))
        if bound and role is Role.OUT:  # the elements past what the kernel writes are never written
            raise reader.error((*here, "role"), f'bound array {name!r} is written: declare it role = "inout"')
        args.append(ArgSpec(**common, shape=shape, init=init, low=low, high=high, scale=scale, data=data, bound=bound))
    if not args:
        raise reader.error(at, "args is empty: list the kernel's parameters in order")
    if not any(a.is_array and a.role is not Role.IN for a in args):
        raise reader.error(at, 'no array arg has role "out" or "inout": there is nothing to check')
    return tuple(args)


def _dtype(reader: _Reader, table: dict[str, Any], at: KeyPath) -> str:
    """An element dtype, or `bytesN` for a scalar struct passed by value (its value: the bytes as an integer)."""
    value = table["dtype"]
    if isinstance(value, str) and struct_bytes(value) is not None:
        if "shape" in table:
            raise reader.error(at, f"{value} is a struct passed by value: it takes a `value`, not a `shape`")
        return value
    return reader.choice(value, at, DTYPES, C_TYPES)


def _read_data(reader: _Reader, value: Any, at: KeyPath, name: str, role: Role) -> tuple[str, ...]:
    """An array's per-size data files (relative to the spec file), each present; "" where a size has none."""
    files = reader.strings(value, at)
    if files and role is Role.OUT:
        raise reader.error(at, f"output {name!r} is written by the kernel: data applies to what it reads")
    for i, f in enumerate(files):
        path = _beside(reader.path, (f,))[0] if f else ""
        if path and not os.path.isfile(path):
            raise reader.error((*at, i), f"{name!r}: data file {f!r} not found (from `cutune capture --data`)")
    return tuple(_beside(reader.path, (f,))[0] if f else "" for f in files)


def _read_tolerance(reader: _Reader, value: Any, at: KeyPath) -> Tolerance | None:
    if value is None:
        return None
    table = reader.table(value, at, TOLERANCE_KEYS)
    for key in TOLERANCE_KEYS:
        if key not in table:
            raise reader.error(at, f"missing key {key!r}")
        if reader.number(table[key], (*at, key)) < 0:
            raise reader.error((*at, key), f"{key} must not be negative")
    return Tolerance(rtol=float(table["rtol"]), atol=float(table["atol"]))


def _read_includes(reader: _Reader, value: object, at: KeyPath) -> IncludeRules:
    """`includes = { drop = ["a.h"], substitute = { "b.h" = "c.h" } }`."""
    table = reader.table(value, at, INCLUDES_KEYS)
    drop = reader.strings(table.get("drop", []), (*at, "drop"))
    written = reader.table(table.get("substitute", {}), (*at, "substitute"))
    substitute = {k: reader.string(v, (*at, "substitute", k)) for k, v in written.items()}
    both = sorted(set(drop) & set(substitute))
    if both:
        raise reader.error(at, f"{', '.join(both)} is both dropped and substituted; keep one")
    return IncludeRules(drop, substitute)


def _beside(spec_path: str | None, dirs: tuple[str, ...]) -> tuple[str, ...]:
    """Relative include folders resolved against the spec file's folder, not the current directory."""
    if spec_path is None:
        return dirs
    base = os.path.dirname(os.path.abspath(spec_path))
    return tuple(d if os.path.isabs(d) else os.path.normpath(os.path.join(base, d)) for d in dirs)
