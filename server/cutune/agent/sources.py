"""Who proposes the next variant: the built-in transforms (#7), or an LLM writing the kernel's body.

A source sees the measured state (`StepContext`: per-size % of the floor, the profile of the best
configuration, registers and spills, every step so far with its outcome and rejection reason) and
answers with one Variant, or `done`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from cutune.agent.errors import AgentError
from cutune.agent.llm import chat, endpoint_name
from cutune.agent.record import StepRecord, render_records
from cutune.agent.settings import AgentSettings
from cutune.agent.variant_answer import MAX_CODE_CHARS, VariantAnswer, parse_variant_answer
from cutune.cuda.extract import extract_kernel
from cutune.errors import CutuneError
from cutune.project import KernelContext
from cutune.template.variants.model import Variant
from cutune.template.variants.propose import propose_variants

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam


@dataclass(frozen=True)
class StepContext:
    """What the next proposal can read: the kernel, the variants kept so far, the analysis and the history."""

    ctx: KernelContext
    kept: tuple[Variant, ...]  # variants in the combined kernel now (VARIANT = 1..n)
    history: tuple[StepRecord, ...]
    analysis: str  # per-size % of the floor, the best configuration, registers, spills
    profile: str  # ncu counters of the best configuration, or why there are none
    step: int

    @property
    def taken(self) -> set[str]:
        """Names a new variant or its parameters must avoid."""
        names = {r.variant for r in self.history if r.variant}
        names |= {p.name for p in self.ctx.space.params}
        for v in self.kept:
            names.add(v.name)
            names |= {p.name for p in v.params}
        return names


class VariantSource(ABC):
    """Proposes the next variant from the measured state."""

    name: ClassVar[str]

    @abstractmethod
    def propose(self, state: StepContext) -> VariantAnswer:
        """The next variant, or `done`; AgentError when this source has no usable answer."""


# transforms that remove a pass over memory come first: on a memory-bound kernel they move the floor-bound
# sizes most (a one-pass RMSNorm: 89–93% of the floor, DESIGN.md); the rest keep propose_variants' order
FIRST = ("row_reduce",)


class BuiltinVariants(VariantSource):
    """The built-in transforms (FIRST, then the order `propose_variants` ranks them); each is tried once."""

    name = "builtin"

    def propose(self, state: StepContext) -> VariantAnswer:
        """The first transform's variant not tried yet; `done` when every one was tried or refused."""
        ctx = state.ctx
        try:
            variants, refusals = propose_variants(ctx.template_model, ctx.kernel.name, ctx.spec)
        except CutuneError as e:
            return VariantAnswer(None, f"the built-in transforms cannot run: {e}", done=True)
        tried = {r.variant for r in state.history} | {v.name for v in state.kept}
        ranked = sorted(variants, key=lambda v: v.provenance.origin not in FIRST)  # stable: the rest keep their order
        for variant in ranked:
            if variant.name not in tried:
                note = variant.provenance.note or variant.provenance.origin
                return VariantAnswer(variant, f"built-in transform {variant.provenance.origin}: {note}")
        why = "; ".join(f"{r.recipe}: {r.reason}" for r in refusals)
        return VariantAnswer(None, "every built-in variant was tried" + (f" (refused: {why})" if why else ""), True)


ANSWER_FORMAT = """{"name": "<new C identifier>", "body": "<the kernel body: statements without the outer braces>", \
"helpers": "<__device__ functions the body calls; names unique to this variant, or empty>", \
"params": [{"name": "<UPPER_CASE identifier>", "values": [<int>, ...], "default": <int>, \
"try_first": <int, optional: the value the search measures the variant at first, where the default runs the kernel \
as written>}], \
"constraints": ["<expression over sizes, parameters and device limits>"], \
"launch": {"grid": ["<expr>"], "block": ["<expr>"], "shared_mem": "0"}, "reason": "<one sentence>", "done": false}"""

SYSTEM_PROMPT = f"""\
You write variants of one CUDA kernel for cutune, an autotuner. A variant is a new body for the same \
kernel: same name, same parameter list, same results within floating-point tolerance. Make its \
choices explicit parameters with candidate values (integers or true/false): they become template \
parameters of the kernel, and a search on the GPU measures every candidate configuration, checks each \
against the original kernel, and keeps the fastest correct one. You choose the structure and the \
space, never the final values.

Rules:
- the body uses only the kernel's own parameters, its template parameters, your parameters and helpers;
- no #include, no preprocessor directives except #pragma unroll, no inline assembly;
- launch expressions may use the problem sizes, your parameters and device limits \
(max_threads_per_block, warp_size, sm_count, ...) and ceil_div/min/max; leave "launch" out to keep the \
kernel's own launch;
- every size in the spec must be handled (guard the tails).
A variant that does not compile, faults, hangs or gives wrong results is rejected; the reason comes \
back to you with the next request. Set "done" to true (and leave the code out) when no variant is \
worth another measurement.

Answer with exactly one JSON object and nothing else:
{ANSWER_FORMAT}"""


class LLMVariants(VariantSource):
    """Variants written by an OpenAI-compatible model from the kernel's extracted device code only."""

    name = "openai"

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings

    def propose(self, state: StepContext) -> VariantAnswer:
        """Ask the model; AgentError (with the endpoint named) when the endpoint or the answer fails."""
        where = endpoint_name(self.settings)
        text = chat(self.settings, self.messages(state), where=where)
        return parse_variant_answer(text, where=where, taken=state.taken, step=state.step)

    def messages(self, state: StepContext) -> list[ChatCompletionMessageParam]:
        """The system prompt (rules, answer format) and the user message (code, sizes, analysis, history)."""
        ctx = state.ctx
        spec = ctx.spec
        sizes = ", ".join("{" + ", ".join(f"{k}={v}" for k, v in s.items()) + "}" for s in spec.sizes) if spec else "?"
        launch = f"grid ({', '.join(spec.grid)}), block ({', '.join(spec.block)})" if spec else "?"
        kept = "\n".join(f"- {v.name} ({v.provenance.origin}): {v.provenance.note}" for v in state.kept) or "none"
        user = (
            f"Kernel `{ctx.kernel.name}`, its device code (extracted; not the whole file):\n"
            f"```cuda\n{device_code(ctx)}\n```\n\n"
            f"Launch: {launch}. Problem sizes: {sizes}.\n\n"
            f"Variants kept so far:\n{kept}\n\n"
            f"Analysis of the best configuration so far:\n{state.analysis}\n\n"
            f"Profile: {state.profile}\n\n"
            f"Steps so far (with why each rejected variant was rejected):\n{render_records(state.history)}\n\n"
            "Write the next variant as the JSON object."
        )
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def device_code(ctx: KernelContext) -> str:
    """The kernel and the device code it needs, extracted from its file (host code and other kernels left out)."""
    try:
        code = extract_kernel(ctx.template_model, ctx.kernel.name).source
    except CutuneError as e:
        raise AgentError(f"cannot extract the device code of {ctx.kernel.name}: {e}") from None
    return code if len(code) <= 2 * MAX_CODE_CHARS else code[: 2 * MAX_CODE_CHARS] + "\n// ... (truncated)"


SOURCES: dict[str, Callable[[AgentSettings], VariantSource]] = {
    BuiltinVariants.name: lambda _settings: BuiltinVariants(),
    LLMVariants.name: LLMVariants,
}


def make_source(settings: AgentSettings) -> VariantSource:
    """The variant source `settings.kind` names."""
    return SOURCES[settings.kind](settings)
