"""Apply a tuned configuration to a templatized source: new values in the kernel's tuning struct, a
dispatch on the problem size at the launches for specialised sizes, and the flags a source cannot hold."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tree_sitter import Node

from cutune.apply.dispatch import dispatch_edits, named_launch, variant_launch_config
from cutune.cuda.model import LaunchSite, SourceModel
from cutune.errors import SourceError
from cutune.template.edits import EditList, TextEdit
from cutune.template.instantiate import tuned_options
from cutune.template.model import Binding, Config, Space, TunableParam
from cutune.template.recipes.base import KernelSource
from cutune.template.recipes.index_bits import NAME, NARROW, widened
from cutune.template.recipes.specialize import runtime_param, static_param
from cutune.template.tuning import value_text
from cutune.template.variants.combine import VARIANT
from cutune.template.variants.host_launch import HostLaunchError
from cutune.template.variants.model import Variant
from cutune.tune.dispatch import DispatchPlan


@dataclass(frozen=True)
class AppliedConfig:
    """The edits that write a configuration into the source, and the compile flags it also needs
    (FLAG and DEFINE parameters, which a source cannot hold: record them in the spec's `flags`)."""

    edits: tuple[TextEdit, ...]
    flags: tuple[str, ...]
    notes: tuple[str, ...] = ()  # what was written otherwise than tuned, and why (for the report)


def apply_config(
    model: SourceModel,
    kernel: str,
    config: Config,
    space: Space,
    *,
    specialized_values: Mapping[str, Sequence[int]] | None = None,
) -> AppliedConfig:
    """The edits that make `config` the kernel's defaults; a switched-on SPECIALIZE parameter needs the
    values to compile in, by argument name in `specialized_values` (each launch then dispatches on them)."""
    if widened(config) is not None:
        raise SourceError(
            f"{NAME}={NARROW} is only written under a per-size guard (a tuned result's dispatch): a default would "
            "launch it at sizes whose indices need 64 bits",
            path=model.path,
        )
    src = KernelSource(model, model.kernel(kernel))
    edits = EditList(src.data)
    specialized: list[tuple[TunableParam, Sequence[int]]] = []
    for name, value in config.items():
        p = _param(space, name, model.path)
        if p.binding in (Binding.TEMPLATE, Binding.LAUNCH):
            _set_member(src, edits, name, value_text(value))
        elif p.binding is Binding.SPECIALIZE and value:
            assert p.arg is not None
            if not src.template_param(static_param(p.arg)):
                raise SourceError(
                    f"{kernel} has no template parameter {static_param(p.arg)}: templatize it again",
                    path=model.path,
                )
            values = (specialized_values or {}).get(p.arg)
            if not values:
                raise SourceError(f"{name} is on: give the values of {p.arg} to compile in", path=model.path)
            specialized.append((p, values))
    if specialized:
        launches = src.launches()
        _check_not_dispatched(src, launches)
        for site, call in launches:
            _dispatch(src, edits, site, call, specialized)
    flags, defines = tuned_options(space, config)
    return AppliedConfig(tuple(edits.edits), flags + tuple(f"-D{k}={v}" for k, v in defines.items()))


def apply_dispatch(
    model: SourceModel,
    kernel: str,
    plan: DispatchPlan,
    space: Space,
    sizes: Sequence[Mapping[str, int]],
    *,
    note: str,
    variants: Sequence[Variant] = (),
    extents: Sequence[str] = (),
) -> AppliedConfig:
    """The edits that launch each configuration of `plan` in its range of sizes (tune/dispatch.py);
    one configuration for all sizes is written as the kernel's defaults instead, unless it computes indices in
    32 bits: that one is launched under the host's guard on `extents` (the spec's `extent_exprs`). `note` says where and
    when it was tuned, for the comment above the dispatch. `model` holds the structural `variants` behind
    VARIANT when the plan launches them (each range launches its variant's grid and block: see
    `launchable` for ranges whose variant's launch the host cannot spell)."""
    if len(plan.configs) == 1 and widened(plan.configs[0]) is None:
        return apply_config(model, kernel, plan.configs[0], space, specialized_values=_specialized(space, sizes))
    src = KernelSource(model, model.kernel(kernel))
    edits = EditList(src.data)
    dispatch_edits(src, edits, plan, space, sizes, note, variants, extents)
    # compile flags are the same in every branch (chosen once for the file)
    flags, defines = tuned_options(space, plan.configs[0])
    return AppliedConfig(tuple(edits.edits), flags + tuple(f"-D{k}={v}" for k, v in defines.items()))


def launchable(
    model: SourceModel, kernel: str, plan: DispatchPlan, original: Config, variants: Sequence[Variant]
) -> tuple[DispatchPlan, tuple[str, ...]]:
    """`plan` with each range whose variant's launch cannot be written at every launch site of `kernel` in
    `model` given to the original configuration (ranges that then launch the same merged), and a note per
    such range."""
    src = KernelSource(model, model.kernel(kernel))
    unwritable: dict[Config, str] = {}
    for config in plan.configs:
        try:
            for site, call in src.launches():
                variant_launch_config(src, site, call, config, variants)
        except HostLaunchError as e:
            unwritable[config] = str(e)
    notes = tuple(
        f"{where} launches the original: variant {variants[int(config.get(VARIANT, 0)) - 1].name}'s launch "  # type: ignore[arg-type]
        f"cannot be written there ({unwritable[config]})"
        for where, config in plan.ranges()
        if config in unwritable
    )
    return plan.with_configs(lambda c: original if c in unwritable else c), notes


def _specialized(space: Space, sizes: Sequence[Mapping[str, int]]) -> dict[str, list[int]]:
    """The values of each specialisable size in `sizes`."""
    return {
        p.arg: sorted({size[p.arg] for size in sizes if p.arg in size})
        for p in space.params
        if p.binding is Binding.SPECIALIZE and p.arg
    }


def _set_member(src: KernelSource, edits: EditList, name: str, value: str) -> None:
    """Edit the value of one struct member (when it differs)."""
    if src.struct is None:
        raise SourceError(
            f"{src.kernel.name} is not templatized (no {src.struct_name} struct): run templatize first",
            path=src.model.path,
        )
    member = src.struct.member(name)
    if member is None:
        raise SourceError(
            f"{src.struct_name} has no member {name}: templatize the kernel again",
            path=src.model.path,
            line=src.line(src.struct.start) - 1,
        )
    if member.value != value:
        edits.replace(*src.struct.value_ranges[name], value)


def _param(space: Space, name: str, path: str | None) -> TunableParam:
    try:
        return space.param(name)
    except KeyError:
        raise SourceError(f"the configuration sets {name}, which the space has no parameter for", path=path) from None


def _check_not_dispatched(src: KernelSource, launches: list[tuple[LaunchSite, Node]]) -> None:
    static = [i for i, tp in enumerate(src.kernel.template_params) if tp.name.endswith("_CT")]
    for site, call in launches:
        if any(i < len(site.template_args) for i in static):
            raise SourceError(
                f"the launch at line {src.line(call)} already passes a specialised size: remove the "
                "existing dispatch before applying again",
                path=src.model.path,
                line=src.line(call) - 1,
            )


def _dispatch(
    src: KernelSource,
    edits: EditList,
    site: LaunchSite,
    call: Node,
    specialized: list[tuple[TunableParam, Sequence[int]]],
) -> None:
    """Replace one launch statement by `if (arg == v) { launch<..., v> } ... else { launch }`."""
    statement = call.parent
    line = src.line(call)
    if statement is None or statement.type != "expression_statement":
        raise SourceError(
            f"the launch at line {line} is not a statement of its own, so it cannot be dispatched",
            path=src.model.path,
            line=line - 1,
        )
    named_launch(src, site, call, "specialise")
    tparams = src.kernel.template_params
    positions = {tp.name: i for i, tp in enumerate(tparams)}
    needed = max(positions[static_param(p.arg or "")] for p, _ in specialized) + 1
    for i in range(len(site.template_args), needed):
        if tparams[i].default is None:
            raise SourceError(
                f"the launch at line {line} leaves template parameter {tparams[i].name} to be "
                "deduced; write it out to specialise",
                path=src.model.path,
                line=line - 1,
            )
    params = [p.name for p in src.kernel.params]
    guards = []
    for p, _ in specialized:
        i = params.index(runtime_param(p.arg or ""))
        arg = site.args[i] if i < len(site.args) else None
        if arg is None:
            raise SourceError(f"the launch at line {line} passes no {p.arg}", path=src.model.path, line=line - 1)
        guards.append(arg if arg.isidentifier() else f"({arg})")
    fn = call.child_by_field_name("function")
    assert fn is not None
    targs_start = src.data.find(b"<", fn.start_byte, fn.end_byte)
    callee = src.data[fn.start_byte : targs_start if targs_start >= 0 else fn.end_byte].decode()
    rest = src.data[fn.end_byte : call.end_byte].decode()
    indent = src.data[src.data.rfind(b"\n", 0, statement.start_byte) + 1 : statement.start_byte].decode()

    def launch(values: dict[str, int]) -> str:
        args = list(site.template_args)
        for tp in tparams[len(args) : needed]:
            args.append(
                str(values.get(tp.name, 0)) if tp.name.endswith("_CT") else _host_default(src, tp.default or "", call)
            )
        text = f"{callee}<{', '.join(args)}>{rest};"
        return text.replace("\n", "\n  ")

    branches = []
    for combo in itertools.product(*(values for _, values in specialized)):
        condition = " && ".join(f"{g} == {v}" for g, v in zip(guards, combo, strict=True))
        fixed = {static_param(p.arg or ""): v for (p, _), v in zip(specialized, combo, strict=True)}
        branches.append(f"if ({condition}) {{\n{indent}  {launch(fixed)}\n{indent}}}")
    original = src.text(statement).replace("\n", "\n  ")
    edits.replace(
        statement.start_byte,
        statement.end_byte,
        " else ".join(branches) + f" else {{\n{indent}  {original}\n{indent}}}",
    )


def _host_default(src: KernelSource, default: str, call: Node) -> str:
    """A template parameter's default as the launch must write it (the tuning struct qualified)."""
    prefix = f"{src.struct_name}::"
    return src.ref(default.removeprefix(prefix), call.start_byte) if default.startswith(prefix) else default
