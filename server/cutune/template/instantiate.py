"""From a configuration to what the compiler sees: the kernel's name expression and the compile options.

Parameters reach the compiler by their binding: TEMPLATE as template arguments, SPECIALIZE as the
problem's value (or 0) of the `<ARG>_CT` template argument, FLAG and DEFINE as options; LAUNCH ones do
not reach it at all (the spec's launch expressions read them), so they never cause a recompile.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from cutune.cuda.model import Kernel, TemplateParamKind
from cutune.errors import ExpressionError
from cutune.spec import KernelSpec
from cutune.template.expr import compile_expr
from cutune.template.model import Binding, Config, Space, TunableParam, Value
from cutune.template.recipes.specialize import runtime_param, static_param
from cutune.template.tuning import tuning_name, value_text


def instantiation(
    kernel: Kernel, qualified: str, spec: KernelSpec, space: Space, config: Config, size: Mapping[str, int]
) -> str:
    """The name expression of the kernel for one configuration and problem size, in template-parameter
    order, e.g. `serving::silu_and_mul_kernel<__nv_bfloat16, 512, 2>`."""
    if not kernel.template_params:
        return qualified
    specialized = {static_param(p.arg): p for p in space.params if p.binding is Binding.SPECIALIZE and p.arg}
    template = {p.name: p for p in space.params if p.binding is Binding.TEMPLATE}
    namespace = qualified.rpartition("::")[0]
    args = []
    for tp in kernel.template_params:
        if tp.name in specialized:
            p = specialized[tp.name]
            args.append(str(size_value(spec, p, size)) if config.get(p.name, p.default) else "0")
        elif tp.kind is TemplateParamKind.VALUE and tp.name in template:
            args.append(value_text(config.get(tp.name, template[tp.name].default)))
        elif tp.name in spec.template_args:
            args.append(spec.template_args[tp.name])
        elif tp.default is not None:
            args.append(_qualified_default(tp.default, kernel.name, namespace))
        else:
            raise spec.error(
                "template_args",
                f"no value for template parameter {tp.name} of {kernel.name}: give it in template_args",
            )
    return f"{qualified}<{', '.join(args)}>"


def compile_options(space: Space, config: Config, spec: KernelSpec) -> tuple[tuple[str, ...], dict[str, str]]:
    """The compiler flags and -D defines a configuration needs, the spec's own first."""
    flags, defines = tuned_options(space, config)
    return tuple(spec.flags) + flags, {**spec.defines, **defines}


def tuned_options(space: Space, config: Config) -> tuple[tuple[str, ...], dict[str, str]]:
    """The flags and defines that a configuration's FLAG and DEFINE parameters add."""
    flags: list[str] = []
    defines: dict[str, str] = {}
    for p in space.params:
        value = config.get(p.name, p.default)
        if p.binding is Binding.FLAG:
            flag = _flag(p, value)
            if flag is not None:
                flags.append(flag)
        elif p.binding is Binding.DEFINE:
            defines[p.name] = value_text(value)
    return tuple(flags), defines


def compile_key(
    kernel: Kernel, qualified: str, spec: KernelSpec, space: Space, config: Config, size: Mapping[str, int]
) -> str:
    """What decides the compiled code for one configuration and size: configurations that differ only in
    LAUNCH parameters, or in sizes a switched-off specialisation ignores, share it."""
    flags, defines = compile_options(space, config, spec)
    name = instantiation(kernel, qualified, spec, space, config, size)
    return "|".join([name, " ".join(flags), " ".join(f"-D{k}={v}" for k, v in sorted(defines.items()))])


def _flag(p: TunableParam, value: Value) -> str | None:
    """The flag a FLAG parameter contributes: bool → present or absent; a number → formatted, 0 = off."""
    if p.flag is None or value is False or value == 0:
        return None
    return p.flag if isinstance(value, bool) else p.flag.format(value)


def size_value(spec: KernelSpec, p: TunableParam, size: Mapping[str, int]) -> int:
    """The problem's value of the argument a SPECIALIZE parameter fixes: its scalar value in the spec
    (under its original or its `_rt` name), else the size variable of the same name; SpecError where it is not a
    positive integer (nothing to compile in)."""
    assert p.arg is not None
    arg = next((a for a in spec.args if a.name in (p.arg, runtime_param(p.arg)) and a.value is not None), None)
    text = arg.value if arg is not None and arg.value is not None else p.arg
    try:
        value = compile_expr(text).evaluate(size)
    except ExpressionError as e:
        raise spec.error("args", f"{p.name} needs the value of {p.arg} for size {dict(size)}: {e}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise spec.error("args", f"{p.name}: {p.arg} is {value!r} for size {dict(size)}, not a positive integer")
    return value


def _qualified_default(default: str, kernel: str, namespace: str) -> str:
    """A template parameter's default, with the kernel's tuning struct qualified for use at file scope."""
    if not namespace:
        return default
    return re.sub(rf"(?<![\w:]){re.escape(tuning_name(kernel))}::", f"{namespace}::{tuning_name(kernel)}::", default)
