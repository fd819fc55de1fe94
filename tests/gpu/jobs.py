"""Small jobs for CPU tests of the backends (no kernel is compiled from them)."""

from __future__ import annotations

from cutune.gpu.backend import Job, TimingOptions
from cutune.spec import KernelSpec
from cutune.template.model import Space, Template, TunableParam, Value


def tiny_job(
    params: dict[str, tuple[Value, ...]],
    *,
    source: str = "// k\n",
    seed: int = 0,
    timing: TimingOptions | None = None,
    sizes: tuple[dict[str, int], ...] = ({"n": 1},),
) -> Job:
    """A job over `params` (first value is the default) whose spec has no arguments."""
    space = Space(tuple(TunableParam(name, values, values[0]) for name, values in params.items()))
    spec = KernelSpec(kernel="k", args=(), sizes=sizes, grid=("1",), block=("1",))
    return Job(
        source_path=None,
        template=Template(kernel="k", source=source, space=space),
        spec=spec,
        space=space,
        seed=seed,
        timing=timing or TimingOptions(),
    )
