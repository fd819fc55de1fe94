"""Declarations walks a file's parts as answers need them: each answer equals the one read off the whole file's
declarations (every sample and fixture, and a text of the awkward cases)."""

from __future__ import annotations

import bisect
from pathlib import Path

import pytest

from cutune.cuda.decls import FUNCTION_KINDS, Decl, Declarations, DeclKind, collect_decls
from cutune.cuda.syntax import parse_tree

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p for d in (ROOT / "samples", ROOT / "tests") for p in d.rglob("*.cu*") if p.suffix in (".cu", ".cuh"))
AWKWARD = b"""#include <cuda.h>
#define BLOCK 256
__device__ float twice(float x) { return 2 * x; };
namespace outer { namespace {
template <typename T> __device__ T half(T x) { return x / 2; }
#define INNER 4
} }
extern "C" { __global__ void c_kernel(float* x) { x[0] = twice(1); } }
extern "C" __global__ void c_one(float* x) { x[0] = 1; }
#if defined(FAST)
__device__ int fast() { return 1; }
#else
__device__ int fast() { return 0; }
#endif
struct S { int f() { return 1; } };
int S::g() { return 2; }
__global__ void broken(float* x) { x[0] = ; }
void host(float* x) { c_kernel<<<1, BLOCK>>>(x); }
"""


def texts() -> list[tuple[str, bytes]]:
    return [("awkward", AWKWARD)] + [(str(p.relative_to(ROOT)), p.read_bytes()) for p in FILES]


def function_at(decls: list[Decl], offset: int) -> Decl | None:
    """The function around an offset, read off the whole file's declarations sorted by where they start."""
    functions = sorted((d for d in decls if d.kind in FUNCTION_KINDS), key=lambda d: d.start)
    i = bisect.bisect_right([d.start for d in functions], offset) - 1
    return functions[i] if i >= 0 and offset < functions[i].end else None


@pytest.mark.parametrize(("name", "data"), texts(), ids=[name for name, _ in texts()])
def test_each_answer_equals_the_whole_files(name: str, data: bytes) -> None:
    root = parse_tree(data).root_node
    whole = collect_decls(root, data)
    # the offsets around every declaration and launch, and every line's start
    offsets = {o for d in whole for o in (d.start - 1, d.start, d.end - 1, d.end)}
    offsets |= {i for i, b in enumerate(data) if b in b"\n<;"} | {len(data)}
    lazy = Declarations(root, data)  # asked for functions first: nothing else walked
    assert [lazy.function_at(o) for o in sorted(offsets)] == [function_at(whole, o) for o in sorted(offsets)]
    fresh = Declarations(root, data)
    for names in {d.names for d in whole if d.names}:
        for n in names:
            assert [d for d in fresh.holding(n) if n in d.names] == [d for d in whole if n in d.names], n
    device = [d for d in whole if d.kind is DeclKind.DEVICE_FUNCTION]
    assert [d for d in Declarations(root, data).holding("__device__") if d.kind is DeclKind.DEVICE_FUNCTION] == device
    wanted = (DeclKind.MACRO, DeclKind.INCLUDE)
    assert Declarations(root, data).directives == [d for d in whole if d.kind in wanted]
    assert fresh.all == whole


def test_the_awkward_text_holds_each_case() -> None:
    whole = collect_decls(parse_tree(AWKWARD).root_node, AWKWARD)
    kinds = {(d.name, d.kind) for d in whole}
    assert {("INNER", DeclKind.MACRO), ("half", DeclKind.DEVICE_FUNCTION), ("c_kernel", DeclKind.KERNEL)} <= kinds
    assert [d.name for d in whole if d.name == "fast"] == ["fast", "fast"]


def test_a_lookup_walks_only_the_parts_it_needs() -> None:
    data = b"".join(b"__global__ void k%d(float* x) { x[0] = %d; }\n" % (i, i) for i in range(200))
    lazy = Declarations(parse_tree(data).root_node, data)
    assert [d.name for d in lazy.holding("k17(")] == ["k17"]
    assert lazy.function_at(data.index(b"k42(")).name == "k42"
    assert lazy.directives == []
    assert len(lazy._walked) == 2 and "all" not in lazy.__dict__
