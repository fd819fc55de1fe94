"""What a torch host launcher says about a launch: its locals (`dim3 grid(num_tokens)`), the tensors' sizes
(`int d = input.size(-1) / 2`, `num_tokens = input.numel() / d`) and the dtype its dispatch macro picks
(AT_DISPATCH_* / VLLM_DISPATCH_*-style), read from the text of the function (or `#define`) around it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from cutune.cuda.headers import INTEGER_ARITHMETIC, project_constants
from cutune.cuda.model import LaunchSite, SourceModel
from cutune.cuda.syntax import parse_tree

_LOCAL = re.compile(
    r"(?:^|[;{}\n])\s*(?:(?:const|constexpr|static|unsigned|signed)\s+)*[A-Za-z_][\w:]*\s+([A-Za-z_]\w*)\s*"
    r"(?:=\s*([^;{}]+?)|\(([^;{}]*)\)|\{([^;{}]*)\})\s*;"
)
_SIZE = re.compile(r"^(\w+)\s*\.\s*size\s*\(\s*(-?\d+)\s*\)\s*(?:([*/])\s*(\d+))?$")
_NUMEL = re.compile(r"^(\w+)\s*\.\s*numel\s*\(\s*\)\s*(?:/\s*(.+))?$")
_TENSOR_ARG = re.compile(r"\b(\w+)\s*\.\s*(?:data_ptr|mutable_data_ptr|const_data_ptr|data)\s*[<(]")
_DISPATCH = re.compile(r"\b(\w*DISPATCH\w*)\s*\(")
_WORD = re.compile(r"[A-Za-z_]\w*")
_NAME = re.compile(r"(?:[A-Za-z_]\w*\s*::\s*)*[A-Za-z_]\w*")  # a name, qualified or not
_FUNCTION = re.compile(r"(?:\w+::)*(\w+)\s*(?:<[^<>]*>)?")
_TENSOR_COMMENT = re.compile(r"Tensor\s*&?\s*(\w+)\s*[,)]?\s*//\s*(\[[^\]\n]*\])")
# a dispatch's scalar types, most wanted first: serving kernels run in bf16
_SCALARS = (("BFloat16", "__nv_bfloat16"), ("Half", "__half"), ("Float", "float"), ("Double", "double"))


@dataclass
class HostLaunch:
    """The host code around one launch, as far as a spec draft needs it."""

    locals: dict[str, str] = field(default_factory=dict)  # local → initializer text (the last before the launch)
    dims: dict[str, dict[int, str]] = field(default_factory=dict)  # tensor → dim (-1: last) → size expression
    rows: dict[str, str] = field(default_factory=dict)  # tensor → its leading size, from `n = t.numel() / ...`
    dispatch: str | None = None  # the C type the dtype dispatch hands the kernel (`scalar_t`)
    macro_args: dict[str, str] = field(default_factory=dict)  # for a launch in a #define: parameter → argument
    comments: dict[str, tuple[str, ...]] = field(default_factory=dict)  # tensor → `// [..., d]` of its parameter
    # integer `#define`s of the file and the project headers it reaches (`CUDA_SCALE_BLOCK_SIZE` → `256`)
    constants: dict[str, str] = field(default_factory=dict)

    functions: frozenset[str] = frozenset()  # the device functions of the file

    def is_function(self, text: str) -> bool:
        """Whether `text` names a device function of the file, e.g. `vllm::silu_kernel<__half>`."""
        m = _FUNCTION.fullmatch(text)
        return m is not None and m.group(1) in self.functions

    def expand(self, text: str) -> str:
        """A launch's text with the macro's parameters replaced by the arguments it is used with."""
        return _WORD.sub(lambda m: self.macro_args.get(m.group(0), m.group(0)), text)

    def tensor(self, launch_arg: str) -> str | None:
        """The tensor a launch argument such as `out.data_ptr<scalar_t>()` passes, if it names one."""
        m = _TENSOR_ARG.search(launch_arg)
        return m.group(1) if m else None

    def shape(self, tensor: str, comment: tuple[str, ...] | None = None) -> tuple[str, ...] | None:
        """The tensor's shape over host names, when the launcher (or a `// [rows, d]` comment on the kernel's
        or the launcher's parameter, `...` standing for the rows) says enough about it."""
        comment = comment or self.comments.get(tensor)
        rows = next(iter(self.rows.values()), None)
        if comment and (rows is not None or "..." not in comment):
            return tuple(d if d != "..." or rows is None else rows for d in comment)
        dims = self.dims.get(tensor, {})
        if tensor in self.rows and -1 in dims:
            return (self.rows[tensor], dims[-1])
        leading = sorted(i for i in dims if i >= 0)
        if leading and leading == list(range(len(leading))):
            return tuple(dims[i] for i in leading) + ((dims[-1],) if -1 in dims else ())
        return None

    def resolve(self, text: str, keep: set[str]) -> str:
        """`text` with host locals and integer constants (macros, namespace `constexpr`s such as `pwise::threads`)
        not in `keep` replaced by their values (transitively), `std::` dropped."""
        out = text.replace("std::", "")
        for _ in range(8):  # locals defined from locals: a few rounds suffice
            changed = False

            def sub(m: re.Match[str]) -> str:
                nonlocal changed
                name = re.sub(r"\s*::\s*", "::", m.group(0))
                value = self.constants.get(name) if "::" in name else self.locals.get(name, self.constants.get(name))
                if name in keep or value is None:
                    return name
                changed = True
                return value if _WORD.fullmatch(value) or value.isdigit() else f"({value})"

            out = _NAME.sub(sub, out)
            if not changed:
                break
        return " ".join(out.split())


def read_host(model: SourceModel, site: LaunchSite) -> HostLaunch:
    """What the host function (and, for a launch in a `#define`, the macro body) around `site` says."""
    text = _host_text(model, site)
    host = HostLaunch()
    for m in _LOCAL.finditer(text):
        value = next(g for g in m.groups()[1:] if g is not None).strip()
        host.locals[m.group(1)] = value
    for name, value in host.locals.items():
        if size := _SIZE.match(value):
            tensor, dim, op, k = size.groups()
            expr = name if op is None else f"{name} {'*' if op == '/' else '/'} {k}"
            host.dims.setdefault(tensor, {})[int(dim)] = expr
    for name, value in host.locals.items():
        if (numel := _NUMEL.match(value)) and numel.group(2):
            host.rows[numel.group(1)] = name
    host.dispatch = _dispatched_type(model, text)
    host.functions = frozenset(f.name for f in model.device_functions)
    host.comments = {m.group(1): shape_comment(m.group(2)) for m in _TENSOR_COMMENT.finditer(text)}
    if site.macro is not None:
        host.macro_args = _macro_arguments(model, site.macro)
    own = {m.name: m.value.strip() for m in model.macros if INTEGER_ARITHMETIC.fullmatch(m.value.strip() or "-")}
    host.constants = {**(project_constants(Path(model.path)) if model.path else {}), **own}  # the text as edited
    return host


def shape_comment(text: str) -> tuple[str, ...]:
    """`[..., 2, d]` (the brackets optional) → ("...", "2", "d")."""
    return tuple(d.strip() for d in text.strip("[] ").split(",") if d.strip())


def _macro_arguments(model: SourceModel, name: str) -> dict[str, str]:
    """A function-like macro's parameters → the arguments of its first use in the file."""
    macro = next((m for m in model.macros if m.name == name), None)
    if macro is None:
        return {}
    header = re.match(rf"#\s*define\s+{re.escape(name)}\(([^)]*)\)", model.text[macro.span.start_byte :])
    use = re.search(rf"\b{re.escape(name)}\s*\(([^;]*)\)\s*;", model.text[macro.span.end_byte :])
    if header is None or use is None:
        return {}
    params = [p.strip() for p in header.group(1).split(",")]
    args = [a.strip() for a in use.group(1).split(",")]
    return {p: a for p, a in zip(params, args, strict=False) if p and a}


def _host_text(model: SourceModel, site: LaunchSite) -> str:
    """The function text before the launch; for a launch in a macro, the function using it and the body."""
    data = model.text.encode("utf-8", errors="replace")
    root = parse_tree(data).root_node
    at = site.span.start_byte
    prefix = b""
    if site.macro is not None:
        macro = next((m for m in model.macros if m.name == site.macro), None)
        if macro is None:
            return ""
        prefix = data[macro.span.start_byte : at]
        use = re.search(rb"\b" + re.escape(site.macro.encode()) + rb"\s*\(", data[macro.span.end_byte :])
        at = macro.span.end_byte + use.start() if use else -1
    node = root.descendant_for_byte_range(at, at) if at >= 0 else None
    while node is not None and node.type != "function_definition":
        node = node.parent
    function = data[node.start_byte : at] if node is not None else b""
    return (function + b"\n" + prefix.replace(b"\\\n", b" \n")).decode("utf-8", errors="replace")


def _dispatched_type(model: SourceModel, text: str) -> str | None:
    """The C type a dtype dispatch macro around the launch hands the kernel, following the file's macros."""
    calls = _DISPATCH.findall(text)
    if not calls:
        return None
    macros = {m.name: m.value for m in model.macros}
    seen: set[str] = set()
    todo = list(calls)
    found = text
    while todo:
        name = todo.pop()
        if name in seen or name not in macros:
            continue
        seen.add(name)
        found += "\n" + macros[name]
        todo += _DISPATCH.findall(macros[name])
    names = " ".join([found, *calls])
    if "FLOATING" in names and "HALF" not in names and "ScalarType::" not in found and "at::" not in found:
        return "float"  # torch's AT_DISPATCH_FLOATING_TYPES: float and double
    for scalar, c_type in _SCALARS:
        if re.search(rf"\b(?:ScalarType::|at::k|at::|c10::|k){scalar}\b", found) or scalar.upper() in names:
            return c_type
    return None
