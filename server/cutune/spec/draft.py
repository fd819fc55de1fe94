"""Guessing a first spec from a kernel's signature and launch site, with TODO placeholders where unsure."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from cutune.cuda.lists import split_top_level
from cutune.errors import ExpressionError
from cutune.spec.launcher import HostLaunch, shape_comment
from cutune.spec.load import LIMIT_NAMES, TODO
from cutune.spec.model import ArgSpec, Init, KernelSpec, Role
from cutune.template.dtypes import C_TYPES, INTEGER_DTYPES, dtype_size, parse_c_type
from cutune.template.expr import compile_expr
from cutune.template.model import Space

if TYPE_CHECKING:  # typing only: drafting a spec from the signature alone needs no CUDA parser loaded
    from cutune.cuda.model import Kernel, LaunchSite, Parameter, SourceModel

ARRAY_ELEMENTS = 1 << 20  # example element count of a drafted array dimension
SCALAR_SIZE = 4096  # example value of a drafted integer parameter that is no array dimension

_DIM3 = re.compile(r"dim3\s*\((.*)\)\s*$", re.DOTALL)
_NAME = re.compile(r"[A-Za-z_]\w*")
_SIZE_SOURCE = re.compile(r"\.\s*(?:size|numel)\s*\(")
_SHAPE_COMMENT = re.compile(r"[\s,)]*//\s*(\[[^\]]*\])")
_EPS = re.compile(r"(?i)^eps|epsilon")
_EPSILON = "1e-6"
_INTEGER_LITERAL = re.compile(r"\d+[uUlL]*")
SIZEOF = re.compile(r"\bsizeof\s*\(\s*([\w:]+)\s*\)")
_TENSOR_SIZE = re.compile(r"\b(\w+)\s*\.\s*size\s*\(\s*(-?\d+)\s*\)")


def draft_spec(
    kernel: Kernel, launch: LaunchSite | None, space: Space | None, model: SourceModel | None = None
) -> KernelSpec:
    """A spec guessed from the signature (pointers → arrays, integers → sizes), the launch and, with the
    file's `model`, the host launcher (tensor sizes, dim3 locals, dispatched dtype) and the kernel body
    (which arrays it reads, writes, or both)."""
    host, roles, indices = HostLaunch(), {}, {}
    if model is not None:  # reading code needs the parser: loaded only here
        from cutune.cuda.access import index_arrays, pointer_roles
        from cutune.spec.launcher import read_host

        roles = pointer_roles(model, kernel)
        indices = index_arrays(model, kernel)
        # an array written through an index keeps the rows no index names: it is read, too
        roles.update({t: "inout" for ts in indices.values() for t in ts if roles.get(t) == "out"})
        host = read_host(model, launch) if launch is not None else host
    template_args, type_names = _template_args(kernel, launch, space, host)
    scalars = [p for p in kernel.params if not parse_c_type(p.type).pointer]
    integer_params = [p.name for p in scalars if _dtype(p.type, type_names) in INTEGER_DTYPES]
    # host names the launch passes to integer parameters are those parameters in the spec
    passed = launch.args if launch is not None and len(launch.args) == len(kernel.params) else ()
    renames = {a.strip(): p.name for a, p in zip(passed, kernel.params, strict=False) if p.name in integer_params}
    keep = set(renames) | {n for n, v in host.locals.items() if _SIZE_SOURCE.search(v)}
    keep |= {p.name for p in space.params} if space else set()  # a tuned `#define` stays a parameter
    # with one integer parameter (`n`) every array is likely n long; else each array gets its own size
    shared = integer_params[0] if len(integer_params) == 1 else None
    sizes: dict[str, int] = {}
    shapes: dict[str, tuple[str, ...]] = {}  # host tensor → its drafted shape, for `t.size(i)` at the launch
    args = []
    for i, p in enumerate(kernel.params):
        dtype = _dtype(p.type, type_names)
        c_type = parse_c_type(p.type)
        if c_type.pointer:
            tensor = host.tensor(passed[i]) if passed else None
            comment = _param_comment(model, p) if model is not None else None
            shape = host.shape(tensor or "", comment) if tensor or comment else None
            guessed = shape is None
            if shape is not None:
                shape = tuple(_renamed(host.resolve(d, keep), renames) for d in shape)
                sizes.update({n: SCALAR_SIZE for d in shape for n in _NAME.findall(d) if n not in sizes})
                shapes.setdefault(tensor or "", shape)
            else:
                var = shared or f"n_{p.name}"
                sizes[var] = ARRAY_ELEMENTS
                shape = (var,)
            # an integer array that indexes another array's rows: distinct in-range values, as a slot mapping
            init = Init.PERMUTATION if p.name in indices and dtype in INTEGER_DTYPES else Init.NORMAL
            role = Role(roles.get(p.name) or ("in" if c_type.const else "out"))
            args.append(ArgSpec(p.name, dtype or "float32", role, shape=shape, init=init, guessed=guessed))
        elif dtype in INTEGER_DTYPES:
            sizes.setdefault(p.name, SCALAR_SIZE)
            args.append(ArgSpec(p.name, dtype, value=p.name))
        elif dtype == "bool":
            args.append(ArgSpec(p.name, dtype, value="true"))
        elif dtype is not None:
            args.append(ArgSpec(p.name, dtype, value=_EPSILON if _EPS.search(p.name) else "1.0"))
        else:
            unknown = f"{TODO}: `{p.type}` is no known element type; pick a dtype and a value"
            args.append(ArgSpec(p.name, unknown, value=unknown))
    known = set(sizes) | LIMIT_NAMES | ({p.name for p in space.params} if space else set())
    block = _host_dims(launch.block, host, keep, renames, shapes, type_names) if launch else None
    return KernelSpec(
        kernel=kernel.name,
        args=tuple(args),
        sizes=(sizes,),
        grid=_launch_dims(
            _host_dims(launch.grid, host, keep, renames, shapes, type_names) if launch else None, known, "grid"
        ),
        block=_launch_dims(_tuned_block(kernel, launch, space) or block, known, "block"),
        shared_mem=_shared_mem(launch, known),
        template_args=template_args,
        space=space,
        constraints=space.constraints if space else (),
    )


def _tuned_block(kernel: Kernel, launch: LaunchSite | None, space: Space | None) -> str | None:
    """The tuned template parameter a launch passes its block size to (`k<T, 128><<<g, 128>>>`), if any."""
    tuned = {p.name for p in space.params} if space else set()
    written = launch.template_args if launch else ()
    block = "".join(launch.block.split()) if launch else ""
    return next(
        (
            t.name
            for t, text in zip(kernel.template_params, written, strict=False)
            if t.name in tuned and "".join(text.split()) == block
        ),
        None,
    )


def _renamed(text: str, renames: dict[str, str]) -> str:
    return _NAME.sub(lambda m: renames.get(m.group(0), m.group(0)), text)


def _host_dims(
    text: str,
    host: HostLaunch,
    keep: set[str],
    renames: dict[str, str],
    shapes: dict[str, tuple[str, ...]],
    types: dict[str, str],
) -> str:
    """A launch's grid or block over spec names: host locals and integer constants followed (`dim3
    grid(num_tokens)`, `CUDA_SCALE_BLOCK_SIZE`, `pwise::threads`), `sizeof` of a C element type as its bytes (a
    type parameter's stays: the draft's guess of its type is no launch's; a capture reads it), and `t.size(i)`
    written at the launch read from the drafted shape of the array `t` passes."""
    resolved = _renamed(host.resolve(text.strip(), keep | {"dim3"}), renames)
    resolved = SIZEOF.sub(lambda m: (m.group(1) not in types and element_bytes(m.group(1))) or m.group(0), resolved)
    resolved = _TENSOR_SIZE.sub(
        lambda m: _dimension(shapes.get(m.group(1), ()), int(m.group(2))) or m.group(0), resolved
    )
    inner = _DIM3.match(resolved) or re.fullmatch(r"\((.*)\)", resolved)
    return f"dim3({inner.group(1)})" if inner else resolved


def element_bytes(c_type: str) -> str | None:
    """The bytes of one element of a C type cutune knows (`__half` → "2"), else None."""
    dtype = C_TYPES.get(c_type) or C_TYPES.get(c_type.removeprefix("std::"))
    return str(dtype_size(dtype)) if dtype is not None else None


def _dimension(shape: tuple[str, ...], index: int) -> str | None:
    """Dimension `index` (negative from the end) of a drafted shape, parenthesized unless a plain name."""
    if not -len(shape) <= index < len(shape):
        return None
    dim = shape[index]
    return dim if _NAME.fullmatch(dim) or dim.isdigit() else f"({dim})"


def _param_comment(model: SourceModel, p: Parameter) -> tuple[str, ...] | None:
    """The shape a `// [num_tokens, d]` comment right after a kernel parameter gives it, if any."""
    end = model.text.find("\n", p.span.end_byte)
    m = _SHAPE_COMMENT.match(model.text, p.span.end_byte, end if end >= 0 else len(model.text))
    return shape_comment(m.group(1)) if m else None


def _template_args(
    kernel: Kernel, launch: LaunchSite | None, space: Space | None, host: HostLaunch
) -> tuple[dict[str, str], dict[str, str]]:
    """The fixed template arguments, and each type parameter's C type (from the launch, else the dtype the
    launcher's dispatch macro hands it, else float)."""
    tuned = {p.name for p in space.params} if space else set()
    written = launch.template_args if launch else ()
    args: dict[str, str] = {}
    types: dict[str, str] = {}
    for i, t in enumerate(kernel.template_params):
        text = written[i].strip() if i < len(written) else None
        if t.kind.value == "type":
            c_type = text if text in C_TYPES else (host.dispatch if text and host.dispatch else t.default or "float")
            types[t.name] = c_type
            args[t.name] = c_type
        elif t.name in tuned or (text is None and t.default is not None):
            continue
        elif text is not None and (_INTEGER_LITERAL.fullmatch(text) or text in ("true", "false")):
            args[t.name] = text.rstrip("uUlL")
        elif text is not None and host.is_function(expanded := _substituted(host.expand(text), types, host)):
            args[t.name] = expanded  # a device function passed as a template argument
        else:
            passed = f"the launch passes `{text}`" if text else "no launch passes it"
            args[t.name] = f"{TODO}: the value of {t.name} ({passed})"
    return args, types


def _substituted(text: str, types: dict[str, str], host: HostLaunch) -> str:
    """`silu<scalar_t>` with type names replaced by C types: the kernel's type parameters, and the
    `scalar_t` of a dtype dispatch."""
    known = {**({"scalar_t": host.dispatch} if host.dispatch else {}), **types}
    return _NAME.sub(lambda m: known.get(m.group(0), m.group(0)), text)


def _dtype(c_type: str, type_names: dict[str, str]) -> str | None:
    """The dtype of a parameter's element type (`const T* __restrict__` → T's dtype), None if unknown."""
    base = parse_c_type(c_type).base
    base = type_names.get(base, base)
    return C_TYPES.get(base) or C_TYPES.get(base.removeprefix("std::"))


def _launch_dims(text: str | None, known: set[str], key: str) -> tuple[str, ...]:
    if text is None:
        return (f"{TODO}: no launch site found; write the {key} over the sizes and params",)
    m = _DIM3.match(text.strip())
    parts = split_top_level(m.group(1)) if m else [text]
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
