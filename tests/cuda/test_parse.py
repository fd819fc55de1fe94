"""parse_source on the samples and on fixtures for each construct, literal kind and parse failure."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from cutune.cuda import LiteralKind, SourceModel, Span, TemplateParamKind, parse_source
from cutune.cuda.syntax import int_value
from cutune.errors import SourceError

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
DATA = ROOT / "tests" / "data" / "cuda"


def load(path: Path) -> SourceModel:
    return parse_source(path.read_text(encoding="utf-8"), str(path))


def at(model: SourceModel, span: Span) -> str:
    """The source text a span covers, by bytes and, independently, by LSP positions."""
    by_bytes = model.text.encode()[span.start_byte : span.end_byte].decode()
    lines = model.text.split("\n")

    def offset(line: int, character: int) -> int:
        units = lines[line].encode("utf-16-le")[: character * 2].decode("utf-16-le")
        return sum(len(x) + 1 for x in lines[:line]) + len(units)

    by_positions = model.text[offset(span.start.line, span.start.character) : offset(span.end.line, span.end.character)]
    assert by_bytes == by_positions
    return by_bytes


def literals(model: SourceModel) -> set[tuple[str, str | None, int, str | None, str]]:
    return {(lit.kind.value, lit.name, lit.value, lit.kernel, at(model, lit.span)) for lit in model.literals}


def test_silu_sample() -> None:
    m = load(SAMPLES / "silu_and_mul.cu")
    (k,) = m.kernels
    assert (k.name, k.namespace, k.qualified_name) == (
        "silu_and_mul_kernel",
        "serving",
        "serving::silu_and_mul_kernel",
    )
    assert [(p.name, p.type) for p in k.params] == [
        ("out", "T* __restrict__"),
        ("input", "const T* __restrict__"),
        ("d", "const int"),
    ]
    assert [(t.kind, t.name, t.default) for t in k.template_params] == [(TemplateParamKind.TYPE, "T", None)]
    assert at(m, k.span).startswith("template <typename T>\n__global__ void silu_and_mul_kernel(")
    assert at(m, k.span).endswith("static_cast<float>(y[i]));\n  }\n}")
    assert at(m, k.name_span) == "silu_and_mul_kernel"
    assert at(m, k.body_span).startswith("{\n  constexpr int kPackElems")
    assert k.template_span is not None and at(m, k.template_span) == "<typename T>"
    assert (k.launch_bounds, k.extern_c, k.has_errors) == (None, False, False)
    assert [(f.name, f.namespace) for f in m.device_functions] == [("silu", "serving")]
    assert [(i.target, i.system) for i in m.includes][:2] == [
        ("torch/extension.h", True),
        ("ATen/cuda/CUDAContext.h", True),
    ]
    assert m.issues == ()

    bf16, half = m.launches_of("silu_and_mul_kernel")
    assert bf16.template_args == ("__nv_bfloat16",) and half.template_args == ("__half",)
    assert (bf16.grid, bf16.block, bf16.shared_mem, bf16.stream) == ("grid", "block", "0", "stream")
    assert [at(m, s) for s in bf16.config_spans] == ["grid", "block", "0", "stream"]
    assert [at(m, s) for s in bf16.template_arg_spans] == ["__nv_bfloat16"]
    assert bf16.args[2] == "d" and bf16.host_function == "silu_and_mul"
    assert at(m, bf16.span).startswith("serving::silu_and_mul_kernel<__nv_bfloat16><<<grid")

    assert literals(m) == {
        ("vector_width", "kPackElems", 16, "silu_and_mul_kernel", "16"),
        ("launch_dim", "block", 1024, "silu_and_mul_kernel", "1024"),
    }


def test_merge_sample() -> None:
    m = load(SAMPLES / "merge_attn_states.cu")
    k = m.kernel("merge_attn_states_kernel")
    assert k.namespace == "" and k.qualified_name == "merge_attn_states_kernel"
    assert [(t.kind, t.name, t.type) for t in k.template_params] == [
        (TemplateParamKind.TYPE, "scalar_t", ""),
        (TemplateParamKind.VALUE, "NUM_THREADS", "const uint"),
    ]
    assert len(k.params) == 9 and k.params[-1].type == "const uint"
    (launch,) = m.launches
    assert launch.template_args == ("__nv_bfloat16", "NUM_THREADS")
    assert launch.host_function == "merge_attn_states"
    assert literals(m) == {
        ("vector_width", "pack_size", 16, "merge_attn_states_kernel", "16"),
        (
            "constexpr",
            "NUM_THREADS",
            128,
            "merge_attn_states_kernel",
            "128",
        ),  # host constexpr fed to the launch
    }
    with pytest.raises(SourceError, match="merge_attn_states_kernel"):
        m.kernel("missing")


def test_every_literal_kind_and_its_kernel() -> None:
    m = load(DATA / "literals.cu")
    assert literals(m) == {
        ("define", "BLOCK_SIZE", 256, "scale", "256"),  # used in scale's __launch_bounds__ only
        ("define", "SHARED_ITEMS", 4, None, "4"),  # used by two kernels
        ("constexpr", "kItems", 8, "other", "8"),
        ("constexpr", "kNsItems", 2, None, "2"),  # namespace scope, unused
        ("launch_bounds", None, 2, "scale", "2"),
        ("constexpr", "kInner", 3, "scale", "3"),
        ("vector_width", "kVec", 16, "scale", "16"),
        ("pragma_unroll", None, 4, "scale", "4"),
        ("constexpr", "kThreads", 128, "other", "128"),  # host-function constexpr used at other's launch
        ("launch_dim", "block", 1024, "scale", "1024"),  # dim3 block(std::min(n, 1024))
        ("template_arg", "VEC", 4, "scale", "4"),
        ("launch_dim", None, 64, "third", "64"),  # <<<1, 64>>>: the 1 is structure, not a choice
    }
    scale = m.kernel("scale")
    assert scale.launch_bounds is not None
    assert (scale.launch_bounds.max_threads, scale.launch_bounds.min_blocks) == ("BLOCK_SIZE", "2")
    assert [(mac.name, mac.value) for mac in m.macros] == [
        ("BLOCK_SIZE", "256"),
        ("SHARED_ITEMS", "4"),
        ("SCALE", "((x) * 2)"),
    ]
    assert m.literals == tuple(sorted(m.literals, key=lambda lit: lit.span.start_byte))
    assert [lit.kind for lit in m.literals_of("third")] == [LiteralKind.LAUNCH_DIM]


def test_namespaces_linkage_templates_types_and_launch_forms() -> None:
    m = load(DATA / "structure.cu")
    assert [(k.qualified_name, k.extern_c) for k in m.kernels] == [
        ("outer::inner::nested_kernel", False),
        ("a::b::cpp17_kernel", False),
        ("c_kernel", True),
        ("c_block_kernel", True),
    ]
    nested = m.kernel("nested_kernel")
    assert [(t.kind, t.name, t.type, t.default) for t in nested.template_params] == [
        (TemplateParamKind.TYPE, "T", "", None),
        (TemplateParamKind.VALUE, "N", "int", "4"),
        (TemplateParamKind.VALUE, "kSafe", "bool", "true"),
    ]
    assert at(m, m.kernel("c_kernel").span).startswith('extern "C" __global__')
    assert [(f.name, f.namespace) for f in m.device_functions] == [
        ("twice", "outer::inner"),
        ("half_of", "outer::inner"),
        ("third_of", "outer::inner"),
    ]
    assert [t.name for t in m.types] == ["Pair", "Box", "Bits", "Mode", "real_t", "index_t"]
    assert {t.namespace for t in m.types} == {"outer::inner"}
    assert [(i.target, i.system) for i in m.includes] == [("cuda_fp16.h", True), ("local_helpers.cuh", False)]

    first, second = m.launches
    assert (first.kernel, first.template_args) == ("nested_kernel", ("float", "8"))
    assert (first.grid, first.block, first.shared_mem, first.stream) == (
        "dim3(2, 2)",
        "WARP * 4",
        "512",
        "nullptr",
    )
    assert (second.kernel, second.grid, second.block, second.shared_mem) == ("cpp17_kernel", "1", "32", None)
    assert ("define", "WARP", 32, "nested_kernel", "32") in literals(m)
    assert ("template_arg", "N", 8, "nested_kernel", "8") in literals(m)


def test_positions_count_utf16_code_units() -> None:
    m = load(DATA / "utf16.cu")
    wide, after = m.kernels
    # `/* é𝄞 */ ` is 13 bytes but 10 UTF-16 units (é: 1, 𝄞: a surrogate pair)
    assert wide.span.start.line == 1 and wide.span.start.character == 10
    assert wide.name_span.start.character == 26 and wide.name_span.start_byte - wide.span.start_byte == 16
    assert at(m, wide.name_span) == "wide"
    assert at(m, after.body_span) == "{ /* é */ x[0] = 2; }"
    assert after.body_span.end.character == len("__global__ void after(float* x) { /* é */ x[0] = 2; }")


def test_constructs_tree_sitter_cannot_parse() -> None:
    m = load(DATA / "tolerant.cu")
    by_name = {k.name: k for k in m.kernels}
    assert list(by_name) == ["three_bounds", "clustered", "plain", "broken", "unterminated"]
    bounds = by_name["three_bounds"].launch_bounds
    assert bounds is not None and (bounds.max_threads, bounds.min_blocks, bounds.max_cluster) == (
        "128",
        "1",
        "2",
    )
    assert {(lit.value, at(m, lit.span)) for lit in m.literals_of("three_bounds")} == {
        (128, "128"),
        (1, "1"),
        (2, "2"),
    }
    assert not any(by_name[n].has_errors for n in ("three_bounds", "clustered", "plain"))
    assert by_name["broken"].has_errors and by_name["unterminated"].has_errors
    assert at(m, by_name["unterminated"].body_span).startswith("{\n  for (int i = 0;")
    assert [t.name for t in m.types] == ["Packed"]
    (launch,) = m.launches
    assert (launch.grid, launch.block) == ("dim3{1, 2}", "{128}")
    assert [at(m, s) for s in launch.config_spans] == ["dim3{1, 2}", "{128}"]
    assert ("launch_dim", None, 128, "plain", "128") in literals(m)
    issue_lines = [i.span.start.line for i in m.issues]
    assert 15 in issue_lines  # `x[0] = = 3;`
    assert any(line >= 22 for line in issue_lines)  # the unclosed braces
    assert all(i.message for i in m.issues)


def test_alignment_argument_with_parentheses_parses() -> None:
    text = (
        "__global__ void staged(float* x) {\n"
        "  extern __shared__ __align__(sizeof(float4)) unsigned char smem[];\n"
        "  __shared__ __align__(alignof(double)) float s;\n"
        "  x[0] = s + smem[0];\n"
        "}\n"
    )
    (k,) = parse_source(text).kernels
    assert (k.name, k.has_errors) == ("staged", False)
    assert parse_source(text.replace("sizeof(float4)", "sizeof(float4")).kernels[0].has_errors


def test_never_raises_on_damaged_or_foreign_text() -> None:
    rng = random.Random(7)
    texts = ["", "#define A 1\n#define B(x) x\n" * 20, "\x00\xff}}{{<<<>>>", "template <", "__global__"]
    texts += [bytes(rng.randrange(256) for _ in range(rng.randrange(3000))).decode("latin-1") for _ in range(30)]
    for sample in (SAMPLES / "silu_and_mul.cu", SAMPLES / "merge_attn_states.cu", DATA / "structure.cu"):
        text = sample.read_text(encoding="utf-8")
        texts += [text[:cut] for cut in range(0, len(text), 97)]
        for _ in range(40):
            chars = list(text)
            for _ in range(rng.randrange(1, 8)):
                pos = rng.randrange(len(chars))
                chars[pos : pos + rng.randrange(3)] = rng.choice(["", "{", "}", "(", "<<<", ";", "\n#", "\ud800"])
            texts.append("".join(chars))
    for text in texts:
        model = parse_source(text)
        assert model.text == text
    empty = parse_source("")
    assert (empty.kernels, empty.issues) == ((), ())
    macros_only = parse_source("#define A 1\n#define B 2\n")
    assert [lit.name for lit in macros_only.literals] == ["A", "B"]


def test_truncated_sample_still_finds_the_complete_kernels() -> None:
    text = (SAMPLES / "silu_and_mul.cu").read_text()
    cut = text.index("void silu_and_mul(torch::Tensor&") + 60
    m = parse_source(text[:cut])
    assert [k.name for k in m.kernels] == ["silu_and_mul_kernel"] and not m.kernels[0].has_errors
    assert m.issues


def test_incremental_reparse_matches_a_fresh_parse() -> None:
    rng = random.Random(3)
    text = (SAMPLES / "merge_attn_states.cu").read_text()
    key = str(DATA / "incremental-edits.cu")
    parse_source(text, key)
    for edit in range(40):
        pos = rng.randrange(len(text))
        text = text[:pos] + rng.choice(["", "x", "{", "\n", " 12 ", "é", ";"]) + text[pos + rng.randrange(3) :]
        assert dataclasses.replace(parse_source(text, key), path=None) == parse_source(text), edit


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("256", 256),
        ("0x10u", 16),
        ("1'024", 1024),
        ("0b101", 5),
        ("010", 8),
        ("64UL", 64),
        ("1.0f", None),
        ("N", None),
    ],
)
def test_int_value(literal: str, value: int | None) -> None:
    assert int_value(literal) == value
