"""Parsed texts are re-used: the same text gives the same tree and model, a rewritten one is re-parsed
incrementally into the tree a fresh parse gives."""

from __future__ import annotations

from pathlib import Path

import pytest
from tree_sitter import Parser

from cutune.cuda.parse import parse_source
from cutune.cuda.syntax import LANGUAGE, parse_tree, stoppable
from cutune.errors import ParseStopped
from cutune.template.tuning import find_struct

ROOT = Path(__file__).resolve().parents[2]


def _sample() -> bytes:
    return (ROOT / "samples" / "silu_and_mul.cu").read_bytes()


def test_the_same_text_gives_the_same_tree_and_a_rewrite_the_tree_a_fresh_parse_gives() -> None:
    data = _sample() + b"\n// cache test 1\n"
    tree = parse_tree(data)
    assert parse_tree(bytes(data)) is tree  # an equal text, another bytes object: not parsed again
    rewritten = data.replace(b"__global__", b"__global__ __launch_bounds__(256)", 1)
    incremental = parse_tree(rewritten)
    fresh = Parser(LANGUAGE).parse(rewritten)
    assert incremental is not tree
    assert str(incremental.root_node) == str(fresh.root_node)
    assert str(tree.root_node) == str(Parser(LANGUAGE).parse(data).root_node)  # the base tree was not edited


def test_a_keyed_edit_re_parses_from_the_keys_last_tree() -> None:
    data = _sample() + b"\n// cache test 2\n"
    parse_tree(data, key="/tmp/a.cu")
    parse_tree(b"__global__ void other(int* p) { *p = 1; }\n", key="/tmp/b.cu")
    edited = data.replace(b"silu_and_mul_kernel", b"silu_and_mul_kernel2")
    assert str(parse_tree(edited, key="/tmp/a.cu").root_node) == str(Parser(LANGUAGE).parse(edited).root_node)


def test_the_model_of_a_text_is_built_once_per_path() -> None:
    text = _sample().decode() + "\n// cache test 3\n"
    model = parse_source(text, "/tmp/x.cu")
    assert parse_source(text, "/tmp/x.cu") is model
    other = parse_source(text, "/tmp/y.cu")
    assert other is not model and other.path == "/tmp/y.cu" and other.kernels == model.kernels


def test_find_struct_takes_the_definition_in_the_kernels_namespace_not_a_mention_or_declaration() -> None:
    text = """
// k_tuning is written below
struct k_tuning;
namespace other { struct k_tuning { static constexpr int A = 1; }; }
struct k_tuning {
  static constexpr int BLOCK_THREADS = 128;  // threads per block
};
__global__ void k(float* p) { p[threadIdx.x] = 0; }
"""
    model = parse_source(text)
    data = text.encode()
    found = find_struct(parse_tree(data).root_node, data, model.kernel("k"))
    assert found is not None
    assert [(m.name, m.value, m.comment) for m in found.members] == [("BLOCK_THREADS", "128", "threads per block")]
    assert data[found.start : found.end].startswith(b"struct k_tuning {")


def test_a_parse_its_caller_stops_raises_and_leaves_nothing_cached() -> None:
    text = (_sample() * 40).decode() + "\n// stopped parse\n"  # long enough that tree-sitter asks as it goes
    asked = []

    def stop() -> bool:
        asked.append(True)
        return len(asked) > 2

    with pytest.raises(ParseStopped, match="a newer text replaced this one"), stoppable(stop):
        parse_source(text, "stopped.cu")
    assert 3 <= len(asked) <= 4  # it ends at the first yes (and asks once more to tell why it failed)
    with stoppable(lambda: False):
        model = parse_source(text, "stopped.cu")  # parsed in full this time, and kept
    assert model.kernels and parse_source(text, "stopped.cu") is model


def test_building_a_parsed_models_kernels_stops_too_and_is_built_again_when_wanted() -> None:
    text = (_sample() * 40).decode() + "\n// stopped build\n"
    model = parse_source(text, "built.cu")
    with pytest.raises(ParseStopped), stoppable(lambda: True):
        _ = model.kernels
    assert len(model.kernels) == 40 * len(parse_source(_sample().decode(), "one.cu").kernels)
