"""The source model builds each part on first use: one kernel's answers, asked for first, equal the whole
file's (every sample and fixture, every kernel and launched name)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutune.cuda import parse_source

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p for d in (ROOT / "samples", ROOT / "tests") for p in d.rglob("*.cu*") if p.suffix in (".cu", ".cuh"))
LITERALS_SEEN = 40  # the files hold at least this many kernel literals: the comparison is not vacuous


def test_the_files_hold_kernels_and_literals() -> None:
    literals = [lit for p in FILES for lit in parse_source(p.read_text(errors="replace"), None).literals if lit.kernel]
    assert len(FILES) > 20 and len(literals) >= LITERALS_SEEN


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_one_kernel_first_equals_the_whole_file(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    whole = parse_source(text, None)  # its lists first
    names = {k.name for k in whole.kernels} | {s.kernel for s in whole.launches}
    for name in sorted(names):
        alone = parse_source(text, f"{path}:{name}")  # a model of its own, asked about one kernel only
        assert alone.launches_of(name) == whole.launches_of(name), name
        assert alone.literals_of(name) == tuple(lit for lit in whole.literals if lit.kernel == name), name
        if any(k.name == name for k in whole.kernels):
            assert alone.kernel(name) == whole.kernel(name), name
        assert "kernels" not in alone.__dict__ and "literals" not in alone.__dict__  # nothing else was built


def test_a_file_of_many_kernels_builds_only_the_one_asked_for() -> None:
    filler = (
        "__global__ void k{i}(float* x) {{ x[threadIdx.x] = {i}; }}\nvoid l{i}(float* x) {{ k{i}<<<1, 128>>>(x); }}\n"
    )
    text = "".join(filler.format(i=i) for i in range(300))
    model = parse_source(text, "many.cu")
    assert model.kernel("k7").name == "k7"
    assert [s.block for s in model.launches_of("k7")] == ["128"]
    assert [lit.value for lit in model.literals_of("k7")] == [128]
    assert "kernels" not in model.__dict__ and "launches" not in model.__dict__ and "literals" not in model.__dict__
    assert len(model.kernels) == 300


def test_a_kernels_literals_alone_see_the_launches_that_share_them() -> None:
    text = """#define BLOCK 128
__global__ void a(float* x) { x[0] = 1; }
__global__ void b(float* x) { x[0] = 2; }
__global__ void c(float* x) { x[0] = 3; }
void host(float* x) {
  int threads = 256;
  a<<<1, threads>>>(x);
  b<<<1, threads>>>(x);
  c<<<1, 64>>>(x);
}
void other(float* x) { a<<<2, BLOCK>>>(x); }
"""
    whole = parse_source(text, "shared.cu").literals
    assert {(lit.value, lit.kernel) for lit in whole} >= {(256, None), (64, "c"), (128, "a"), (2, "a")}
    for kernel in "abc":
        alone = parse_source(text, f"shared.cu:{kernel}")
        assert alone.literals_of(kernel) == tuple(lit for lit in whole if lit.kernel == kernel), kernel
        assert "launches" not in alone.__dict__ and "_launches" not in alone.facts.__dict__


def test_launch_configs_are_the_launch_sites_configuration_spans() -> None:
    configs = [
        c
        for p in FILES
        for c in parse_source(p.read_text(encoding="utf-8", errors="replace"), f"{p}:configs").launch_configs
    ]
    sites = [
        (span.start_byte, span.end_byte, slot)
        for p in FILES
        for site in parse_source(p.read_text(encoding="utf-8", errors="replace"), f"{p}:sites").launches
        for slot, span in enumerate(site.config_spans)
    ]
    assert len(configs) > 40 and configs == sites


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_kernel_looked_up_first_walks_only_the_parts_that_name_it(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    whole = parse_source(text, None)
    for kernel in whole.kernels:
        alone = parse_source(text, f"{path}:{kernel.name}:first")
        assert alone.kernel(kernel.name) == whole.kernel(kernel.name), kernel.name
        assert "_decls" not in alone.facts.__dict__  # the file's declarations were not all collected
