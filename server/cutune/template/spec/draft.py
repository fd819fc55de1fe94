"""Guessing a first spec from a kernel's signature and launch site, with TODO placeholders where unsure."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from cutune.errors import ExpressionError
from cutune.template.dtypes import C_TYPES, parse_c_type
from cutune.template.expr import compile_expr
from cutune.template.model import Space
from cutune.template.spec.load import LIMIT_NAMES, TODO
from cutune.template.spec.model import ArgSpec, KernelSpec, Role

if TYPE_CHECKING:  # typing only: drafting a spec needs no CUDA parser loaded
    from cutune.cuda.model import Kernel, LaunchSite

INTEGER_DTYPES = frozenset({"int8", "uint8", "int32", "uint32", "int64"})
ARRAY_ELEMENTS = 1 << 20  # example element count of a drafted array dimension
SCALAR_SIZE = 4096  # example value of a drafted integer parameter that is no array dimension

_DIM3 = re.compile(r"dim3\s*\((.*)\)\s*$", re.DOTALL)
_INTEGER_LITERAL = re.compile(r"\d+[uUlL]*")


def draft_spec(kernel: Kernel, launch: LaunchSite | None, space: Space | None) -> KernelSpec:
    """A spec guessed from the signature (pointers → arrays, integers → sizes) and the launch text."""
    template_args, type_names = _template_args(kernel, launch, space)
    scalars = [p for p in kernel.params if not parse_c_type(p.type).pointer]
    integer_params = [p.name for p in scalars if _dtype(p.type, type_names) in INTEGER_DTYPES]
    # with one integer parameter (`n`) every array is likely n long; else each array gets its own size
    shared = integer_params[0] if len(integer_params) == 1 else None
    sizes: dict[str, int] = {}
    args = []
    for p in kernel.params:
        dtype = _dtype(p.type, type_names)
        c_type = parse_c_type(p.type)
        if c_type.pointer:
            var = shared or f"n_{p.name}"
            sizes[var] = ARRAY_ELEMENTS
            role = Role.IN if c_type.const else Role.OUT
            args.append(ArgSpec(p.name, dtype or "float32", role, shape=(var,)))
        elif dtype in INTEGER_DTYPES:
            sizes.setdefault(p.name, SCALAR_SIZE)
            args.append(ArgSpec(p.name, dtype, value=p.name))
        elif dtype is not None:
            args.append(ArgSpec(p.name, dtype, value="1.0"))
        else:
            unknown = f"{TODO}: `{p.type}` is no known element type; pick a dtype and a value"
            args.append(ArgSpec(p.name, unknown, value=unknown))
    known = set(sizes) | LIMIT_NAMES | ({p.name for p in space.params} if space else set())
    return KernelSpec(
        kernel=kernel.name,
        args=tuple(args),
        sizes=(sizes,),
        grid=_launch_dims(launch.grid if launch else None, known, "grid"),
        block=_launch_dims(launch.block if launch else None, known, "block"),
        shared_mem=_shared_mem(launch, known),
        template_args=template_args,
        space=space,
        constraints=space.constraints if space else (),
    )


def _template_args(
    kernel: Kernel, launch: LaunchSite | None, space: Space | None
) -> tuple[dict[str, str], dict[str, str]]:
    """The fixed template arguments, and each type parameter's C type (from the launch, else float)."""
    tuned = {p.name for p in space.params} if space else set()
    written = launch.template_args if launch else ()
    args: dict[str, str] = {}
    types: dict[str, str] = {}
    for i, t in enumerate(kernel.template_params):
        text = written[i].strip() if i < len(written) else None
        if t.kind.value == "type":
            c_type = text if text in C_TYPES else (t.default or "float")
            types[t.name] = c_type
            args[t.name] = c_type
        elif t.name in tuned or (text is None and t.default is not None):
            continue
        elif text is not None and (_INTEGER_LITERAL.fullmatch(text) or text in ("true", "false")):
            args[t.name] = text.rstrip("uUlL")
        else:
            passed = f"the launch passes `{text}`" if text else "no launch passes it"
            args[t.name] = f"{TODO}: the value of {t.name} ({passed})"
    return args, types


def _dtype(c_type: str, type_names: dict[str, str]) -> str | None:
    """The dtype of a parameter's element type (`const T* __restrict__` → T's dtype), None if unknown."""
    base = parse_c_type(c_type).base
    base = type_names.get(base, base)
    return C_TYPES.get(base) or C_TYPES.get(base.removeprefix("std::"))


def _launch_dims(text: str | None, known: set[str], key: str) -> tuple[str, ...]:
    if text is None:
        return (f"{TODO}: no launch site found; write the {key} over the sizes and params",)
    m = _DIM3.match(text.strip())
    parts = _split_commas(m.group(1)) if m else [text]
    exprs = [_plain_expression(p, known) for p in parts]
    if None in exprs or not 1 <= len(exprs) <= 3:
        return (f"{TODO}: the launch writes `{text.strip()}`; write the {key} over the sizes and params",)
    return tuple(e for e in exprs if e is not None)


def _shared_mem(launch: LaunchSite | None, known: set[str]) -> str:
    if launch is None or launch.shared_mem is None:
        return "0"
    text = _plain_expression(launch.shared_mem, known)
    return text or f"{TODO}: the launch writes `{launch.shared_mem.strip()}` bytes of shared memory"


_TUNING_MEMBER = re.compile(r"\b(?:\w+::)*\w+_tuning::")


def _plain_expression(text: str, known: set[str]) -> str | None:
    """`text` as a spec expression when it is one over known names (`std::min` → `min`), else None."""
    # `ns::k_tuning::BLOCK_THREADS` (a templatized launch) is the parameter BLOCK_THREADS
    candidate = " ".join(_TUNING_MEMBER.sub("", text.replace("std::", "")).split())
    try:
        expr = compile_expr(candidate)
    except ExpressionError:
        return None
    return candidate if expr.names <= known else None


def _split_commas(text: str) -> list[str]:
    """Split at commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts
