"""The measured agent loop with scripted LLM answers from a real local HTTP server, real nvcc compiles and
real Optuna storage; the GPU is a mock (this machine has none), so each test's name says so."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from cutune.agent.record import Outcome, StepLog
from cutune.agent.settings import AgentSettings
from cutune.agent.sources import LLMVariants
from cutune.agent.steps import LoopOptions, MeasuredLoopStop, run_loop
from cutune.gpu.backend import Failure
from cutune.project import KernelContext, tune_options
from tests.agent.llm_server import FakeLLM, Reply, completion
from tests.agent.mock_gpu import MockGpuBackend

# over the templatized kernel's parameters, as the prompt shows them (`d` is specialised: `d_rt`, `D_CT`)
SCALAR_BODY = """\
  const int d = D_CT > 0 ? D_CT : d_rt;
  const int64_t token = blockIdx.x;
  const T* x = input + token * 2 * d;
  const T* y = x + d;
  T* o = out + token * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    o[i] = static_cast<T>(silu(static_cast<float>(x[i])) * static_cast<float>(y[i]));
  }"""


def variant_reply(name: str, body: str = SCALAR_BODY, *, reason: str = "one scalar pass per row") -> Reply:
    """A scripted answer: a variant with its own block size."""
    answer = {
        "name": name,
        "body": body,
        "params": [{"name": f"{name.upper()}_THREADS", "values": [256, 512], "default": 256}],
        "launch": {"grid": ["num_tokens"], "block": [f"min(d, {name.upper()}_THREADS)"]},
        "reason": reason,
        "done": False,
    }
    return completion(f"Here is the variant.\n```json\n{json.dumps(answer)}\n```")


def loop(
    ctx: KernelContext, url: str, tmp_path: Path, gpu: MockGpuBackend, *, steps: int = 3, timeout: float = 10.0
) -> tuple[object, AgentSettings]:
    settings = AgentSettings(kind="openai", base_url=url, model="tuner-7b", timeout=timeout)
    options = tune_options(ctx, trials=8, seconds=None, storage_url=f"sqlite:///{tmp_path / 'studies.db'}")
    options = dataclasses.replace(options, workspace=tmp_path)  # results stored under tmp_path/.cutune
    run = run_loop(
        ctx,
        LLMVariants(settings),
        lambda: gpu,
        options,
        LoopOptions(max_steps=steps, patience=3, trials=8, profile=False),
    )
    return run, settings


@pytest.mark.nvcc
def test_scripted_llm_variant_that_wins_is_kept_on_a_mock_gpu(
    silu: KernelContext, llm: FakeLLM, api_key: str, tmp_path: Path
) -> None:
    llm.queue(variant_reply("scalar_rows"), completion('{"done": true, "reason": "at the floor"}'))
    gpu = MockGpuBackend(speed={"scalar_rows": 0.5})
    run, _ = loop(silu, llm.url, tmp_path, gpu)
    first = run.records[0]
    assert first.outcome is Outcome.KEPT and first.source == "openai" and first.variant == "scalar_rows"
    assert first.speedup is not None and first.speedup > 1.9 and first.best["VARIANT"] == 1
    assert set(first.pct_of_floor) == {
        "num_tokens=16 d=4096",
        "num_tokens=256 d=11008",
        "num_tokens=1024 d=4096",
        "num_tokens=4096 d=14336",
    }
    assert [v.name for v in run.kept] == ["scalar_rows"] and run.stop is MeasuredLoopStop.DONE
    # only the extracted device code went out: the host entry point and torch includes stayed home
    user = llm.requests[0].body["messages"][1]["content"]
    assert "silu_and_mul_kernel" in user and "__device__" in user
    assert "torch::Tensor" not in user and "torch/extension.h" not in user
    assert "% of the floor" in llm.requests[1].body["messages"][1]["content"]  # the analysis of step 0


@pytest.mark.nvcc
def test_scripted_variant_that_wins_only_at_some_sizes_is_kept_and_both_are_launched_on_a_mock_gpu(
    silu: KernelContext, llm: FakeLLM, api_key: str, tmp_path: Path
) -> None:
    """The second variant is no faster overall, but twice as fast where the first one is not: the dispatch
    launches each where it wins, so the step counts as a gain and the kept variants are tuned together."""
    llm.queue(variant_reply("wide_rows"), variant_reply("narrow_rows"), completion('{"done": true}'))
    gpu = MockGpuBackend(
        speed={
            "wide_rows": lambda size: 0.5 if size["d"] > 4096 else 1.0,
            "narrow_rows": lambda size: 0.5 if size["d"] == 4096 else 1.0,
        }
    )
    run, _ = loop(silu, llm.url, tmp_path, gpu)
    assert [(r.variant, r.outcome) for r in run.records] == [("wide_rows", Outcome.KEPT), ("narrow_rows", Outcome.KEPT)]
    assert [v.name for v in run.kept] == ["wide_rows", "narrow_rows"]
    assert run.records[0].speedup is not None and run.records[0].speedup < 1.5  # wins at 2 sizes of 4
    assert run.records[1].speedup is not None and run.records[1].speedup > 1.9  # both launched: every size
    assert run.result is not None
    launched = {s.size["d"]: s.best_config["VARIANT"] for s in run.result.sizes}
    assert launched == {4096: 2, 11008: 1, 14336: 1}


@pytest.mark.nvcc
def test_scripted_wrong_variant_is_rejected_and_its_reason_fed_back_on_a_mock_gpu(
    silu: KernelContext, llm: FakeLLM, api_key: str, tmp_path: Path
) -> None:
    llm.queue(variant_reply("no_gate"), completion('{"done": true, "reason": "give up"}'))
    gpu = MockGpuBackend(
        failures={"no_gate": (Failure.WRONG, "out: 4096 of 65536 elements differ (max scaled error 31)")}
    )
    run, _ = loop(silu, llm.url, tmp_path, gpu)
    (step,) = run.records
    assert step.outcome is Outcome.REJECTED and "wrong" in step.reason and "65536 elements differ" in step.reason
    assert not run.kept
    fed_back = llm.requests[1].body["messages"][1]["content"]
    assert "no_gate" in fed_back and "65536 elements differ" in fed_back


@pytest.mark.nvcc
def test_scripted_faulting_and_hanging_variants_are_rejected_on_a_mock_gpu(
    silu: KernelContext, llm: FakeLLM, api_key: str, tmp_path: Path
) -> None:
    llm.queue(variant_reply("oob"), variant_reply("spin"), completion('{"done": true}'))
    gpu = MockGpuBackend(
        failures={
            "oob": (Failure.FAULT, "an illegal memory access was encountered; the worker was replaced"),
            "spin": (Failure.TIMEOUT, "no answer within 60 s; the worker was replaced"),
        }
    )
    run, _ = loop(silu, llm.url, tmp_path, gpu)
    assert [(r.variant, r.outcome) for r in run.records] == [("oob", Outcome.REJECTED), ("spin", Outcome.REJECTED)]
    assert "fault: an illegal memory access" in run.records[0].reason
    assert "timeout: no answer within 60 s" in run.records[1].reason
    assert "illegal memory access" in llm.requests[2].body["messages"][1]["content"]


@pytest.mark.nvcc
def test_scripted_variant_that_does_not_compile_never_reaches_the_mock_gpu(
    silu: KernelContext, llm: FakeLLM, api_key: str, tmp_path: Path
) -> None:
    llm.queue(variant_reply("typo", SCALAR_BODY.replace("blockDim.x", "blockDimm.x")), completion('{"done": true}'))
    gpu = MockGpuBackend()
    run, _ = loop(silu, llm.url, tmp_path, gpu)
    (step,) = run.records
    assert step.outcome is Outcome.REJECTED and step.reason.startswith("compile:") and "blockDimm" in step.reason
    assert all(variant != "typo" for variant, _ in gpu.evaluated)


@pytest.mark.nvcc
@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (completion("I would vectorise the loads and use more threads."), "not a JSON object"),
        (completion('{"name": "half", "body": "  for (int i = 0; i < d; ++i) {'), "not a JSON object"),
        (
            Reply(
                {
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "length",
                            "message": {"role": "assistant", "content": '{"name": "cut", "body": "int i = 0;'},
                        }
                    ]
                }
            ),
            "truncated",
        ),
        (completion('{"name": "x", "body": "asm(\\"trap;\\");"}'), "inline assembly"),
        (completion('{"name": "VARIANT", "body": "return;"}'), "cutune uses that name"),
    ],
)
def test_scripted_malformed_and_truncated_answers_fall_back_to_the_builtin_transforms(
    silu: KernelContext, llm: FakeLLM, api_key: str, tmp_path: Path, reply: Reply, why: str
) -> None:
    llm.queue(reply)
    run, _ = loop(silu, llm.url, tmp_path, MockGpuBackend(), steps=1)
    for record in run.records:
        assert record.source == "builtin" and why in record.reason and "openai failed" in record.reason
    assert run.records or run.stop is MeasuredLoopStop.DONE


@pytest.mark.nvcc
def test_scripted_timeout_falls_back_to_the_builtin_transforms(
    silu: KernelContext, llm: FakeLLM, api_key: str, tmp_path: Path
) -> None:
    llm.queue(Reply(variant_reply("late").body, delay=2.0))
    run, _ = loop(silu, llm.url, tmp_path, MockGpuBackend(), steps=1, timeout=0.5)
    assert run.stop in (MeasuredLoopStop.DONE, MeasuredLoopStop.BUDGET)
    for record in run.records:
        assert record.source == "builtin" and "no answer within 0.5 s" in record.reason


@pytest.mark.nvcc
def test_the_step_log_lives_in_the_study_storage_and_a_new_run_resumes_on_a_mock_gpu(
    silu: KernelContext, llm: FakeLLM, api_key: str, tmp_path: Path
) -> None:
    llm.queue(variant_reply("scalar_rows"), completion('{"done": true}'))
    gpu = MockGpuBackend(speed={"scalar_rows": 0.5, "wide": 0.4})
    loop(silu, llm.url, tmp_path, gpu)
    llm.replies.clear()
    llm.queue(variant_reply("wide"), completion('{"done": true}'))
    run, _ = loop(silu, llm.url, tmp_path, gpu)
    assert [(r.step, r.variant, r.outcome) for r in run.records] == [
        (0, "scalar_rows", Outcome.KEPT),
        (1, "wide", Outcome.KEPT),
    ]
    assert [v.name for v in run.kept] == ["scalar_rows", "wide"]
    assert "scalar_rows" in llm.requests[-2].body["messages"][1]["content"]  # the resumed history reached the prompt
    stored = StepLog(
        f"sqlite:///{tmp_path / 'studies.db'}",
        kernel="silu_and_mul_kernel",
        kernel_hash=run.records[0].variant and _hash(silu),
        device="Mock GPU",
    )
    assert [r.variant for r in stored.records()] == ["scalar_rows", "wide"]


def _hash(ctx: KernelContext) -> str:
    from cutune.cuda.extract import kernel_hash

    return kernel_hash(ctx.template_model, ctx.kernel.name)
