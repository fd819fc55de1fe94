"""Compiling a combined template for real: nvcc and NVRTC, at chosen configurations."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence, Set
from pathlib import Path

from cutune.cuda.extract import extract_kernel, qualified_name
from cutune.cuda.parse import parse_source
from cutune.gpu.backend import Failure, Job, TimingOptions
from cutune.project import KernelContext
from cutune.spec import KernelSpec
from cutune.template.instantiate import instantiation
from cutune.template.model import Config, Space, Template, Value
from cutune.template.variants import with_variants
from cutune.template.variants.model import Variant
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


def assert_compiles(
    template: Template, specs: Sequence[KernelSpec], configs: Sequence[Mapping[str, Value]], tmp_path: Path, path: Path
) -> None:
    """Every configuration at every spec compiles with nvcc and NVRTC, each its own entry."""
    expressions = [e for s in specs for e in name_expressions(template, s, configs)]
    entries, lowered = compile_both(template, expressions, tmp_path, path)
    assert len(set(entries)) == len(set(expressions)) and set(lowered) == set(expressions)


def measured_failures(job: Job, spec: KernelSpec, vary: Set[str]) -> tuple[int, list[str]]:
    """Every feasible configuration of `job`'s space with the parameters not in `vary` at their defaults, measured
    on the GPU: how many passed the check against the original, and each other one as `config: failure: detail`
    (infeasible launches and configurations the GPU cannot launch, which the search skips too, are neither)."""
    from cutune.gpu.registry import create_backend
    from cutune.limits import limits_for
    from cutune.tune.space import Feasibility

    backend = create_backend("cupy")
    info = backend.open(job)
    try:
        defaults = job.space.default()
        varied = [p for p in job.space.params if p.name in vary]
        vary_names, values = [p.name for p in varied], [p.values for p in varied]
        check = Feasibility(job.space, spec, limits_for(info.arch))
        picks = (Config.of({**defaults, **dict(zip(vary_names, v, strict=True))}) for v in itertools.product(*values))
        configs = [config for config in picks if check.violation(config) is None]
        passed, failed = 0, []
        for config in configs:
            m = backend.evaluate(config)
            if m.ok:
                passed += 1
            elif m.failure not in (Failure.INFEASIBLE, Failure.RESOURCES):
                failed.append(f"{dict(config)}: {m.failure}: {m.detail[:400]}")
        return passed, failed
    finally:
        backend.close()


def only_the_variant(space: Space) -> Space:
    """`space` searching VARIANT = 1 only; the original (VARIANT = 0 at every default) stays the reference."""
    defaults = " and ".join(f"{p.name} == {p.default!r}" for p in space.params if p.name != "VARIANT")
    return Space(space.params, (*space.constraints, f"VARIANT == 1 or ({defaults})"))


def variant_alone(ctx: KernelContext, kernel: str, variant: Variant) -> Job:
    """A job of `kernel` with `variant` alone (`only_the_variant`), timed briefly: for the GPU tests that check
    every configuration of a variant against the original."""
    template, combined = with_variants(ctx.template_model, kernel, [variant], ctx.require_spec(), base=ctx.template)
    assert combined is not None
    space = only_the_variant(template.space)
    return Job(str(ctx.path), template, combined, space, timing=TimingOptions(warmup=1, reps=5, min_time_ms=0.0))
