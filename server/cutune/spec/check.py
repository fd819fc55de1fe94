"""Checking a spec against the kernel it describes: argument names, order and template arguments."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cutune.spec.model import KernelSpec
from cutune.template.dtypes import parse_c_type
from cutune.template.recipes.specialize import runtime_param

if TYPE_CHECKING:  # typing only: checking a spec needs no CUDA parser loaded
    from cutune.cuda.model import Kernel


def check_against_kernel(spec: KernelSpec, kernel: Kernel) -> None:
    """Raise SpecError where the spec's args or template args do not fit the kernel's signature."""
    if spec.kernel != kernel.name:
        raise spec.error("", f"the spec is for {spec.kernel!r}, not for kernel {kernel.name!r}")
    params = kernel.params
    if len(spec.args) != len(params):
        raise spec.error(
            "args",
            f"{len(spec.args)} args ({', '.join(a.name for a in spec.args)}) but {kernel.name} takes "
            f"{len(params)} parameters ({', '.join(p.name for p in params)})",
        )
    for i, (arg, param) in enumerate(zip(spec.args, params, strict=True)):
        # a specialised size argument is renamed in the kernel (d → d_rt); the spec keeps the user's name
        if param.name not in (arg.name, runtime_param(arg.name)):
            raise spec.error(
                f"args[{i}].name", f"arg {i} is {arg.name!r}, the kernel's parameter {i} is {param.name!r}"
            )
        pointer = parse_c_type(param.type).pointer
        if arg.is_array != pointer:
            wanted = "an array (shape)" if pointer else "a scalar (value)"
            raise spec.error(f"args[{i}]", f"{arg.name} is `{param.type}` in the kernel, so it must be {wanted}")
    template_names = {t.name for t in kernel.template_params}
    for name in spec.template_args:
        if name not in template_names:
            known = ", ".join(sorted(template_names)) or "none"
            raise spec.error(
                f"template_args.{name}", f"{kernel.name} has no template parameter {name!r} (has: {known})"
            )
    tuned = {p.name for p in spec.space.params} if spec.space else None
    for t in kernel.template_params:
        if t.default is not None or t.name in spec.template_args:
            continue
        if t.kind.value == "value" and (tuned is None or t.name in tuned):
            continue  # tuned: by the spec's params, or by the templatize recipes' space when it has none
        raise spec.error("template_args", f"template parameter {t.name!r} of {kernel.name} needs a value")
