"""Compiling a combined template for real: nvcc and NVRTC, at chosen configurations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from cutune.cuda.extract import extract_kernel, qualified_name
from cutune.cuda.parse import parse_source
from cutune.spec import KernelSpec
from cutune.template.instantiate import instantiation
from cutune.template.model import Config, Template, Value
from tests.cuda.test_extract import nvcc_compiled_functions, nvrtc_lowered_names


def name_expressions(template: Template, spec: KernelSpec, configs: Sequence[Mapping[str, Value]]) -> list[str]:
    """The kernel's name expression at each configuration (at the spec's first size)."""
    model = parse_source(template.source)
    kernel = model.kernel(template.kernel)
    qualified = qualified_name(model, template.kernel)
    return [instantiation(kernel, qualified, spec, template.space, Config.of(c), spec.sizes[0]) for c in configs]


def compile_both(
    template: Template, expressions: Sequence[str], tmp_path: Path, path: Path | None = None
) -> tuple[list[str], dict[str, str]]:
    """Compile the configurations with nvcc (entry names ptxas reports) and NVRTC (lowered names); `path`, the
    file the template was made from, finds the headers beside it."""
    model = parse_source(template.source, str(path) if path else None)
    nvcc_unit = extract_kernel(model, template.kernel, instantiations=expressions)
    nvrtc_unit = extract_kernel(model, template.kernel, instantiations=expressions, for_nvrtc=True)
    return nvcc_compiled_functions(nvcc_unit, tmp_path, "--expt-relaxed-constexpr"), nvrtc_lowered_names(nvrtc_unit)
