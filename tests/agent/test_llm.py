"""The LLM planner against a real local HTTP server: good answers, garbage, HTTP errors, timeouts, keys."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

import pytest

from cutune.agent.analysis import analyze
from cutune.agent.errors import AgentError
from cutune.agent.llm import MAX_SOURCE_CHARS, LLMPlanner, parse_answer
from cutune.agent.plan import apply_plan
from cutune.agent.settings import AgentSettings
from cutune.limits import limits_for
from cutune.project import KernelContext, open_kernel
from cutune.template.recipes import RECIPES
from tests.agent.llm_server import FakeLLM, Reply, completion, plan_answer


def planner_for(ctx: KernelContext, url: str, *, timeout: float = 5.0, model: str = "tuner-7b") -> LLMPlanner:
    return LLMPlanner.for_kernel(AgentSettings(kind="openai", base_url=url, model=model, timeout=timeout), ctx)


def test_a_good_answer_becomes_an_applicable_plan(silu: KernelContext, llm: FakeLLM, api_key: str) -> None:
    llm.queue(
        plan_answer(
            ["compile_flags", "block_threads"],
            {"BLOCK_THREADS": [256, 512, 1024]},
            reason="the block size is capped by d; search mid-size blocks",
        )
    )
    planner = planner_for(silu, llm.url)
    plan = planner.propose(analyze(silu, silu.template), [])
    assert plan.recipes == ("block_threads", "compile_flags") and not plan.done
    assert plan.reason == "the block size is capped by d; search mid-size blocks"
    t = apply_plan(silu.model, silu.kernel.name, plan, limits_for("sm_90"))
    assert t.space.param("BLOCK_THREADS").values == (256, 512, 1024)

    (request,) = llm.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {api_key}"
    assert request.body["model"] == "tuner-7b"
    system, user = request.body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    for name, recipe in RECIPES.items():
        assert f"- {name}: {recipe.description}" in system["content"]
    assert '"recipes"' in system["content"] and "never the final values" in system["content"]
    assert "silu_and_mul_kernel" in user["content"] and "__global__" in user["content"]
    assert "param BLOCK_THREADS in [32, 64, 128, 256, 512, 1024]" in user["content"]  # the analysis
    assert "max_threads_per_block=1024" in user["content"] and "no steps yet" in user["content"]


def test_bare_and_prose_wrapped_json_are_read() -> None:
    bare = parse_answer('{"recipes": ["block_threads"], "done": true}', where="here")
    assert bare.recipes == ("block_threads",) and bare.done and bare.params == ()
    prose = parse_answer('Sure! {"recipes": ["unroll"], "params": {}, "reason": "r"} Hope it helps.', where="here")
    assert prose.recipes == ("unroll",) and prose.reason == "r"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (
            completion("You should try more threads per block and fast math."),
            "the answer is not a JSON object",
        ),
        (completion("```json\n{recipes: [block_threads]}\n```"), "the answer is not a JSON object"),
        (completion('{"recipes": "block_threads"}'), "'recipes' must be a non-empty list of recipe names"),
        (
            completion('{"recipes": ["block_threads", "warp_shuffle"]}'),
            "unknown recipe(s) warp_shuffle; known:",
        ),
        (
            completion('{"recipes": ["block_threads"], "params": {"BLOCK_THREADS": [256, 2.5]}}'),
            "params.BLOCK_THREADS holds '[2.5]'",
        ),
        (completion('{"recipes": ["block_threads"], "params": [256]}'), "'params' must be an object"),
        (completion('{"recipes": ["block_threads"], "confidence": 0.9}'), "unexpected key(s) confidence"),
        (completion('{"recipes": ["block_threads"], "done": "yes"}'), "'done' must be true or false"),
        (completion(None), "the answer's message is empty"),
        (
            Reply({"error": {"message": "The server is overloaded", "type": "server_error"}}, status=500),
            "HTTP 500: ",
        ),
        (Reply({"error": {"message": "Incorrect API key provided"}}, status=401), "HTTP 401"),
        (
            Reply("<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
            "the endpoint's answer is not a chat completion: '<html>",
        ),
        (
            Reply("this is not json", content_type="application/json"),
            "the endpoint's answer is not a chat completion",
        ),
        (Reply({"object": "list", "data": []}), "the answer has no choices"),
    ],
)
def test_bad_answers_raise_agent_errors_naming_the_endpoint(
    silu: KernelContext, llm: FakeLLM, api_key: str, reply: Reply, message: str
) -> None:
    llm.queue(reply)
    with pytest.raises(AgentError) as e:
        planner_for(silu, llm.url).propose(analyze(silu, silu.template), [])
    assert str(e.value).startswith(f"LLM planner at {llm.url} (model tuner-7b): ")
    assert message in str(e.value)


def test_http_errors_carry_the_server_message(silu: KernelContext, llm: FakeLLM, api_key: str) -> None:
    llm.queue(Reply({"error": {"message": "The server is overloaded", "type": "server_error"}}, status=500))
    with pytest.raises(AgentError, match="The server is overloaded"):
        planner_for(silu, llm.url).propose(analyze(silu, silu.template), [])


def test_a_slow_endpoint_times_out(silu: KernelContext, llm: FakeLLM, api_key: str) -> None:
    llm.queue(dataclasses.replace(plan_answer(["block_threads"]), delay=2.0))
    with pytest.raises(AgentError) as e:
        planner_for(silu, llm.url, timeout=0.3).propose(analyze(silu, silu.template), [])
    assert "no answer within 0.3 s" in str(e.value)


def test_an_unreachable_endpoint(silu: KernelContext, api_key: str) -> None:
    with socket.socket() as s:  # a port that was free a moment ago, with nothing listening on it now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(AgentError) as e:
        planner_for(silu, url).propose(analyze(silu, silu.template), [])
    assert f"LLM planner at {url}" in str(e.value) and "cannot reach the endpoint" in str(e.value)


def test_the_key_comes_only_from_the_environment(
    silu: KernelContext, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "api_key" not in {f.name for f in dataclasses.fields(AgentSettings)}
    monkeypatch.delenv("CUTUNE_LLM_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm.queue(plan_answer(["block_threads"]))
    planner = planner_for(silu, llm.url)
    with pytest.raises(AgentError, match="no API key; set CUTUNE_LLM_API_KEY or OPENAI_API_KEY"):
        planner.propose(analyze(silu, silu.template), [])
    assert llm.requests == []  # nothing was sent without a key

    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    planner.propose(analyze(silu, silu.template), [])
    monkeypatch.setenv("CUTUNE_LLM_API_KEY", "sk-cutune")  # the cutune-specific one wins
    planner.propose(analyze(silu, silu.template), [])
    assert [r.headers["authorization"] for r in llm.requests] == ["Bearer sk-openai", "Bearer sk-cutune"]


def test_a_model_is_required(silu: KernelContext, llm: FakeLLM, api_key: str) -> None:
    with pytest.raises(AgentError, match=r"no model is set \(agent.model\)"):
        planner_for(silu, llm.url, model="").propose(analyze(silu, silu.template), [])


def test_long_files_are_cut_to_the_kernel_and_its_launches(silu: KernelContext, tmp_path: Path) -> None:
    padding = "// " + "x" * 100 + "\n"
    header = padding * (MAX_SOURCE_CHARS // len(padding) + 10)
    long_file = tmp_path / "long.cu"
    long_file.write_text(header + silu.model.text)
    ctx = open_kernel(long_file, silu.kernel.name)
    planner = LLMPlanner.for_kernel(AgentSettings(kind="openai", model="m"), ctx)
    user = planner.messages(analyze(ctx, ctx.template), [])[1]["content"]
    assert isinstance(user, str)
    first = header.count("\n") + silu.model.text[: silu.kernel.span.start_byte].count("\n") + 1
    assert f"file truncated: the definition of silu_and_mul_kernel, from line {first}" in user
    assert "rs[j] = static_cast<T>(silu(" in user and "xxxxxxxx" not in user
    assert "// launched at line" in user and "<<<grid, block>>>" in user
    assert len(user) < MAX_SOURCE_CHARS
