"""The CuPy backend on a real GPU: samples check and time, planted bugs are caught, faults and hangs
are survived by the worker. Timings are printed (pytest -s) for the record."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cutune.gpu.backend import Failure, Job, Measurement, TimingOptions
from cutune.gpu.cupy_backend import CupyBackend
from cutune.gpu.sol import sol_floor_us
from cutune.gpu.worker import IsolatedBackend
from cutune.spec import load_spec, spec_path_for
from cutune.template.model import Config, Space, Template

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
FAULTY = ROOT / "tests/data/gpu/faulty/faulty.cu"
QUICK = TimingOptions(warmup=2, reps=10, min_time_ms=2.0, max_reps=500, trial_timeout_s=20.0)
SAMPLES = [("silu_and_mul.cu", "silu_and_mul_kernel"), ("merge_attn_states.cu", "merge_attn_states_kernel")]


def job_as_written(path: Path, kernel: str, block: str | None = None) -> Job:
    """A job for a file as written (no templatize), over its spec's parameters."""
    spec = load_spec(spec_path_for(path)).kernel(kernel)
    if block is not None:
        spec = dataclasses.replace(spec, block=(block,))
    space = spec.space or Space(())
    template = Template(kernel=kernel, source=path.read_text(encoding="utf-8"), space=space)
    return Job(source_path=str(path), template=template, spec=spec, space=space, timing=QUICK)


def faulty_job(block: str | None = None) -> Job:
    return job_as_written(FAULTY, "scale_kernel", block)


def mode(m: int, threads: int = 128) -> Config:
    return Config.of({"MODE": m, "THREADS": threads})


def neighbours(space: Space, limit: int) -> list[Config]:
    """Configurations that change one parameter of the default at a time."""
    default = dict(space.default())
    out = []
    for p in space.params:
        for v in p.values:
            if v != p.default:
                out.append(Config.of({**default, p.name: v}))
    return out[:limit]


def show(m: Measurement) -> str:
    times = ", ".join(f"{t.median_us:.2f}us(±{t.spread:.1%})" for t in m.timings)
    return f"{m.config}: {m.failure.value if m.failure else 'ok'} {times} {m.detail[:200]}"


@pytest.mark.parametrize(("file", "kernel"), SAMPLES)
@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_samples_check_and_time_on_the_gpu(file: str, kernel: str, compiler: str) -> None:
    job = job_as_written(ROOT / "samples" / file, kernel)
    backend = CupyBackend(compiler=compiler)
    info = backend.open(job)
    try:
        print(
            f"\n{info.name} {info.arch} copy {info.copy_bandwidth_gbs:.0f} GB/s, "
            f"empty launch {info.empty_launch_us:.2f} us, driver {info.driver}"
        )
        assert 1000 < info.copy_bandwidth_gbs < 10000 and 0.5 < info.empty_launch_us < 20
        assert info.limits is not None and info.limits.sm_count == info.sm_count > 0
        others = neighbours(job.space, 4)
        backend.prefetch(others)
        default = backend.evaluate(job.space.default())
        print(show(default))
        assert default.ok and default.max_error == 0.0, default.detail
        assert default.compile is not None and default.compile.registers > 0
        for t, size in zip(default.timings, job.spec.sizes, strict=True):
            floor = sol_floor_us(job.spec.moved_bytes(size, job.space.default()) or 0, info)
            print(f"  {size}: {t.median_us:.2f} us, floor {floor:.2f} us ({floor / t.median_us:.0%} of SOL)")
            assert t.median_us >= floor * 0.9 and t.reps >= QUICK.reps
        for config in others:
            m = backend.evaluate(config)
            print(show(m))
            assert m.ok or m.failure in (Failure.RESOURCES, Failure.INFEASIBLE), m.detail
            assert m.failure not in (Failure.WRONG, Failure.UNWRITTEN, Failure.OUT_OF_BOUNDS, Failure.RACE)
    finally:
        backend.close()


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_planted_bugs_are_wrong(compiler: str) -> None:
    backend = CupyBackend(compiler=compiler)
    backend.open(faulty_job())
    try:
        assert backend.evaluate(mode(0, 256)).ok
        skipped = backend.evaluate(mode(1))
        print(show(skipped))
        assert skipped.failure is Failure.UNWRITTEN  # the poisoned output was never written
        assert "at n=1000: `out`: 1 of 1000 elements not written (still poisoned)" in skipped.detail
        rounded = backend.evaluate(mode(2))
        print(show(rounded))
        assert rounded.failure is Failure.WRONG and rounded.max_error is not None
        assert 1 < rounded.max_error < 1e4  # close, but not within fp32's tolerance
    finally:
        backend.close()


def test_a_configuration_is_checked_and_timed_at_the_sizes_asked_for_only() -> None:
    job = job_as_written(ROOT / "samples" / "silu_and_mul.cu", "silu_and_mul_kernel")
    backend = CupyBackend()
    backend.open(job)
    try:
        last = len(job.spec.sizes) - 1
        some = backend.evaluate(job.space.default(), [0, last])
        assert some.ok and [t.size for t in some.timings] == [job.spec.sizes[0], job.spec.sizes[last]]
    finally:
        backend.close()
    backend.open(faulty_job())
    try:
        skipped = backend.evaluate(mode(1), [0])  # checked there too: a planted bug is still caught
        assert skipped.failure is Failure.UNWRITTEN, show(skipped)
    finally:
        backend.close()


def test_blocks_beyond_the_compiled_function_are_resources() -> None:
    backend = CupyBackend()
    backend.open(faulty_job(block="THREADS * 8"))  # the default: 1024 threads, fine
    try:
        too_big = backend.evaluate(mode(0, 256))  # 2048 threads per block
        assert too_big.failure is Failure.RESOURCES and "2048 threads" in too_big.detail
    finally:
        backend.close()


def test_fault_and_hang_are_survived_by_the_worker() -> None:
    job = faulty_job()
    worker = IsolatedBackend("cupy")
    worker.open(dataclasses.replace(job, timing=dataclasses.replace(QUICK, trial_timeout_s=10.0)))
    try:
        assert worker.evaluate(mode(0)).ok
        faulted = worker.evaluate(mode(3))
        print(show(faulted))
        assert faulted.failure is Failure.FAULT and "illegal" in faulted.detail.lower()
        assert worker.evaluate(mode(0, 64)).ok
        hung = worker.evaluate(mode(4))
        print(show(hung))
        assert hung.failure is Failure.TIMEOUT
        after = worker.evaluate(mode(0, 256))
        assert after.ok, after.detail
        assert worker.restarts == 2
    finally:
        worker.close()
