"""An LLM's variant answer, validated strictly before anything compiles."""

from __future__ import annotations

import json

import pytest

from cutune.agent.errors import AgentError
from cutune.agent.variant_answer import parse_variant_answer
from cutune.template.model import Binding

GOOD = {
    "name": "vec_rows",
    "body": "  for (int i = threadIdx.x; i < d; i += blockDim.x) { out[i] = input[i]; }  // }",
    "params": [{"name": "ROWS", "values": [1, 2, 4], "default": 1, "try_first": 4}],
    "constraints": ["ROWS <= 4"],
    "launch": {"grid": ["ceil_div(num_tokens, ROWS)"], "block": ["256"]},
    "reason": "more rows per block",
}


def test_a_good_answer_becomes_a_variant_with_template_parameters() -> None:
    answer = parse_variant_answer("Sure:\n```json\n" + json.dumps(GOOD) + "\n```", where="llm", step=3)
    v = answer.variant
    assert v is not None and v.name == "vec_rows" and not answer.done
    assert v.params[0].values == (1, 2, 4) and v.params[0].binding is Binding.TEMPLATE and v.params[0].try_first == 4
    assert v.launch is not None and v.launch.grid == ("ceil_div(num_tokens, ROWS)",) and v.launch.shared_mem == "0"
    assert v.provenance.origin == "llm" and v.provenance.step == 3 and v.constraints == ("ROWS <= 4",)


def test_done_without_code_is_no_variant() -> None:
    answer = parse_variant_answer('{"done": true, "reason": "at the floor"}', where="llm")
    assert answer.variant is None and answer.done and answer.reason == "at the floor"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "2fast"}, "'name' must be a C identifier"),
        ({"name": "VARIANT"}, "cutune uses that name"),
        ({"body": ""}, "'body' must be non-empty CUDA code"),
        ({"body": "#include <cstdio>\nreturn;"}, "preprocessor directives"),
        ({"body": 'asm volatile("trap;");'}, "inline assembly"),
        ({"body": "if (d) { return;"}, "unbalanced braces"),
        ({"params": [{"name": "ROWS", "values": [1, 2.5], "default": 1}]}, "must all be integers or all true/false"),
        ({"params": [{"name": "ROWS", "values": [2, 4], "default": 1}]}, "default 1 is not among its values"),
        ({"params": [{"name": "ROWS", "values": [-1, 1], "default": 1}]}, "negative values"),
        ({"params": [{"name": "ROWS", "values": [1, 2], "default": 1, "try_first": 8}]}, "try_first 8 is not among"),
        ({"params": [{"name": "ROWS", "values": [1, 2], "default": 1, "try_first": True}]}, "try_first True is not"),
        ({"params": [{"name": "BLOCK_THREADS", "values": [1], "default": 1}]}, "clashes with an existing name"),
        ({"launch": {"grid": [], "block": ["256"]}}, "1 to 3 expressions"),
        ({"confidence": 0.9}, "unexpected key(s) confidence"),
    ],
)
def test_invalid_answers_are_rejected_with_the_reason(change: dict[str, object], message: str) -> None:
    with pytest.raises(AgentError, match="^llm: .*" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_variant_answer(json.dumps({**GOOD, **change}), where="llm", taken={"BLOCK_THREADS"})


def test_a_truncated_answer_is_not_json() -> None:
    with pytest.raises(AgentError, match="not a JSON object"):
        parse_variant_answer(json.dumps(GOOD)[:80], where="llm")
