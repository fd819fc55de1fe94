"""Writing a KernelSpec back as readable, commented TOML (hand-written: no TOML writer is a dependency)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence

from cutune.spec.load import TODO, WEIGHT
from cutune.spec.model import ArgSpec, Init, KernelSpec, Role
from cutune.template.model import TunableParam

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ARG_DEFAULTS = ArgSpec(name="", dtype="")

TomlValue = str | int | float | bool | Sequence["TomlValue"] | Mapping[str, "TomlValue"]


def dump_kernel_spec(spec: KernelSpec, base: str | os.PathLike[str] | None = None) -> str:
    """The `[kernel.<name>]` table of a spec file, with comments; placeholders get `# TODO:` notes. Include
    folders are written relative to `base` (the spec file's folder, which the loader resolves them against)."""
    table = f"kernel.{_key(spec.kernel)}"
    lines = [f"[{table}]"]
    if spec.template_args:
        lines.append(_entry("template_args", spec.template_args))
    lines.append("# launch: expressions over sizes, params and device limits (`/` on integers truncates, as in C)")
    lines.append(_entry("grid", _dims(spec.grid)))
    lines.append(_entry("block", _dims(spec.block)))
    if spec.shared_mem != "0":
        lines.append(_entry("shared_mem", spec.shared_mem))
    if spec.constraints:
        lines.append(_entry("constraints", list(spec.constraints)))
    lines.append("# problem sizes: every entry sets the same variables; list the sizes you serve")
    lines.append("sizes = [")
    weights = spec.weights or (None,) * len(spec.sizes)
    lines.extend(f"  {_value(_weighted(size, w))}," for size, w in zip(spec.sizes, weights, strict=True))
    lines.append("]")
    if spec.multiple_of:
        lines.append("# divisibility the kernel relies on: ragged sizes derived to check tails keep it")
        lines.append(_entry("multiple_of", spec.multiple_of))
    if spec.tolerance is not None:
        lines.append(_entry("tolerance", {"rtol": spec.tolerance.rtol, "atol": spec.tolerance.atol}))
    else:
        t = spec.effective_tolerance()
        lines.append(f"# tolerance: the default for the output dtypes, {{ rtol = {t.rtol!r}, atol = {t.atol!r} }}")
    if spec.reference != "original":
        lines.append(_entry("reference", spec.reference))
    if spec.bytes_moved is not None:
        lines.append(_entry("bytes_moved", spec.bytes_moved))
    dirs = tuple(_relative(d, base) for d in spec.include_dirs)
    for key, value in (("flags", spec.flags), ("defines", spec.defines), ("include_dirs", dirs)):
        if value:
            lines.append(_entry(key, value if isinstance(value, dict) else list(value)))
    if spec.includes:
        rules: dict[str, TomlValue] = {"drop": list(spec.includes.drop), "substitute": spec.includes.substitute}
        lines.append(_entry("includes", {k: v for k, v in rules.items() if v}))
    lines.append("")
    lines.append("# the kernel's parameters, in order: arrays have a shape, scalars a value")
    for arg in spec.args:
        lines.append(f"[[{table}.args]]")
        lines.extend(_arg_entries(arg, base))
        lines.append("")
    for param in spec.space.params if spec.space else ():
        lines.append(f"[{table}.params.{_key(param.name)}]")
        lines.extend(_param_entries(param))
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _relative(path: str, base: str | os.PathLike[str] | None) -> str:
    """An absolute path as the spec file writes it: relative to its folder (`base`), which the loader resolves."""
    return os.path.relpath(path, base) if base is not None and os.path.isabs(path) else path


def _weighted(size: Mapping[str, int], weight: float | None) -> Mapping[str, TomlValue]:
    """A size entry with its `weight` (written as an integer where it is one, e.g. a launch count)."""
    if weight is None:
        return size
    return {**size, WEIGHT: int(weight) if float(weight).is_integer() else weight}


def _arg_entries(arg: ArgSpec, base: str | os.PathLike[str] | None) -> list[str]:
    out = [_entry("name", arg.name), _entry("dtype", arg.dtype)]
    if arg.shape is None:
        return [*out, _entry("value", arg.value or "")]
    out += [_entry("role", arg.role.value), _entry("shape", list(arg.shape))]
    if arg.init is not Init.NORMAL:
        out.append(_entry("init", arg.init.value))
    for key in ("low", "high", "scale"):
        if getattr(arg, key) != getattr(_ARG_DEFAULTS, key):
            out.append(_entry(key, getattr(arg, key)))
    if arg.data:
        out.append("# the program's own values at each size (cutune capture --data)")
        out.append(_entry("data", [_relative(f, base) if f else "" for f in arg.data]))
    if arg.bound:
        out.append("# bound: the shape is the allocation the program passed, more than the kernel may touch")
        out.append(_entry("bound", True))
    if arg.role is Role.INOUT:
        out.append("# inout: read and written, compared after the run like an output")
    return out


def _param_entries(param: TunableParam) -> list[str]:
    out = [
        _entry("values", list(param.values)),
        _entry("default", param.default),
        _entry("binding", param.binding.value),
    ]
    if param.flag is not None:
        out.append(_entry("flag", param.flag))
    if param.arg is not None:
        out.append(_entry("arg", param.arg))
    if param.description:
        out.append(_entry("description", param.description))
    if param.try_first is not None:
        out.append(_entry("try_first", param.try_first))
    return out


def _dims(dims: tuple[str, ...]) -> TomlValue:
    return dims[0] if len(dims) == 1 else list(dims)


def _entry(key: str, value: TomlValue) -> str:
    reasons = _todo_reasons(value)
    line = f"{_key(key)} = {_value(value)}"
    return f"{line}  # TODO: {'; '.join(reasons)}" if reasons else line


def _todo_reasons(value: TomlValue) -> list[str]:
    if isinstance(value, str):
        return [value[len(TODO) :].lstrip(": ") or "fill this in"] if value.startswith(TODO) else []
    if isinstance(value, Mapping):
        return [r for v in value.values() for r in _todo_reasons(v)]
    if isinstance(value, Sequence):
        return [r for v in value for r in _todo_reasons(v)]
    return []


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)


def _value(value: TomlValue) -> str:
    if isinstance(value, str):
        # JSON's string escapes are all valid in TOML basic strings; a placeholder keeps only its mark
        return json.dumps(TODO if value.startswith(TODO) else value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items())
        return f"{{ {inner} }}" if inner else "{}"
    return f"[{', '.join(_value(v) for v in value)}]"
