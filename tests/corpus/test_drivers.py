"""The capture benchmark's corpus drivers (benchmarks/corpus_drivers) still fit the corpus they drive: each case's
file holds its kernel, a driver file exists for its library and defines the entry point the program calls, and
the program has a call for it. The drivers build and run only on a GPU machine (benchmarks/corpus_capture.py);
this keeps them from rotting silently between GPU runs."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from cutune.cuda.parse import parse_source

from .sources import corpora

DRIVERS = Path(__file__).resolve().parents[2] / "benchmarks" / "corpus_drivers"
sys.path.insert(0, str(DRIVERS))
from cases import CASES, Case  # noqa: E402

FOUND = corpora()
KERNEL_ROOTS = {"llama.cpp": Path("src/ggml-cuda"), "deepspeed": Path()}


def _calls() -> set[str]:
    """The case names program.py has a call for (read from its source: it imports torch)."""
    tree = ast.parse((DRIVERS / "program.py").read_text(encoding="utf-8"))
    table = next(n.value for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "CALLS")
    assert isinstance(table, ast.Dict)
    return {k.value for k in table.keys if isinstance(k, ast.Constant)}


def test_every_case_has_a_call_and_a_driver_entry_point() -> None:
    calls = _calls()
    for case in CASES:
        assert case.name in calls, f"program.py has no call for {case.name}"
        folder = "llama_cpp" if case.corpus == "llama.cpp" else "deepspeed"
        driver = (DRIVERS / folder / f"{case.library}.cu").read_text(encoding="utf-8")
        assert re.search(rf"CORPUS_ENTRY {case.name}\(", driver), f"{case.library}.cu does not define {case.name}"
        assert f'#include "{case.file}"' in driver or f'#include "{Path(case.file).name}"' in driver


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_case_kernel_is_defined_in_its_corpus_file(case: Case) -> None:
    if case.corpus not in FOUND:
        pytest.skip(f"{case.corpus} is not unpacked here (scripts/corpus.sh)")
    path = FOUND[case.corpus].root / KERNEL_ROOTS[case.corpus] / case.file
    kernels = {k.name for k in parse_source(path.read_text(encoding="utf-8"), str(path)).kernels}
    assert case.kernel in kernels
    assert len(case.sizes) == len(case.calls) == 3
