"""Recording measurements as JSON lines and replaying them without a GPU."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from cutune.errors import CutuneError
from cutune.gpu.backend import Check, CompileInfo, DeviceInfo, Failure, Job, Measurement, Timing, TimingOptions
from cutune.gpu.replay import (
    RecordingBackend,
    ReplayBackend,
    ReplaySource,
    header_for,
    read_recording,
    replay_source,
)
from cutune.limits import limits_for
from cutune.project import build_job, open_kernel
from cutune.spec import load_spec
from cutune.template.model import Config, Value
from cutune.tune.study import study_key
from tests.gpu.jobs import tiny_job
from tests.tune.fake_backend import FakeBackend

PARAMS: dict[str, tuple[Value, ...]] = {"threads": (128, 256, 512), "fast_math": (False, True)}
JOB = tiny_job(PARAMS, sizes=({"n": 4096}, {"n": 1 << 20}))
DEVICE = DeviceInfo(
    name="NVIDIA H100 80GB HBM3",
    arch="sm_90",
    sm_count=132,
    l2_bytes=50 << 20,
    copy_bandwidth_gbs=3000.0,
    empty_launch_us=2.9,
    driver="13.0",
    limits=limits_for("sm_90"),
)


def config(threads: int, fast_math: bool = False) -> Config:
    return Config.of({"threads": threads, "fast_math": fast_math})


def timing(us: float, n: int = 4096) -> Timing:
    return Timing(size={"n": n}, median_us=us, p10_us=us * 0.98, p90_us=us * 1.03, reps=30)


MEASURED = [
    Measurement(
        config(128),
        timings=(timing(10.0), timing(80.0, 1 << 20)),
        compile=CompileInfo(registers=32, local_bytes=0, max_threads_per_block=1024, compile_seconds=0.03),
        max_error=0.25,
        extra={"occupancy": 1.0},
    ),
    Measurement(config(256), timings=(timing(9.0), timing(70.0, 1 << 20)), max_error=0.0),
    Measurement(
        config(512, True),
        failure=Failure.WRONG,
        max_error=math.inf,
        detail="at n=4096: out: 1 of 4096 elements differ",
    ),
    Measurement(config(256), timings=(timing(9.5), timing(71.0, 1 << 20)), max_error=0.0),
]


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "k.h100.jsonl"
    lines = [header_for(JOB, DEVICE), *({"type": "measurement", **m.to_dict()} for m in MEASURED)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_measurements_survive_the_json_round_trip() -> None:
    for m in MEASURED:
        assert Measurement.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    assert DeviceInfo.from_dict(json.loads(json.dumps(DEVICE.to_dict()))) == DEVICE


def test_replay_serves_what_was_recorded(recording: Path) -> None:
    replay = ReplayBackend(recording)
    assert replay.open(JOB) == DEVICE
    assert replay.evaluate(config(128)) == MEASURED[0]
    wrong = replay.evaluate(config(512, True))
    assert wrong.failure is Failure.WRONG and math.isinf(wrong.max_error or 0)


def test_repeated_measurements_are_served_in_turn(recording: Path) -> None:
    replay = ReplayBackend(recording)
    replay.open(JOB)
    medians = [replay.evaluate(config(256)).timings[0].median_us for _ in range(3)]
    assert medians == [9.0, 9.5, 9.0]


def test_unrecorded_configurations_are_infeasible(recording: Path) -> None:
    replay = ReplayBackend(recording)
    replay.open(JOB)
    missing = replay.evaluate(config(128, True))
    assert missing.failure is Failure.INFEASIBLE and missing.detail == "not recorded"


def test_noise_is_seeded_and_deterministic(recording: Path) -> None:
    def medians(seed: int) -> list[float]:
        replay = ReplayBackend(recording, noise=0.05, seed=seed)
        replay.open(JOB)
        return [replay.evaluate(config(128)).timings[0].median_us for _ in range(50)]

    first = medians(1)
    assert first == medians(1) != medians(2)
    assert len(set(first)) == 50
    ratios = [m / 10.0 for m in first]
    assert min(ratios) > 0.8 and max(ratios) < 1.25
    assert (max(ratios) - min(ratios)) / 4 > 0.02  # noise is really there, about 5% per sigma


def test_recorder_writes_each_measurement_as_it_is_made(recording: Path, tmp_path: Path) -> None:
    out = tmp_path / "again.jsonl"
    recorder = RecordingBackend(ReplayBackend(recording), out)
    assert recorder.open(JOB) == DEVICE
    recorder.evaluate(config(128))
    # still open: the line is already on disk, so a killed process keeps it
    assert read_recording(out).measurements == (MEASURED[0],)
    recorder.evaluate(config(512, True))
    recorder.evaluate(config(128, True))
    recorder.close()
    again = read_recording(out)
    assert again.device == DEVICE
    assert again.header["source_sha256"] == read_recording(recording).header["source_sha256"]
    assert [m.failure for m in again.measurements] == [None, Failure.WRONG, Failure.INFEASIBLE]


def test_appending_keeps_earlier_trials(recording: Path, tmp_path: Path) -> None:
    out = tmp_path / "resumed.jsonl"
    for threads in (128, 256):
        recorder = RecordingBackend(ReplayBackend(recording), out, append=True)
        recorder.open(JOB)
        recorder.evaluate(config(threads))
        recorder.close()
    assert [m.config for m in read_recording(out).measurements] == [config(128), config(256)]


class FakeCheckingInner(ReplayBackend):
    """A fake inner backend (a replay that answers re-checks and the sanitizer as a GPU backend would)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.asked: list[tuple[str, object]] = []

    def verify(self, config: Config, seed: int) -> Check | None:
        self.asked.append(("verify", (config, seed)))
        return Check(config, Failure.WRONG, "differs on fresh inputs")

    def sanitize(self, configs: Sequence[Config]) -> tuple[Check, ...] | None:
        self.asked.append(("sanitize", tuple(configs)))
        return tuple(Check(c, Failure.OUT_OF_BOUNDS, "invalid read") for c in configs)


def test_recorder_passes_re_checks_and_the_sanitizer_to_a_fake_inner_backend(recording: Path, tmp_path: Path) -> None:
    inner = FakeCheckingInner(recording)
    recorder = RecordingBackend(inner, tmp_path / "again.jsonl")
    recorder.open(JOB)
    assert recorder.verify(config(256), 7) == Check(config(256), Failure.WRONG, "differs on fresh inputs")
    assert recorder.sanitize([config(128), config(256)]) == (
        Check(config(128), Failure.OUT_OF_BOUNDS, "invalid read"),
        Check(config(256), Failure.OUT_OF_BOUNDS, "invalid read"),
    )
    recorder.close()
    assert inner.asked == [("verify", (config(256), 7)), ("sanitize", (config(128), config(256)))]
    assert RecordingBackend(ReplayBackend(recording), tmp_path / "b.jsonl").verify(config(128), 1) is None


def test_an_unfinished_last_line_is_skipped(recording: Path) -> None:
    text = recording.read_text()
    recording.write_text(text + '{"type": "measurement", "config": {"thre')
    assert len(read_recording(recording).measurements) == len(MEASURED)
    recording.write_text(text.replace('"type": "measurement"', "garbage", 1))
    with pytest.raises(CutuneError, match=":2: not a JSON line"):
        read_recording(recording)


def test_a_file_without_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"type": "measurement", **MEASURED[0].to_dict()}) + "\n")
    with pytest.raises(CutuneError, match="no header"):
        ReplayBackend(path).open(JOB)


@pytest.mark.parametrize(
    ("job", "reason"),
    [
        (tiny_job(PARAMS, sizes=JOB.spec.sizes, source="// edited\n"), "the kernel's source changed since it was"),
        (tiny_job({"threads": (128, 256)}, sizes=JOB.spec.sizes), "the tuning space differs (parameters fast_math"),
        (tiny_job(PARAMS, sizes=({"n": 4096}, {"n": 8192})), "size n=8192 was not recorded"),
        (
            dataclasses.replace(JOB, spec=dataclasses.replace(JOB.spec, grid=("2",))),
            "the tuning spec changed since it was recorded: grid[0]",
        ),
        (dataclasses.replace(JOB, timing=TimingOptions(mode="graph")), "it was timed with events timing, not graph"),
    ],
    ids=["source", "space", "sizes", "spec", "timing"],
)
def test_a_recording_that_does_not_match_is_an_error_with_the_reason(recording: Path, job: Job, reason: str) -> None:
    with pytest.raises(CutuneError, match=re.escape(f"this recording does not match k: {reason}")):
        ReplayBackend(recording).open(job)
    ReplayBackend(recording).open(JOB)


def test_a_replay_says_where_its_timings_come_from(recording: Path) -> None:
    replay = ReplayBackend(recording)
    replay.open(JOB)
    date = read_recording(recording).header["date"][:10]
    assert replay_source(replay) == ReplaySource(str(recording), DEVICE.name, read_recording(recording).header["date"])
    assert replay_source(RecordingBackend(replay, recording.with_suffix(".copy"))) == replay.source
    assert replay.source is not None
    assert replay.source.label() == f"replayed from k.h100.jsonl (NVIDIA H100 80GB HBM3, {date})"
    assert replay_source(FakeBackend()) is None


def test_a_subset_of_the_recorded_sizes_is_served_its_own_timings(recording: Path, tmp_path: Path) -> None:
    """A run measures held-out sizes as a second job: the recorder continues its file, and the replay
    serves each job the measurements made at its sizes."""
    out = tmp_path / "two-jobs.jsonl"
    recorder = RecordingBackend(ReplayBackend(recording), out)
    recorder.open(JOB)
    recorder.evaluate(config(128))
    recorder.close()
    held = tiny_job(PARAMS, sizes=({"n": 1 << 20},))
    with out.open("a") as f:  # what the GPU run would have measured at the held-out size
        f.write(
            json.dumps({"type": "measurement", **Measurement(config(128), timings=(timing(77.0, 1 << 20),)).to_dict()})
            + "\n"
        )
    replay = ReplayBackend(out)
    replay.open(JOB)
    assert [t.median_us for t in replay.evaluate(config(128)).timings] == [10.0, 80.0]
    replay.open(held)
    assert [t.median_us for t in replay.evaluate(config(128)).timings] == [77.0]
    recorder = RecordingBackend(ReplayBackend(recording), out)
    recorder.open(JOB)
    recorder.close()
    recorder.open(held)  # a second job of the same run continues the file
    recorder.close()
    assert len([line for line in out.read_text().splitlines() if '"header"' in line]) == 2


def test_a_measurement_at_some_sizes_is_recorded_and_served_at_those(recording: Path, tmp_path: Path) -> None:
    """`evaluate(config, at)`: a recording made at every size serves the sizes asked for; one made at those
    sizes alone (the recorder passes `at` on) is served before it."""
    replay = ReplayBackend(recording)
    replay.open(JOB)
    assert [t.median_us for t in replay.evaluate(config(128), [1]).timings] == [80.0]
    out = tmp_path / "some-sizes.jsonl"
    recorder = RecordingBackend(FakeBackend(time_of=lambda c, size: 60.0, noise=0.0), out)
    recorder.open(JOB)
    recorder.evaluate(config(256))
    recorder.evaluate(config(128), [1])
    recorder.close()
    recorded = read_recording(out).measurements
    assert [[t.size["n"] for t in m.timings] for m in recorded] == [[4096, 1 << 20], [1 << 20]]
    replay = ReplayBackend(out)
    replay.open(JOB)
    assert [t.median_us for t in replay.evaluate(config(128), [1]).timings] == [60.0]
    assert replay.evaluate(config(128)).failure is Failure.INFEASIBLE  # not recorded at every size


RECORDINGS = sorted((Path(__file__).parents[1] / "data/gpu/recordings").glob("*.jsonl"))


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_the_recorded_gpu_sweeps_replay(path: Path) -> None:
    recorded = read_recording(path)
    assert recorded.device.name == "NVIDIA H200" and recorded.device.limits is not None
    assert 4000 < recorded.device.copy_bandwidth_gbs < 4500
    default = recorded.measurements[0]
    assert all(m.ok and (m.max_error or 0) <= 1 for m in recorded.measurements)
    names = set(recorded.header["params"])
    job = tiny_job({name: tuple(values) for name, values in recorded.header["params"].items()})
    replay = ReplayBackend(path, strict=False)
    replay.open(job)  # a timing sweep onto another job: not strict, only a warning
    assert set(default.config) == names
    assert replay.evaluate(default.config) == default


# a spec file whose changes replay must tell apart: comments and check-only keys, or what is measured
SPEC_TEXT = """\
# the kernel k of the tests
[kernel.k]
grid = "1"
block = "1"
sizes = [{ n = 4096 }, { n = 1048576 }]

[[kernel.k.args]]
name = "x"
dtype = "float32"
role = "out"
shape = ["n"]
"""
# the same measurements: comments added and moved, a check-only key (multiple_of), size weights
COMMENTED = (
    SPEC_TEXT.replace("# the kernel k of the tests\n", "")
    .replace('block = "1"', 'block = "1"  # one thread\n# tails keep n even\nmultiple_of = { n = 2 }')
    .replace("sizes = [{ n = 4096 }, { n = 1048576 }]", "sizes = [{ n = 4096, weight = 2 }, { n = 1048576 }]")
)
RESCALED = SPEC_TEXT.replace('shape = ["n"]', 'shape = ["n"]\nscale = 2.0')  # other inputs: other timings


def spec_job(path: Path, text: str) -> Job:
    """JOB with its spec read from `text`, written at `path`."""
    path.write_text(text)
    return dataclasses.replace(JOB, spec=load_spec(path).kernel("k"))


def write_recording(path: Path, header: dict[str, object]) -> Path:
    lines = [header, *({"type": "measurement", **m.to_dict()} for m in MEASURED)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def format_1(job: Job, text: str) -> dict[str, object]:
    """A header as format 1 wrote it: the hash of the spec file's text, no canonical form."""
    header = {k: v for k, v in header_for(job, DEVICE).items() if k != "spec"}
    return {**header, "format": 1, "spec_sha256": hashlib.sha256(text.encode()).hexdigest()}


def git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=folder,
        check=True,
        capture_output=True,
    )


def test_comments_and_check_only_keys_do_not_change_the_spec(tmp_path: Path) -> None:
    recorded = spec_job(tmp_path / "k.tune.toml", SPEC_TEXT)
    path = write_recording(tmp_path / "k.jsonl", header_for(recorded, DEVICE))
    replay = ReplayBackend(path)
    assert replay.open(spec_job(tmp_path / "k.tune.toml", COMMENTED)) == DEVICE
    assert replay.source is not None and replay.source.matched == "spec" and replay.source.note == ""
    rescaled = spec_job(tmp_path / "k.tune.toml", RESCALED)
    reason = "this recording does not match k: the tuning spec changed since it was recorded: args[0].scale; record"
    with pytest.raises(CutuneError, match=re.escape(reason)):
        ReplayBackend(path).open(rescaled)


def test_a_size_that_was_not_recorded_is_refused_with_that_reason(tmp_path: Path) -> None:
    recorded = spec_job(tmp_path / "k.tune.toml", SPEC_TEXT)
    path = write_recording(tmp_path / "k.jsonl", header_for(recorded, DEVICE))
    resized = spec_job(tmp_path / "k.tune.toml", SPEC_TEXT.replace("1048576", "2097152"))
    with pytest.raises(CutuneError, match=re.escape("does not match k: size n=2097152 was not recorded")):
        ReplayBackend(path).open(resized)
    # fewer sizes than recorded (e.g. the held-out ones) are served what was measured at them
    ReplayBackend(path).open(spec_job(tmp_path / "k.tune.toml", SPEC_TEXT.replace(", { n = 1048576 }", "")))


def test_a_format_1_recording_of_this_very_text_is_accepted(tmp_path: Path) -> None:
    job = spec_job(tmp_path / "k.tune.toml", SPEC_TEXT)
    path = write_recording(tmp_path / "k.jsonl", format_1(job, SPEC_TEXT))
    replay = ReplayBackend(path)
    replay.open(job)
    assert replay.source is not None and replay.source.matched == "text"
    assert replay.source.label() == f"replayed from k.jsonl (NVIDIA H100 80GB HBM3, {replay.source.date[:10]})"
    # outside git, an edited text cannot be compared with the one recorded: refused, saying why
    with pytest.raises(CutuneError, match="a format 1 recording keeps only a hash of the spec file's text"):
        ReplayBackend(path).open(spec_job(tmp_path / "k.tune.toml", COMMENTED))


def test_a_format_1_recording_of_an_earlier_text_in_git_is_compared_by_what_changed(tmp_path: Path) -> None:
    spec = tmp_path / "k.tune.toml"
    job = spec_job(spec, SPEC_TEXT)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "k.tune.toml")
    git(tmp_path, "commit", "-q", "-m", "the spec as recorded")
    path = write_recording(tmp_path / "k.jsonl", format_1(job, SPEC_TEXT))
    replay = ReplayBackend(path)
    replay.open(spec_job(spec, COMMENTED))  # edited since, uncommitted: only comments and check-only keys
    assert replay.source is not None and replay.source.matched == "earlier text"
    assert re.fullmatch(
        r"replayed from k\.jsonl \(NVIDIA H100 80GB HBM3, \d{4}-\d\d-\d\d\); recorded with an earlier text of "
        r"this spec \(commit [0-9a-f]{12}\); only comments/check-only keys differ",
        replay.source.label(),
    )
    git(tmp_path, "commit", "-q", "-am", "comments")  # the recorded text is now two commits back
    ReplayBackend(path).open(spec_job(spec, COMMENTED))
    with pytest.raises(CutuneError, match=r"the tuning spec changed since it was recorded \(its text of commit "):
        ReplayBackend(path).open(spec_job(spec, RESCALED))
    with pytest.raises(CutuneError, match=re.escape("args[0].scale; record it again")):
        ReplayBackend(path).open(spec_job(spec, RESCALED))


def test_replayed_studies_are_apart_from_measured_ones_and_named_briefly(recording: Path) -> None:
    replay = ReplayBackend(recording)
    replay.open(JOB)
    measured, replayed = study_key(JOB, DEVICE), study_key(JOB, DEVICE, replay)
    assert replayed.name != measured.name and replayed.device.startswith("NVIDIA H100 80GB HBM3 replay ")
    assert replayed.name.count("H100") == 1 and len(replayed.name) < 80, replayed.name
    assert study_key(JOB, DEVICE, ReplayBackend(recording.rename(recording.with_name("other.jsonl")))) != replayed


ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {
    "silu_and_mul": ("silu_and_mul_kernel", "silu_and_mul.tune.NVIDIA-H200.2026-11-21.jsonl"),
    "merge_attn_states": ("merge_attn_states_kernel", "merge_attn_states.tune.NVIDIA-H200.2026-11-21.jsonl"),
}


@pytest.mark.parametrize("stem", SHIPPED)
def test_the_shipped_h200_recordings_replay_onto_the_samples_as_they_are(stem: str) -> None:
    """The README's replay commands: the samples' specs gained comments and multiple_of since, and the
    recordings carry the canonical spec they were made with (no git history needed)."""
    kernel, recording = SHIPPED[stem]
    ctx = open_kernel(ROOT / "samples" / f"{stem}.cu", kernel)
    replay = ReplayBackend(ROOT / "benchmarks" / "results" / "recordings" / recording)
    replay.open(dataclasses.replace(build_job(ctx), space=ctx.space))
    assert replay.source is not None and replay.source.device == "NVIDIA H200"
    assert replay.source.matched == "spec"
