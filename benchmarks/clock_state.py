"""Whether the GPU's clock state explains why two `tune` runs' confirmed speedups differ at few-µs sizes.

    python -m benchmarks.clock_state OUT_DIR [--only rms_norm] [--rounds 3] [--load-s 60] [--search 100]

selection_cost run 10 (H200, 2026-11-28) picked the same rms_norm configuration at every size in all three runs,
yet in the first run every median, the original's and the tuned kernel's alike, at every size below ~60 µs, was
about 0.19 µs longer than in the two later runs: an additive shift shared by one run's measurements, which moves
a few-µs size's ratio by up to 2.6%. Buffer placement (benchmarks/reopen_spread.py) moves kernels apart, not
together. A shift of every kernel together is what a different SM clock does to the part of a short kernel's
time that is latency (launch processing, a row's dependent loads and reductions), while the memory-bound large
sizes barely move.

The experiment, in one process: phases `cold` (just after start), `after load` (right after `--load-s` seconds of a
memory-bound kernel at the largest size), `after idle` (after as many seconds idle), `after load` again, then
`after a search` (the same backend first evaluates `--search` random configurations of the space, as a run's
search does before its selection: modules loaded, memory pool grown) and `fresh again`. In each, a fresh backend
(but `after a search`'s) measures the original and the run-9 winners (`measure_rounds`, `--rounds` rounds), with
the SM clock measured on the GPU just before and after (one block spins ~2 ms: clock64 cycles over globaltimer
nanoseconds), and nvidia-smi's temperature, power and clock-event reasons. If the originals' medians shift with
the measured clock, the cause is the clock state, which the run does not control (locking clocks needs
administrator rights); if they shift with the clock constant, it is not.

Writes OUT_DIR/clock_state.<device>.<date>.json and .md.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.reopen_spread import ROOT, SAMPLES, WINNERS, one_repeat
from benchmarks.reports import new_report, write_report

from cutune.gpu.backend import Job, TimingOptions
from cutune.gpu.cupy_backend import CupyBackend
from cutune.project import build_job, open_kernel
from cutune.template.model import Config
from cutune.workflow.variants import variants_of, with_combined

_PROBE = r"""
extern "C" __global__ void cutune_clock_probe(unsigned long long spin_ns, unsigned long long* out) {
  unsigned long long t0, t1, c0 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1)); } while (t1 - t0 < spin_ns);
  out[0] = clock64() - c0;
  out[1] = t1 - t0;
}
"""
_SMI = "temperature.gpu,power.draw,clocks.sm,clocks.mem,clocks_event_reasons.active"


def sm_mhz() -> float:
    """The SM clock over ~2 ms of one spinning block: cycles per nanosecond × 1000."""
    import cupy

    probe = cupy.RawKernel(_PROBE, "cutune_clock_probe")
    out = cupy.zeros(2, dtype=cupy.uint64)
    probe((1,), (1,), (cupy.uint64(2_000_000), out))
    cycles, ns = (int(v) for v in out.get())
    return cycles / ns * 1000.0


def smi() -> dict[str, str]:
    """nvidia-smi's view of the GPU now (its numbers are sampled, so only a rough second witness)."""
    try:
        line = subprocess.run(
            ["nvidia-smi", f"--query-gpu={_SMI}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError) as exc:
        return {"error": str(exc)}
    return dict(zip(_SMI.split(","), (v.strip() for v in line.split(",")), strict=False))


def load(job: Job, original: Config, seconds: float) -> None:
    """Keeps the GPU busy with the original at the largest size for `seconds` (a backend of its own)."""
    backend = CupyBackend()
    backend.open(job)
    try:
        largest = [len(job.spec.sizes) - 1]
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            backend.evaluate(original, at=largest)
    finally:
        backend.close()


def random_configs(job: Job, n: int, seed: int = 0) -> list[Config]:
    """`n` configurations drawn at random from the job's space (some may break its constraints: they fail)."""
    rng = random.Random(seed)
    return [Config.of({p.name: rng.choice(p.values) for p in job.space.params}) for _ in range(n)]


def phase(
    job: Job, original: Config, candidates: list[Config], rounds: int, name: str, search: int = 0
) -> dict[str, Any]:
    """A fresh backend's measurements (after `search` random configurations evaluated on it), with the SM clock
    just before and after them."""
    backend = CupyBackend()
    backend.open(job)
    try:
        if search:
            configs = random_configs(job, search)
            backend.prefetch(configs)
            for config in configs:
                backend.evaluate(config)
        before = sm_mhz()
        sizes = one_repeat(backend, original, candidates, rounds)
        after = sm_mhz()
    finally:
        backend.close()
    return {"phase": name, "sm_mhz_before": before, "sm_mhz_after": after, "smi": smi(), "sizes": sizes}


def markdown(report: dict[str, Any]) -> str:
    """Per phase: the clock, and the original's median and the first winner's ratio at each size."""
    lines = [f"# Clock state and few-µs medians ({report['device']}, {report['date']})"]
    for sample, phases in report["samples"].items():
        sizes = phases[0]["sizes"]
        head = " | ".join(", ".join(f"{k}={v}" for k, v in s["size"].items()) for s in sizes)
        lines += ["", f"## {sample}: original's median µs / first winner's ratio", ""]
        lines += [f"| phase | SM MHz before–after | {head} |", "|---" * (len(sizes) + 2) + "|"]
        for p in phases:
            cells = " | ".join(f"{s['original_us']:.2f} / {s['ratios'][0]:.3f}" for s in p["sizes"])
            lines.append(f"| {p['phase']} | {p['sm_mhz_before']:.0f}–{p['sm_mhz_after']:.0f} | {cells} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """The phases on each sample; the report written."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", default="rms_norm")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--load-s", type=float, default=60.0)
    ap.add_argument("--search", type=int, default=100, help="random configurations evaluated before `after a search`")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report = new_report()
    for sample in args.only.split(","):
        ctx = open_kernel(ROOT / "samples" / f"{sample}.cu", SAMPLES[sample])
        job = build_job(with_combined(ctx, variants_of(ctx)), timing=TimingOptions(mode="events"))
        original = job.space.default()
        candidates = [Config.of({**original, **w}) for w in WINNERS[sample]]
        phases = [phase(job, original, candidates, args.rounds, "cold")]
        for name in ("after load", "after idle", "after load", "after a search", "fresh again"):
            if name == "after idle":
                time.sleep(args.load_s)
            elif name == "after load":
                load(job, original, args.load_s)
            search = args.search if name == "after a search" else 0
            phases.append(phase(job, original, candidates, args.rounds, name, search))
            p = phases[-1]
            print(f"{sample} [{name}]: SM {p['sm_mhz_before']:.0f}–{p['sm_mhz_after']:.0f} MHz, {p['smi']}", flush=True)
        report["samples"][sample] = phases
    write_report(args.out, "clock_state", report, markdown(report))


if __name__ == "__main__":
    main()
