"""An LLM's variant, checked strictly: one JSON object holding a kernel body, its parameters and space.

Checked here, before anything compiles: the keys and their JSON types, C identifiers that clash with
nothing, integer or true/false candidate values that include the default, balanced braces, and no
preprocessor or inline assembly in the code (the body is device code over the kernel's own parameters,
nothing else). Whether it compiles, runs and matches the original is checked afterwards, in the isolated
worker: see `cutune.agent.steps`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from cutune.agent.errors import AgentError
from cutune.agent.llm import json_object, snippet
from cutune.agent.plan import MAX_VALUES
from cutune.template.model import Binding, TunableParam, Value
from cutune.template.variants.model import Launch, Provenance, Variant

MAX_CODE_CHARS = 16_000  # a kernel body and its helpers; more is not a variant of one kernel
_KEYS = frozenset(("name", "body", "helpers", "params", "constraints", "launch", "reason", "done"))
_PARAM_KEYS = frozenset(("name", "values", "default", "try_first"))
_LAUNCH_KEYS = frozenset(("grid", "block", "shared_mem"))
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FORBIDDEN = (
    (re.compile(r"^\s*#(?!\s*pragma\s+unroll\b)", re.MULTILINE), "preprocessor directives (only #pragma unroll)"),
    (re.compile(r"\basm\b|__asm__"), "inline assembly"),
)
_RESERVED = frozenset(("VARIANT",))  # the parameter that chooses among the variants


@dataclass(frozen=True)
class VariantAnswer:
    """What the model proposed: a variant, why, or `done` (no variant worth another measurement)."""

    variant: Variant | None
    reason: str
    done: bool = False


def parse_variant_answer(
    text: str, *, where: str, taken: Collection[str] = (), step: int | None = None
) -> VariantAnswer:
    """The model's variant from its text; `taken` holds names the variant and its parameters must avoid."""
    data = json_object(text, where)
    extra = sorted(set(data) - _KEYS)
    if extra:
        raise AgentError(f"{where}: unexpected key(s) {', '.join(extra)} in the answer; expected {sorted(_KEYS)}")
    reason, done = data.get("reason", ""), data.get("done", False)
    if not isinstance(reason, str):
        raise AgentError(f"{where}: 'reason' must be a string, not {snippet(reason)}")
    if not isinstance(done, bool):
        raise AgentError(f"{where}: 'done' must be true or false, not {snippet(done)}")
    if done and "body" not in data:
        return VariantAnswer(None, reason, done=True)
    name = _identifier(data.get("name"), "name", where)
    if name in taken:
        raise AgentError(f"{where}: a variant or parameter is already called {name!r}; choose a new name")
    body = _code(data.get("body"), "body", where, required=True)
    helpers = _code(data.get("helpers", ""), "helpers", where, required=False)
    params = tuple(
        _param(p, i, where, {*taken, name}) for i, p in enumerate(_list(data.get("params", []), "params", where))
    )
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise AgentError(f"{where}: parameter names repeat: {names}")
    constraints = tuple(_strings(data.get("constraints", []), "constraints", where))
    variant = Variant(
        name=name,
        body=body,
        params=params,
        constraints=constraints,
        launch=_launch(data.get("launch"), where),
        helpers=helpers,
        provenance=Provenance("llm", note=reason, step=step),
    )
    return VariantAnswer(variant, reason, done)


def _identifier(value: object, key: str, where: str) -> str:
    if not isinstance(value, str) or not _IDENT.match(value):
        raise AgentError(f"{where}: {key!r} must be a C identifier, not {snippet(value)}")
    if value in _RESERVED:
        raise AgentError(f"{where}: {key!r} may not be {value!r}: cutune uses that name")
    return value


def _code(value: object, key: str, where: str, *, required: bool) -> str:
    if not isinstance(value, str) or (required and not value.strip()):
        raise AgentError(f"{where}: {key!r} must be {'non-empty ' if required else ''}CUDA code, not {snippet(value)}")
    if len(value) > MAX_CODE_CHARS:
        raise AgentError(f"{where}: {key!r} holds {len(value)} characters; at most {MAX_CODE_CHARS}")
    for pattern, what in _FORBIDDEN:
        if pattern.search(value):
            raise AgentError(f"{where}: {key!r} may not contain {what}")
    depth = 0
    for ch in _without_literals(value):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            break
    if depth != 0:
        raise AgentError(f"{where}: {key!r} has unbalanced braces (a truncated or wrapped body?)")
    return value


def _without_literals(code: str) -> str:
    """`code` without comments, strings and character literals, whose braces do not count."""
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', " ", code, flags=re.DOTALL)


def _param(raw: object, index: int, where: str, taken: Collection[str]) -> TunableParam:
    if not isinstance(raw, Mapping):
        raise AgentError(f"{where}: params[{index}] must be an object with name, values, default")
    extra = sorted(set(raw) - _PARAM_KEYS)
    if extra:
        raise AgentError(f"{where}: params[{index}] has unexpected key(s) {', '.join(extra)}")
    name = _identifier(raw.get("name"), f"params[{index}].name", where)
    if name in taken:
        raise AgentError(f"{where}: parameter {name!r} clashes with an existing name")
    values = _list(raw.get("values"), f"{name}.values", where)
    if not values or len(values) > MAX_VALUES:
        raise AgentError(f"{where}: {name} needs 1 to {MAX_VALUES} candidate values, not {len(values)}")
    default = raw.get("default", values[0])
    kinds = {type(v) for v in (*values, default)}
    if not (kinds <= {int} or kinds <= {bool}):
        raise AgentError(f"{where}: {name}'s values and default must all be integers or all true/false: {values}")
    if any(isinstance(v, int) and not isinstance(v, bool) and v < 0 for v in values):
        raise AgentError(f"{where}: {name} has negative values {values}")
    if default not in values:
        raise AgentError(f"{where}: {name}'s default {default!r} is not among its values {values}")
    first = raw.get("try_first")
    if first is not None and (first not in values or type(first) is not type(default)):
        raise AgentError(f"{where}: {name}'s try_first {first!r} is not among its values {values}")
    typed: list[Value] = list(dict.fromkeys(values))
    return TunableParam(
        name, tuple(typed), default, Binding.TEMPLATE, description="written by the LLM", try_first=first
    )


def _launch(raw: object, where: str) -> Launch | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise AgentError(f"{where}: 'launch' must be an object with grid, block and shared_mem expressions")
    extra = sorted(set(raw) - _LAUNCH_KEYS)
    if extra:
        raise AgentError(f"{where}: 'launch' has unexpected key(s) {', '.join(extra)}")
    grid = tuple(_strings(raw.get("grid"), "launch.grid", where))
    block = tuple(_strings(raw.get("block"), "launch.block", where))
    if not 1 <= len(grid) <= 3 or not 1 <= len(block) <= 3:
        raise AgentError(f"{where}: launch.grid and launch.block need 1 to 3 expressions each")
    shared = raw.get("shared_mem", "0")
    if not isinstance(shared, str | int) or isinstance(shared, bool):
        raise AgentError(f"{where}: launch.shared_mem must be an expression, not {snippet(shared)}")
    return Launch(grid, block, str(shared))


def _list(value: object, key: str, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise AgentError(f"{where}: {key!r} must be a list, not {snippet(value)}")
    return value


def _strings(value: object, key: str, where: str) -> list[str]:
    items = _list(value, key, where)
    if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in items):
        raise AgentError(f"{where}: {key!r} must list expressions, not {snippet(items)}")
    return [str(v) for v in items]
