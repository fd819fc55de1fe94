"""Programmatic dependent launch written into a file: the kernel waits on the kernel before it and lets the next
one launch (griddepcontrol), and every launch of it sets the programmatic-stream-serialization attribute, as
tuning measured it under graph timing (template/recipes/pdl.py)."""

from __future__ import annotations

from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource
from cutune.template.recipes.pdl import prologue

_LAUNCH = """{{  // programmatic dependent launch (cutune): this kernel may start while the one before it ends
{i}  cudaLaunchConfig_t pdl_config = {{}};
{i}  pdl_config.gridDim = dim3({grid});
{i}  pdl_config.blockDim = dim3({block});
{i}  pdl_config.dynamicSmemBytes = {smem};
{i}  pdl_config.stream = {stream};
{i}  cudaLaunchAttribute pdl_attribute;
{i}  pdl_attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
{i}  pdl_attribute.val.programmaticStreamSerializationAllowed = 1;
{i}  pdl_config.attrs = &pdl_attribute;
{i}  pdl_config.numAttrs = 1;
{i}  cudaLaunchKernelEx(&pdl_config, {kernel}{args});
{i}}}"""


def with_dependent_launch(text: str, path: str, kernel: str) -> tuple[str, str]:
    """`text` with `kernel` launched as a programmatic dependent launch, and "" ; or `text` unchanged and why
    not (a launch the rewrite cannot write: in a macro, inside an expression, or with deduced template
    arguments)."""
    model = parse_source(text, path, rewrite=True)
    src = KernelSource(model, model.kernel(kernel))
    launches = src.launches()
    if not launches:
        return text, f"no launch of {kernel} in this file to give the programmatic-stream-serialization attribute"
    edits = EditList(src.data)
    for site, call in launches:
        where = f"the launch at line {src.line(call)}"
        statement = call.parent
        if site.macro is not None or statement is None or statement.type != "expression_statement":
            return text, f"{where} is not a statement of its own (a macro, or inside an expression)"
        callee = src.data[call.start_byte : site.config_spans[0].start_byte].decode().rstrip().removesuffix("<<<")
        if src.kernel.template_params and not site.template_args and site.through is None:  # a local: a pointer
            return text, f"{where} deduces {kernel}'s template arguments, which cudaLaunchKernelEx cannot"
        line_start = src.data.rfind(b"\n", 0, statement.start_byte) + 1
        indent = src.data[line_start : statement.start_byte].decode()
        indent = indent if not indent.strip() else ""
        edits.replace(
            statement.start_byte,
            statement.end_byte,
            _LAUNCH.format(
                i=indent,
                grid=site.grid,
                block=site.block,
                smem=site.shared_mem or "0",
                stream=site.stream or "0",
                kernel=callee.strip(),
                args="".join(f", {a}" for a in site.args),
            ),
        )
    edits.insert(src.kernel.body_span.start_byte + 1, prologue(src.body_indent()))
    return apply_edits(text, edits.edits), ""
