"""From a configuration to what the compiler gets: the instantiations at the problem sizes, the flags and
defines, and the unit made from the template's source. `check` and the tune backend both build their
compiles here, so they hand the compiler the same unit and options."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cutune.cuda.extract import CompileUnit, extract_kernel, qualified_name
from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.gpu.backend import Job
from cutune.gpu.compile import check_choice, compile_kernel
from cutune.gpu.compile_cache import CompileCache
from cutune.gpu.compiler import Compiled, KernelRequest, Target
from cutune.spec import KernelSpec
from cutune.template.instantiate import compile_options, instantiation
from cutune.template.model import Config, Space


@dataclass(frozen=True)
class BuildKey:
    """What decides the compiled code of a configuration: its instantiations, flags and defines."""

    expressions: tuple[str, ...]  # unique name expressions, in first-use order
    flags: tuple[str, ...]
    defines: tuple[tuple[str, str], ...]

    def target(self, arch: str) -> Target:
        """The compile target for `arch` with this configuration's flags."""
        return Target(arch, self.flags)


def build_key(
    model: SourceModel, kernel: str, spec: KernelSpec, space: Space, config: Config, sizes: Sequence[Mapping[str, int]]
) -> tuple[BuildKey, list[str]]:
    """The build key of `config` and the name expression each size launches; raises CutuneError (SpecError)
    when a template argument or a specialised size has no value."""
    own = model.kernel(kernel)
    qualified = qualified_name(model, kernel)
    per_size = [instantiation(own, qualified, spec, space, config, size) for size in sizes]
    flags, defines = compile_options(space, config, spec)
    return BuildKey(tuple(dict.fromkeys(per_size)), tuple(flags), tuple(sorted(defines.items()))), per_size


def kernel_request(model: SourceModel, kernel: str, spec: KernelSpec, key: BuildKey) -> KernelRequest:
    """The compile request of `key`: the unit extracted from `model` (for either compiler) with the spec's
    include folders and include rules and the configuration's defines."""
    dirs = tuple(str(Path(d).resolve()) for d in spec.include_dirs)

    def make_unit(expressions: tuple[str, ...], for_nvrtc: bool) -> CompileUnit:
        return extract_kernel(
            model,
            kernel,
            instantiations=expressions,
            include_dirs=dirs,
            defines=dict(key.defines),
            for_nvrtc=for_nvrtc,
            drop_includes=spec.includes.drop,
            substitute_includes=spec.includes.substitute,
        )

    return KernelRequest(make_unit, key.expressions)


class JobBuilder:
    """The tune backend's compile path, without CuPy or a GPU: a job's configurations built and compiled as
    the backend compiles them (the backend only loads the binaries). Tests call it to show that what `check`
    compiles is what `tune` compiles."""

    def __init__(self, job: Job, *, arch: str, compiler: str = "auto", cache: CompileCache | None = None) -> None:
        self.job = job
        self.arch = arch
        self.compiler = check_choice(compiler)
        self.cache = cache
        self.model = parse_source(job.template.source, job.source_path, rewrite=True)
        self.model.kernel(job.template.kernel)  # raises SourceError when absent

    def key(self, config: Config, sizes: Sequence[Mapping[str, int]]) -> tuple[BuildKey, list[str]]:
        """The build key of `config` at `sizes` and each size's name expression (raises CutuneError)."""
        return build_key(self.model, self.job.template.kernel, self.job.spec, self.job.space, config, sizes)

    def compile(self, key: BuildKey) -> Compiled:
        """Compile every instantiation of `key` (raises CutuneError with the compiler's complaint)."""
        request = kernel_request(self.model, self.job.template.kernel, self.job.spec, key)
        return compile_kernel(request, key.target(self.arch), self.compiler, self.cache)
