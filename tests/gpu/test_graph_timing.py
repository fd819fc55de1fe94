"""Graph timing on a real GPU: each measurement times N back-to-back launches of a CUDA graph that cycle
through rotated input copies, and the backend and the floor are timed that way under `--timing graph`; event
timing cycles through a few placements of the arguments."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cutune.gpu.backend import TimingOptions
from cutune.gpu.cupy_backend import CupyBackend
from cutune.gpu.harness import PLACEMENTS, Timer, rotation_count
from cutune.project import build_job, open_kernel

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
_COUNT = r"""
extern "C" __global__ void count_launch(unsigned long long* hits) { atomicAdd(hits, 1ULL); }
"""


def test_each_measurement_times_n_launches_cycling_through_the_rotated_inputs() -> None:
    import cupy

    kernel = cupy.RawKernel(_COUNT, "count_launch")
    copies = [cupy.zeros(1, dtype=cupy.uint64) for _ in range(3)]
    launches = [lambda h=h: kernel((1,), (1,), (h,)) for h in copies]
    n, reps = 12, 5
    options = TimingOptions(mode="graph", graph_launches=n, warmup=0, reps=reps, min_time_ms=0.0, max_reps=reps)
    samples = Timer(50 * 2**20).time_graph(launches, options)
    cupy.cuda.runtime.deviceSynchronize()
    assert len(samples) == reps and all(0 < s < 50.0 for s in samples)  # µs per launch, not per graph
    # one graph launch before timing, then one per repetition; each graph launches every copy n / 3 times
    assert [int(h.get()[0]) for h in copies] == [(n // 3) * (reps + 1)] * 3


def test_the_backend_times_graphs_over_rotated_copies_its_floor_the_same_way_and_events_over_placements() -> None:
    import cupy

    ctx = open_kernel(ROOT / "samples" / "rms_norm.cu", "rms_norm_kernel")
    quick = TimingOptions(warmup=1, reps=10, min_time_ms=1.0, max_reps=200)
    events, graph = CupyBackend(), CupyBackend()
    job = build_job(ctx, timing=quick)
    try:
        info_events = events.open(job)
        info_graph = graph.open(dataclasses.replace(job, timing=dataclasses.replace(quick, mode="graph")))
        original = job.space.default()
        by_events, by_graph = events.evaluate(original), graph.evaluate(original)
        assert by_events.ok and by_graph.ok, (by_events.detail, by_graph.detail)
        assert info_graph.empty_launch_us > 0 and info_events.empty_launch_us > 0
        l2 = info_graph.l2_bytes
        for problem in graph._problems:
            if not problem.timed:
                continue
            rotation = graph._rotation(problem)
            launch_bytes = sum(a.nbytes for a in problem.arrays.values())
            assert len(rotation) == rotation_count(launch_bytes, l2)
            pointers = {next(a for a in args if isinstance(a, cupy.ndarray)).data.ptr for args in rotation}
            assert len(pointers) == len(rotation)  # every copy its own buffers
        for problem in events._problems:  # event timing built its placements when it timed the original
            if not problem.timed:
                continue
            placed = events._rotations[tuple(sorted(problem.size.items()))]
            launch_bytes = sum(a.nbytes for a in problem.arrays.values())
            assert len(placed) == min(PLACEMENTS, rotation_count(launch_bytes, l2))
            pointers = {next(a for a in args if isinstance(a, cupy.ndarray)).data.ptr for args in placed}
            assert len(pointers) == len(placed)
        for e, g in zip(by_events.timings, by_graph.timings, strict=True):
            print(f"{e.size}: events {e.median_us:.2f} µs, graph {g.median_us:.2f} µs per launch")
        floors = f"{info_events.empty_launch_us:.2f} µs (events), {info_graph.empty_launch_us:.2f} µs (graph)"
        print(f"floor: an empty launch takes {floors}")
    finally:
        events.close()
        graph.close()
