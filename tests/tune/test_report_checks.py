"""The tune report states the correctness checks and the finalists the last checks rejected, by class."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from rich.console import Console

from cutune.cli_render.tune import render_result
from cutune.gpu.backend import Check, Failure
from cutune.template.model import Config
from cutune.tune import TuneOptions, read_result, stored_result_path, tune
from tests.tune.fake_backend import SPEC, FakeBackend, make_job


class FakeCheckingBackend(FakeBackend):
    """The table's fake backend, whose best finalists (VEC=4, UNROLL=2) fail a fresh-input re-check and
    whose first winner after them has a sanitizer finding (a fake: no GPU runs here)."""

    sanitized = 0

    def verify(self, config: Config, seed: int) -> Check | None:
        if config["VEC"] == 4 and config["UNROLL"] == 2:
            return Check(config, Failure.WRONG, "differs on fresh inputs")
        return Check(config)

    def sanitize(self, configs: Sequence[Config]) -> tuple[Check, ...] | None:
        self.sanitized += 1
        failure = Failure.OUT_OF_BOUNDS if self.sanitized == 1 else None
        return tuple(Check(c, failure, "invalid __global__ read" if failure else "clean") for c in configs)


def test_the_report_states_the_checks_and_the_rejected_finalists_by_class_fake_backend(options: TuneOptions) -> None:
    job = make_job(spec=dataclasses.replace(SPEC, multiple_of={"N": 8}))
    backend = FakeCheckingBackend()
    wider = dataclasses.replace(options.selection, top_k=8)  # finalists beyond the three rejected ones
    result = tune(job, backend, dataclasses.replace(options, sanitize=True, selection=wider))
    assert backend.sanitized == 2
    assert result.rejected == {"re-check": {"wrong": 3}, "sanitizer": {"out_of_bounds": 1}}
    assert result.significant and (result.best["VEC"], result.best["UNROLL"]) != (4, 2)
    assert "ragged size" in result.checks and "N a multiple of 8" in result.checks
    assert read_result(stored_result_path(options, job)).rejected == result.rejected  # in the JSON too
    console = Console(width=200, record=True)
    console.print(render_result(result))
    text = " ".join(console.export_text().split())  # the caption wraps
    assert "N a multiple of 8 (multiple_of in the spec)" in text
    assert "finalists rejected by the re-check: 3 wrong" in text
    assert "finalists rejected by the sanitizer: 1 out_of_bounds" in text


def test_a_clean_run_says_no_finalist_was_rejected(options: TuneOptions) -> None:
    result = tune(make_job(), FakeBackend(), options)
    assert result.rejected == {}
    console = Console(width=200, record=True)
    console.print(render_result(result))
    assert "no finalist was rejected" in console.export_text()


def test_a_replayed_report_claims_no_checks_of_its_own(options: TuneOptions) -> None:
    from cutune.gpu.replay import ReplaySource

    result = dataclasses.replace(
        tune(make_job(spec=dataclasses.replace(SPEC, multiple_of={"N": 8})), FakeBackend(), options),
        replayed=ReplaySource("scale.jsonl", "NVIDIA H200", "2026-11-21"),
    )
    console = Console(width=200, record=True)
    console.print(render_result(result))
    text = " ".join(console.export_text().split())
    assert "replayed verdicts, as checked by the run that made the recording" in text
    assert "multiple of 8" not in text  # today's spec says nothing of what the recorded run checked
