"""The LLM planner: any OpenAI-compatible chat endpoint proposes the plan as a JSON object.

The model sees the recipes, the kernel's source, the analysis and the history; it answers with recipes
and candidate values, which are validated strictly. It never picks final numbers: the search does.
Every failure (unreachable endpoint, HTTP error, timeout, an answer that is not the JSON asked for)
is an AgentError naming the endpoint and what was wrong, so the loop can fall back to the built-in rules.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cutune.agent.analysis import Analysis
from cutune.agent.errors import AgentError
from cutune.agent.history import Step, render_history
from cutune.agent.plan import MAX_VALUES, Plan
from cutune.agent.planner import Planner
from cutune.agent.settings import API_KEY_VARIABLES, AgentSettings, api_key_from_env
from cutune.limits import DeviceLimits, limits_for
from cutune.project import KernelContext
from cutune.template.model import Value
from cutune.template.recipes import RECIPES

if TYPE_CHECKING:  # openai itself loads when a planner first asks: it takes most of a second
    from openai.types.chat import ChatCompletionMessageParam

MAX_SOURCE_CHARS = 12_000  # about 3k tokens of source: the kernel and its neighbourhood, not a whole library
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_KEYS = frozenset(("recipes", "params", "reason", "done"))

SYSTEM_PROMPT = """\
You plan templates for cutune, an autotuner for CUDA kernels. A recipe rewrites one kind of hard-coded \
choice of a kernel into an explicit parameter with candidate values. A search on the GPU then measures \
every candidate configuration, checks it against the original kernel and keeps the fastest correct one: \
you choose which recipes to apply and which candidate values to search, never the final values.

Recipes, in the order they run:
{recipes}

Rules for candidate values:
- only for parameters that the chosen recipes create (the analysis lists them with the recipe of each);
- the parameter's type: integers for integer parameters, true/false for boolean ones;
- always include the parameter's default, the original kernel's choice;
- within the device limits given, and at most {max_values} values per parameter.
Leave a parameter out of "params" to keep the recipe's own candidates. Set "done" to true when no \
change is worth another measurement.

Answer with exactly one JSON object and nothing else:
{{"recipes": ["<recipe>", ...], "params": {{"<PARAM>": [<value>, ...]}}, "reason": "<one sentence>", \
"done": false}}"""


class LLMPlanner(Planner):
    """Plans through `chat.completions` of an OpenAI-compatible endpoint; the key is from the environment."""

    name = "openai"

    def __init__(
        self,
        settings: AgentSettings,
        *,
        source: str,
        kernel: str,
        kernel_span: tuple[int, int],
        limits: DeviceLimits,
        launches: tuple[str, ...] = (),
    ) -> None:
        self.settings = settings
        self.source = source
        self.kernel = kernel
        self.kernel_span = kernel_span  # byte offsets of the kernel's definition in `source`
        self.limits = limits
        self.launches = launches  # one line per launch site, shown when the file itself is cut

    @classmethod
    def for_kernel(cls, settings: AgentSettings, ctx: KernelContext) -> LLMPlanner:
        """A planner for the kernel of `ctx`."""
        span = ctx.kernel.span
        return cls(
            settings,
            source=ctx.model.text,
            kernel=ctx.kernel.name,
            kernel_span=(span.start_byte, span.end_byte),
            limits=limits_for(settings.arch),
            launches=tuple(
                f"line {site.span.start.line + 1}: <<<{site.grid}, {site.block}>>>"
                for site in ctx.model.launches_of(ctx.kernel.name)
            ),
        )

    @property
    def endpoint(self) -> str:
        """The endpoint and model, as error messages name them."""
        where = self.settings.base_url or "the default OpenAI endpoint"
        return f"LLM planner at {where} (model {self.settings.model or '?'})"

    def propose(self, analysis: Analysis, history: Sequence[Step]) -> Plan:
        """Ask the model for the next plan; AgentError on any failure of the endpoint or the answer."""
        return parse_answer(self._ask(self.messages(analysis, history)), where=self.endpoint)

    def messages(self, analysis: Analysis, history: Sequence[Step]) -> list[ChatCompletionMessageParam]:
        """The system prompt (recipes, rules, answer format), the user message (kernel, analysis, history)."""
        recipes = "\n".join(f"- {name}: {recipe.description}" for name, recipe in RECIPES.items())
        lim = self.limits
        user = (
            f"Kernel `{self.kernel}`:\n```cuda\n{self._excerpt()}\n```\n\n"
            f"Device limits ({lim.name or lim.arch}): max_threads_per_block={lim.max_threads_per_block}, "
            f"max_threads_per_sm={lim.max_threads_per_sm}, max_regs_per_thread={lim.max_regs_per_thread}, "
            f"warp_size={lim.warp_size}, max_smem_per_block={lim.max_smem_per_block}.\n\n"
            f"Analysis of the current template:\n{analysis.render()}\n\n"
            f"Steps so far:\n{render_history(history)}\n\nPropose the next plan as the JSON object."
        )
        return [
            {"role": "system", "content": SYSTEM_PROMPT.format(recipes=recipes, max_values=MAX_VALUES)},
            {"role": "user", "content": user},
        ]

    def _excerpt(self) -> str:
        """The whole file when short; else the kernel's definition, cut to MAX_SOURCE_CHARS."""
        if len(self.source) <= MAX_SOURCE_CHARS:
            return self.source
        data = self.source.encode("utf-8")
        start, end = self.kernel_span
        kernel = data[start:end].decode("utf-8", errors="replace")
        first = data.count(b"\n", 0, start) + 1
        note = f"// (file truncated: the definition of {self.kernel}, from line {first})\n"
        if len(kernel) > MAX_SOURCE_CHARS:
            kernel = kernel[:MAX_SOURCE_CHARS] + "\n// ... (rest of the kernel truncated)"
        return note + kernel + "".join(f"\n// launched at {launch}" for launch in self.launches)

    def _ask(self, messages: list[ChatCompletionMessageParam]) -> str:
        """The text of the model's answer."""
        return chat(self.settings, messages, where=self.endpoint)


def endpoint_name(settings: AgentSettings) -> str:
    """The endpoint and model, as error messages name them."""
    where = settings.base_url or "the default OpenAI endpoint"
    return f"LLM at {where} (model {settings.model or '?'})"


def chat(settings: AgentSettings, messages: list[ChatCompletionMessageParam], *, where: str) -> str:
    """The text of the model's answer to `messages`; AgentError on any failure of the endpoint or answer."""
    if not settings.model:
        raise AgentError(f"{where}: no model is set (agent.model)")
    key = api_key_from_env()
    if key is None:
        raise AgentError(f"{where}: no API key; set {' or '.join(API_KEY_VARIABLES)} in the environment")
    import openai

    # no retries: a failed step falls back to the built-in planner at once instead of waiting
    client = openai.OpenAI(base_url=settings.base_url or None, api_key=key, timeout=settings.timeout, max_retries=0)
    try:
        # typed as object: a lenient client hands back whatever the endpoint sent (even a bare string)
        completion: object = client.chat.completions.create(model=settings.model, messages=messages)
    except openai.APITimeoutError:
        raise AgentError(f"{where}: no answer within {settings.timeout:g} s") from None
    except openai.APIConnectionError as e:
        raise AgentError(f"{where}: cannot reach the endpoint ({_cause(e)})") from None
    except openai.APIStatusError as e:
        raise AgentError(f"{where}: HTTP {e.status_code}: {snippet(e.body)}") from None
    except (openai.OpenAIError, ValueError) as e:  # ValueError: a body that claims JSON but is not
        raise AgentError(f"{where}: the endpoint's answer is not a chat completion ({e})") from None
    finally:
        client.close()
    if isinstance(completion, str):  # a body that is not JSON, e.g. a proxy's HTML error page
        raise AgentError(f"{where}: the endpoint's answer is not a chat completion: {snippet(completion)}")
    choices = getattr(completion, "choices", None)
    if not choices:
        raise AgentError(f"{where}: the answer has no choices: {snippet(completion)}")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if not isinstance(content, str) or not content.strip():
        refusal = getattr(message, "refusal", None)
        raise AgentError(f"{where}: the answer's message is empty" + (f" (refusal: {refusal})" if refusal else ""))
    if getattr(choices[0], "finish_reason", None) == "length":
        raise AgentError(f"{where}: the answer was truncated at the model's token limit: {snippet(content[-200:])}")
    return content


def parse_answer(text: str, *, where: str) -> Plan:
    """A Plan from the model's text: one JSON object (bare, fenced or amid prose), checked strictly."""
    data = json_object(text, where)
    extra = sorted(set(data) - _KEYS)
    if extra:
        raise AgentError(f"{where}: unexpected key(s) {', '.join(extra)} in the answer; expected {sorted(_KEYS)}")
    recipes = data.get("recipes")
    if not isinstance(recipes, list) or not recipes or not all(isinstance(r, str) for r in recipes):
        raise AgentError(f"{where}: 'recipes' must be a non-empty list of recipe names, not {snippet(recipes)}")
    params = _params(data.get("params", {}), where)
    reason, done = data.get("reason", ""), data.get("done", False)
    if not isinstance(reason, str):
        raise AgentError(f"{where}: 'reason' must be a string, not {snippet(reason)}")
    if not isinstance(done, bool):
        raise AgentError(f"{where}: 'done' must be true or false, not {snippet(done)}")
    try:
        return Plan.of(recipes, params, reason=reason, done=done)
    except AgentError as e:
        raise AgentError(f"{where}: {e}") from None


def json_object(text: str, where: str) -> dict[str, Any]:
    """The first JSON object found: the whole text, a fenced block, or the outermost braces."""
    candidates = [text.strip(), *(m.strip() for m in _FENCE.findall(text))]
    if "{" in text:
        candidates.append(text[text.find("{") : text.rfind("}") + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    raise AgentError(f"{where}: the answer is not a JSON object: {snippet(text)}")


def _params(raw: object, where: str) -> dict[str, list[Value]]:
    if not isinstance(raw, Mapping):
        raise AgentError(f"{where}: 'params' must be an object of parameter → list of values, not {snippet(raw)}")
    out: dict[str, list[Value]] = {}
    for name, values in raw.items():
        if not isinstance(values, list) or not values:
            raise AgentError(f"{where}: params.{name} must be a non-empty list of values, not {snippet(values)}")
        bad = [v for v in values if not isinstance(v, int | str)]  # bool is an int; floats are never candidates
        if bad:
            raise AgentError(f"{where}: params.{name} holds {snippet(bad)}: values are integers, true/false or strings")
        out[str(name)] = values
    return out


def snippet(value: object, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _cause(e: BaseException) -> str:
    """The innermost cause's message (e.g. 'Connection refused'), which says more than 'Connection error.'."""
    while e.__cause__ is not None:
        e = e.__cause__
    return str(e) or type(e).__name__
