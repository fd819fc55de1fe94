"""The flashinfer corpus: its norm, activation, rope, cascade and paged-KV kernels run through cutune
(parse, extract, nvcc compile, templatize), shared by tests/corpus and benchmarks/corpus_report.py.

flashinfer-python is installed without its dependencies (scripts/test.sh); its wheel ships the CUDA
headers under `flashinfer/data/include`. Nothing of it is copied here: the files are read where pip put them.
"""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from cutune.cuda.extract import extract_kernel
from cutune.cuda.model import Kernel, SourceModel, TemplateParamKind
from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError
from cutune.gpu.compile import CompileJob, compile_many
from cutune.template.templatize import templatize

FILES = (
    "flashinfer/norm.cuh",
    "flashinfer/activation.cuh",
    "flashinfer/pos_enc.cuh",
    "flashinfer/attention/cascade.cuh",
    "flashinfer/page.cuh",
)
# a definition: `__global__`, attributes such as `__launch_bounds__(256)`, the return type, then `name(`
_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^()]*\)\s*)?[\w:<>, ]*?\b(\w+)\s*\(", re.S)


def include_root() -> Path | None:
    """flashinfer's `data/include` folder, or None when flashinfer-python is not installed."""
    spec = importlib.util.find_spec("flashinfer")
    for location in (spec.submodule_search_locations or []) if spec else []:
        root = Path(location) / "data" / "include"
        if (root / FILES[0]).is_file():
            return root
    return None


@dataclass
class KernelOutcome:
    """What cutune made of one kernel of the corpus."""

    file: str
    kernel: str
    instantiation: str
    instantiation_note: str = ""  # a template argument that could not be chosen well, and why
    extracted: bool = False
    compiled: bool = False
    compile_error: str = ""
    registers: int | None = None
    notes: tuple[str, ...] = ()  # what extraction changed (dropped headers, mapped types)
    applied: tuple[str, ...] = ()
    refusals: tuple[tuple[str, str], ...] = ()  # (recipe, reason)
    error: str = ""  # an unexpected exception: a crash

    @property
    def templatized(self) -> bool:
        """Whether a recipe made one of the kernel's own choices a parameter (compile flags alone do not count)."""
        return any(r != "compile_flags" for r in self.applied)


@dataclass
class CorpusReport:
    """Counts over the corpus."""

    declared: dict[str, list[str]] = field(default_factory=dict)  # `__global__` definitions by regex, per file
    kernels: list[KernelOutcome] = field(default_factory=list)

    def found(self) -> int:
        return len(self.kernels)

    def count(self, what: str) -> int:
        return sum(bool(getattr(k, what)) for k in self.kernels)

    def refusal_classes(self) -> Counter[str]:
        """How often each (recipe, kind of reason) refused, the reason's specifics (names, lines) dropped."""
        return Counter(
            f"{recipe}: {c}"
            for k in self.kernels
            for recipe, reason in k.refusals
            for c in refusal_class(reason, k.kernel)
        )

    def compile_failures(self) -> Counter[str]:
        """The nvcc failures, by their first error line without paths."""
        return Counter(
            re.sub(r"^.*?(?=(?:fatal )?error)", "", k.compile_error) for k in self.kernels if k.compile_error
        )


def refusal_class(reason: str, kernel: str) -> list[str]:
    """A refusal reason's classes (one per `;`-separated part), without what varies between kernels:
    the kernel's and arguments' names, quoted code, parentheses, numbers."""
    classes = []
    for part in reason.split("; "):
        text = part.replace(kernel, "KERNEL")
        text = re.sub(r"^\w+: ", "", text)  # `arg: reason` of specialize
        text = re.sub(r"`[^`]*`", "`…`", text)
        text = re.sub(r"\([^()]*\)", "", text)
        text = re.sub(r"\b(?:a|an) [\w:<>, ]+, not an integral size", "not an integral size", text)
        classes.append(" ".join(re.sub(r"\b\d+\b", "N", text).split()))
    return classes


def instantiation(kernel: Kernel, model: SourceModel) -> tuple[str, str]:
    """A name expression instantiating the kernel with plausible arguments (float for types, a device function
    of the file with the pointer's exact type for function pointers, small powers of two for integers), and
    what could not be chosen well ('' when nothing)."""
    if not kernel.template_params:
        return kernel.name, ""
    args: list[str] = []
    types: dict[str, str] = {}
    why = ""
    for tp in kernel.template_params:
        if tp.kind is TemplateParamKind.TYPE:
            types[tp.name] = _TYPE_ARGS.get(tp.name, "float")
            args.append(types[tp.name])
        elif "(*" in tp.type:
            pointer = _substituted(tp.type, types)
            function = _function_of_type(model, pointer)
            if function is None:
                why = f"{tp.name}: no device function of type `{pointer}` in the file; instantiated with nullptr"
            args.append(function or "nullptr")
        elif tp.type.strip() == "bool":
            args.append("false")
        elif not _INTEGRAL.search(tp.type):  # an enum or a function pointer type: its zero value
            args.append(f"static_cast<{tp.type.strip()}>(0)")
        else:
            args.append(str(_VALUE_ARGS.get(tp.name, 8)))
    return f"{kernel.name}<{', '.join(args)}>", why


def _function_of_type(model: SourceModel, pointer: str) -> str | None:
    """The first device function of the file whose type is the function pointer type `R (*)(A, ...)`, by its
    qualified name (a function template with one type parameter is instantiated to match)."""
    wanted = _POINTER.fullmatch(" ".join(pointer.split()))
    if wanted is None:
        return None
    result, params = _normal(wanted.group(1)), [_normal(p) for p in wanted.group(2).split(",") if p.strip()]
    for f in model.device_functions:
        head = model.text[f.span.start_byte : model.text.find("{", f.span.start_byte)]
        m = _SIGNATURE.search(" ".join(head.split()))
        if m is None or m.group("name") != f.name:
            continue
        tparams = _TEMPLATE_TYPES.findall(m.group("template") or "")
        ret = m.group("ret").split()[-1] if m.group("ret").split() else ""
        binding = {tparams[0]: result} if len(tparams) == 1 else {}
        own_ret = _normal(_substituted(ret, binding))
        own = [_normal(_substituted(_drop_name(p), binding)) for p in m.group("params").split(",") if p.strip()]
        if (own_ret, own) == (result, params) and len(tparams) <= 1:
            name = f"{f.namespace}::{f.name}" if f.namespace else f.name
            return f"{name}<{result}>" if tparams else name
    return None


def _substituted(text: str, names: dict[str, str]) -> str:
    return _WORD.sub(lambda w: names.get(w.group(0), w.group(0)), text)


def _normal(c_type: str) -> str:
    return re.sub(r"\s*([&*])", r"\1", " ".join(c_type.split()))


def _drop_name(param: str) -> str:
    """`const T& x` → `const T&`; an unnamed `const T&` stays."""
    rest = re.sub(r"(?<=[\s&*])[A-Za-z_]\w*\s*$", "", param.strip())
    return rest if re.search(r"\b(?!const\b|volatile\b)[A-Za-z_]\w*", rest) else param.strip()


_WORD = re.compile(r"\b[A-Za-z_]\w*\b")
_INTEGRAL = re.compile(r"\b(?:int|long|short|char|unsigned|signed|size_t|uint|u?int\d+_t)\b")
_POINTER = re.compile(r"(.+?)\s*\(\s*\*\s*\)\s*\((.*)\)")
_SIGNATURE = re.compile(
    r"^(?:template\s*<(?P<template>[^>]*)>\s*)?(?P<ret>(?:[\w:]+\s*[&*]?\s+)+?)(?P<name>\w+)\s*\((?P<params>[^)]*)\)"
)
_TEMPLATE_TYPES = re.compile(r"(?:typename|class)\s+(\w+)")


_TYPE_ARGS = {
    "IdType": "int32_t",
    "RoPEIdType": "int32_t",
    "PagedKVIdType": "int32_t",
    "DTypeKV": "half",
    "DTypeQ": "half",
    "QuantT": "int8_t",
    "QuantType": "__nv_fp8_e4m3",
    "O": "half",
    "CacheT": "flashinfer::paged_kv_t<__nv_fp8_e4m3, int32_t>",
}
_VALUE_ARGS = {"head_dim": 128, "HEAD_DIM": 128, "bdx": 16, "bdy": 4, "num_threads": 128}


def run_corpus(root: Path, cache_dir: Path | None = None, *, arch: str = "sm_90") -> CorpusReport:
    """Parse, extract, compile (in parallel, cached) and templatize every kernel of the corpus files."""
    report = CorpusReport()
    jobs: list[CompileJob] = []
    job_of: list[tuple[KernelOutcome, int]] = []
    for rel in FILES:
        path = root / rel
        text = path.read_text(encoding="utf-8")
        report.declared[rel] = _GLOBAL.findall(_strip_comments(text))
        model = parse_source(text, str(path))
        for k in model.kernels:
            outcome = KernelOutcome(rel, k.name, *instantiation(k, model))
            report.kernels.append(outcome)
            try:
                unit = extract_kernel(model, k.name, instantiations=(outcome.instantiation,), include_dirs=(str(root),))
                outcome.extracted, outcome.notes = True, unit.notes
                job_of.append((outcome, len(jobs)))
                jobs.append(CompileJob(unit.source, arch, include_dirs=unit.include_dirs, kernel=k.name))
                tpl = templatize(model, k.name)
                outcome.applied = tpl.applied
                outcome.refusals = tuple((r.recipe, r.reason) for r in tpl.refused)
            except CutuneError as e:
                outcome.error = f"{type(e).__name__}: {e}"
    results = compile_many(jobs, cache_dir=cache_dir)
    for outcome, j in job_of:
        res = results[j]
        if isinstance(res, CutuneError):
            outcome.compile_error = _first_error(str(res) + "\n" + getattr(res, "log", ""))
        else:
            outcome.compiled, outcome.registers = True, res.registers
    return report


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)


def _first_error(text: str) -> str:
    lines = [ln for ln in text.splitlines() if "error" in ln]
    return (lines[1] if len(lines) > 1 else lines[0] if lines else text)[:200]
