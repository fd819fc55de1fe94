"""Generality count: every structural transform tried on every kernel of samples/ and of the production corpora
(flashinfer, DeepSpeed's csrc/, llama.cpp's ggml-cuda/, where `tests/corpus/sources.py` finds them; the held-out
corpora of scripts/held_out.sh only when `--corpus` names them), each definition on its own (overloads of
one name too, the others renamed for it), the way `cutune templatize` proposes variants (canonicalised first), with
the include folders each corpus's build uses (as a spec's `include_dirs` names them: loop macros are looked up in
the headers there). Per transform: where it applied and where it refused, by reason; per corpus: kernels, kernels
with a `<<<...>>>` launch in their file, and those that get at least one variant (beside them, counting the
kernels launched through `cudaLaunchKernelEx` too, and those launched by any file of their code base);
code-changing recipes (index_bits) beside them; the row-reduction kernels (norms and softmax, by name) and whether
row_reduce applies to each (online_merge, which merges an online softmax's per-round reductions once, and row_cache,
which keeps a row read in several counted passes in registers, counted beside it). No transform may crash: an
unexpected exception is counted and printed as a crash.

    python benchmarks/transform_report.py [--json FILE] [--corpus NAME ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import sys
import time
from collections import Counter
from pathlib import Path

from cutune.cuda.model import Kernel, SourceModel
from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError, RecipeRefused
from cutune.template.recipes.base import Draft, KernelSource, Recipe, descendants
from cutune.template.recipes.host import launch_ex_blocks
from cutune.template.recipes.index_bits import IndexBits
from cutune.template.variants import TRANSFORMS, propose_variants
from cutune.template.variants.canonical import canonicalise
from cutune.template.variants.loops import grid_index_axis, index_form
from cutune.template.variants.rows_on_grid import PURE_CALLS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.corpus.sources import corpora, held_out  # noqa: E402

# templatize recipes that change the kernel's code (not only its launch), counted beside the structural transforms
RECIPES: tuple[Recipe, ...] = (IndexBits(),)
_DETAIL = re.compile(r"line \d+|`[^`]*`|\((?:line|the|\d)[^()]*\)|\b[A-Za-z_]\w*\[[^\]]*\]")
# the kernels a row reduction computes: norms and softmax, told by name (a report's class, not a rule)
# `fused_ln` is a LayerNorm; `nms3d_normal` (a box's normal) is not a norm
ROW_REDUCTION = re.compile(r"(?<!re)norm(?!al)|soft_?max|(?:^|_)ln(?:_|$)", re.IGNORECASE)
NOT_ROW_REDUCTION = re.compile(r"rope|all_?reduce|lamport", re.IGNORECASE)  # rotary "rope_norm", comm kernels


def sources(names: list[str] | None = None) -> dict[str, tuple[list[Path], list[str]]]:
    """The samples' .cu files, then each corpus's kernel files, by corpus name, each with its include folders; the
    held-out corpora only where `names` asks for them."""
    found = {"samples": (sorted((ROOT / "samples").rglob("*.cu")), [])}
    for name, corpus in {**corpora(), **(held_out() if names else {})}.items():
        found[name] = (list(corpus.files), [str(d) for d in corpus.include_dirs])
    return {k: v for k, v in found.items() if not names or k in names}


def launched_in(names: list[str] | None = None) -> dict[str, set[str]]:
    """By corpus, the kernels some file of its code base launches with `<<<...>>>`: a kernel defined in a header is
    often launched from a `.cu` file that defines none (mmcv's ops), which the per-file count does not see."""
    roots = {"samples": ROOT / "samples"}
    roots |= {name: c.root for name, c in {**corpora(), **(held_out() if names else {})}.items()}
    found: dict[str, set[str]] = {}
    for name, root in roots.items():
        if names and name not in names:
            continue
        found[name] = set()
        for path in sorted(p for p in root.rglob("*") if p.suffix in (".cu", ".cuh", ".cpp", ".h", ".hpp")):
            text = path.read_text(encoding="utf-8", errors="replace")
            if "<<<" in text:
                found[name] |= {site.kernel for site in parse_source(text, str(path)).launches}
    return found


def definitions(model: SourceModel) -> list[tuple[Kernel, SourceModel]]:
    """Each kernel with the model to judge it in: where several definitions share a name (overloads for float and
    __half), one model per definition with the others renamed, so that a lookup by name finds that one."""
    named = Counter(k.name for k in model.kernels)
    found: list[tuple[Kernel, SourceModel]] = []
    data = model.text.encode("utf-8")
    for k in model.kernels:
        if named[k.name] == 1:
            found.append((k, model))
            continue
        text = bytearray(data)
        others = [o for o in model.kernels if o.name == k.name and o is not k]
        for o in sorted(others, key=lambda o: -o.name_span.start_byte):
            text[o.name_span.start_byte : o.name_span.end_byte] = f"{o.name}_overload".encode()
        found.append((k, parse_source(text.decode("utf-8"), model.path)))
    return found


def column_reduction(model: SourceModel, kernel: str) -> str:
    """Why a kernel named like a norm reduces columns, not rows (blocks tile the columns by
    `blockIdx.x * blockDim.x + threadIdx.x` and a loop walks the rows from threadIdx.y), or ''."""
    k = model.kernel(kernel)
    if k.has_errors:
        return ""
    src = KernelSource(model, k)
    columns = [d for d in src.in_body("init_declarator") if grid_index_axis(src.field(d, "value")) == "x"]
    for loop in src.in_body("for_statement"):
        init = loop.child_by_field_name("initializer")
        starts = [d.child_by_field_name("value") for d in descendants(init, "init_declarator")] if init else []
        if columns and any(v is not None and index_form(src.text(v)) == "threadIdx.y" for v in starts):
            column = src.field(columns[0], "declarator")
            return (
                f"a column reduction: blocks tile the columns (`{column}` at line {src.line(columns[0])}), the loop "
                f"at line {src.line(loop)} walks the rows from threadIdx.y"
            )
    return ""


# what lets a kernel's threads combine values: shared memory, barriers, warp exchanges, block and group reductions
_COOPERATION = re.compile(
    r"__shared__|__sync\w*|shfl|ballot|__reduce_|atomic|cub::|cooperative_groups|\bcg::|this_thread_block|"
    r"tiled_partition|reduce|warp|block_?sum|barrier",
    re.IGNORECASE,
)


def elementwise(model: SourceModel, kernel: str) -> str:
    """Why a kernel named like a norm or softmax combines no values across threads (an elementwise kernel over a
    softmax's output, a loss), or '': nothing in its body, nor in the file's functions it calls, lets threads meet,
    and it calls nothing from elsewhere but intrinsics, casts and math."""
    k = model.kernel(kernel)
    if k.has_errors:
        return ""
    src = KernelSource(model, k)
    defined = {f.name: f for f in model.device_functions}
    data = model.text.encode("utf-8")
    texts, pending, seen = [src.text(src.body)], [src.body], set()
    while pending:
        for call in descendants(pending.pop(), "call_expression"):
            name = src.field(call, "function").split("<")[0].split("::")[-1].strip()
            if name in defined and name not in seen:
                seen.add(name)
                span = defined[name].span
                texts.append(data[span.start_byte : span.end_byte].decode("utf-8", errors="replace"))
                found = src.root.descendant_for_byte_range(span.start_byte, max(span.end_byte - 1, 0))
                pending += [found] if found is not None else []
            elif name not in defined and not PURE_CALLS.fullmatch(name) and not src.template_param(name):
                return ""  # a function from elsewhere (`vllm::compute_rms`): it may combine values across threads
    if any(_COOPERATION.search(t) for t in texts):
        return ""
    return (
        "an elementwise kernel: no thread combines values with another (no shared memory, barrier, warp exchange, "
        "atomic or reduction)"
    )


def _launched_ex(model: SourceModel, kernel: Kernel) -> bool:
    """Whether the file launches the kernel through `cudaLaunchKernelEx` (named in the call or by a local)."""
    if "cudaLaunchKernelEx" not in model.text or kernel.has_errors:
        return False
    try:
        return bool(launch_ex_blocks(KernelSource(model, kernel)))
    except CutuneError:
        return False


def reason_kind(reason: str) -> str:
    """A refusal's reason with its specifics (lines, code, names) taken out, so like reasons count together."""
    first = re.sub(r"the loop at line \d+ ", "a loop ", reason.split("; ")[0])
    while (shorter := _DETAIL.sub("…", first)) != first:
        first = shorter
    return " ".join(first.split())


def cpu_name() -> str:
    """The CPU model, as /proc/cpuinfo names it."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def main() -> None:
    """Print the table (and write it as JSON when asked)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--corpus",
        nargs="*",
        help="only these (samples, flashinfer, deepspeed, llama.cpp; held out: vllm, exllamav2, mamba, "
        "causal_conv1d, mmcv, gptqmodel, gsplat, torch_scatter, auto_gptq)",
    )
    args = ap.parse_args()
    applied: Counter[str] = Counter()
    refused: dict[str, Counter[str]] = {name: Counter() for name in TRANSFORMS}
    crashes: list[str] = []
    per_corpus: dict[str, dict[str, int]] = {}
    row_kernels: list[dict[str, object]] = []
    # named like norms or softmax, but reducing columns or nothing across threads: not row reductions
    column_kernels: list[dict[str, object]] = []
    slowest = (0.0, "")
    files = sources(args.corpus)
    anywhere = launched_in(args.corpus)
    for corpus, (paths, include_dirs) in files.items():
        counts = per_corpus.setdefault(corpus, Counter())
        for path in paths:
            try:
                file_model = parse_source(path.read_text(encoding="utf-8", errors="replace"), str(path))
            except CutuneError as e:
                crashes.append(f"{path}: parse: {e}")
                continue
            launched = {site.kernel for site in file_model.launches}
            for kernel, model in definitions(file_model):
                start = time.perf_counter()
                try:
                    variants, refusals = propose_variants(model, kernel.name, None, include_dirs=include_dirs)
                except CutuneError as e:
                    crashes.append(f"{path.name}:{kernel.name}: {type(e).__name__}: {e}")
                    continue
                except Exception as e:  # a crash is what this report exists to find
                    crashes.append(f"{path.name}:{kernel.name}: {type(e).__name__}: {e}")
                    continue
                took = time.perf_counter() - start
                slowest = max(slowest, (took, f"{path.name}:{kernel.name}"))
                origins = {v.provenance.origin for v in variants} & set(TRANSFORMS)
                for name in origins:
                    applied[name] += 1
                for step in canonicalise(model, kernel.name, include_dirs).applied:
                    applied[f"canonical {step}"] += 1
                for r in refusals:
                    if r.recipe not in origins:
                        refused.setdefault(r.recipe, Counter())[reason_kind(r.reason)] += 1
                has_launch = kernel.name in launched
                # launched through cudaLaunchKernelEx as well (the launch model lists `<<<...>>>` sites only)
                launched_ex = has_launch or _launched_ex(model, kernel)
                for recipe in RECIPES:
                    key = f"recipe {recipe.name}"
                    try:
                        recipe.apply(model, kernel, Draft(model.text))
                        applied[key] += 1
                        counts[key] += 1
                        counts[f"with_launch_{key}"] += has_launch
                        counts[f"with_launch_only_{key}"] += has_launch and not origins  # its only change
                    except RecipeRefused as e:
                        refused.setdefault(key, Counter())[reason_kind(e.reason)] += 1
                    except CutuneError as e:  # templatize stops there too, before any recipe
                        refused.setdefault(key, Counter())[f"not templatized: {reason_kind(str(e))}"] += 1
                    except Exception as e:  # a crash is what this report exists to find
                        crashes.append(f"{path.name}:{kernel.name}: {key}: {type(e).__name__}: {e}")
                counts["kernels"] += 1
                counts["with_launch"] += has_launch
                counts["any_variant"] += bool(origins)
                counts["with_launch_any_variant"] += bool(origins) and has_launch
                counts["with_launch_ex"] += launched_ex
                counts["launched_anywhere"] += kernel.name in anywhere.get(corpus, set())
                counts["launched_anywhere_any_variant"] += bool(origins) and kernel.name in anywhere.get(corpus, set())
                counts["with_launch_ex_any_variant"] += bool(origins) and launched_ex
                if ROW_REDUCTION.search(kernel.name) and not NOT_ROW_REDUCTION.search(kernel.name):
                    why = next((r.reason for r in refusals if r.recipe == "row_reduce"), "")
                    entry = {
                        "corpus": corpus,
                        "file": str(path.relative_to(path.parents[2])),
                        "kernel": kernel.name,
                        "line": kernel.span.start.line + 1,
                        "row_reduce": "row_reduce" in origins,
                        # a row variant of its own: the reduction's rounds merged once (not counted as row_reduce)
                        "online_merge": "online_merge" in origins,
                        "row_cache": "row_cache" in origins,
                        "refused": "" if "row_reduce" in origins else why,
                    }
                    columns = (
                        ""
                        if "row_reduce" in origins
                        else column_reduction(model, kernel.name) or elementwise(model, kernel.name)
                    )
                    (column_kernels if columns else row_kernels).append(
                        {**entry, "excluded": columns} if columns else entry
                    )
    kernels = sum(c["kernels"] for c in per_corpus.values())
    print(f"{kernels} kernels in {sum(len(p) for p, _ in files.values())} files")
    print(f"{'corpus':>10} {'kernels':>8} {'launched':>9} {'any variant':>12} {'launched+variant':>17}")
    for corpus, c in per_corpus.items():
        share = c["with_launch_any_variant"] / c["with_launch"] if c["with_launch"] else 0.0
        print(
            f"{corpus:>10} {c['kernels']:8d} {c['with_launch']:9d} {c['any_variant']:12d} "
            f"{c['with_launch_any_variant']:9d} ({share:.0%})"
        )
    launched = sum(c["with_launch"] for c in per_corpus.values())
    launched_variant = sum(c["with_launch_any_variant"] for c in per_corpus.values())
    share = launched_variant / max(launched, 1)
    print(f"{'all':>10} launched {launched}, of them with a variant {launched_variant} ({share:.0%})")
    launched_ex = sum(c["with_launch_ex"] for c in per_corpus.values())
    launched_ex_variant = sum(c["with_launch_ex_any_variant"] for c in per_corpus.values())
    print(
        f"{'':>10} with cudaLaunchKernelEx launches too: {launched_ex}, of them with a variant {launched_ex_variant} "
        f"({launched_ex_variant / max(launched_ex, 1):.0%})"
    )
    anywhere_all = sum(c["launched_anywhere"] for c in per_corpus.values())
    anywhere_variant = sum(c["launched_anywhere_any_variant"] for c in per_corpus.values())
    print(
        f"{'':>10} launched by any file of their code base: {anywhere_all}, of them with a variant "
        f"{anywhere_variant} ({anywhere_variant / max(anywhere_all, 1):.0%}); by corpus: "
        + ", ".join(f"{k} {c['launched_anywhere_any_variant']}/{c['launched_anywhere']}" for k, c in per_corpus.items())
    )
    for name in dict.fromkeys([*TRANSFORMS, *refused, *applied]):
        total = applied[name] + sum(refused.get(name, Counter()).values())
        print(f"\n{name}: applied {applied[name]} / {total}")
        for reason, n in refused.get(name, Counter()).most_common(12):
            print(f"  refused {n:4d}: {reason}")
    rows_done = sum(bool(r["row_reduce"]) for r in row_kernels)
    print(f"\nrow-reduction kernels (norm/softmax by name): row_reduce applies to {rows_done} of {len(row_kernels)}")
    merged = sum(bool(r["online_merge"]) for r in row_kernels)
    cached = sum(bool(r["row_cache"]) for r in row_kernels)
    any_row = sum(bool(r["row_reduce"] or r["online_merge"] or r["row_cache"]) for r in row_kernels)
    print(
        f"online_merge applies to {merged} of them, row_cache to {cached}; a row variant of any of the three: "
        f"{any_row} of {len(row_kernels)}"
    )
    for r in row_kernels:
        where = f"{r['corpus']}:{r['kernel']}:{r['line']}"
        merge = "".join(f" ({t})" for t in ("online_merge", "row_cache") if r[t])
        print(f"  {'yes' if r['row_reduce'] else 'no ':3} {where}{merge} {r['refused'][:160]}")
    print(f"excluded, named like norms or softmax but not row reductions: {len(column_kernels)}")
    for r in column_kernels:
        print(f"  --  {r['corpus']}:{r['kernel']}:{r['line']} {r['excluded']}")
    print(f"\nslowest kernel: {slowest[0]:.2f} s ({slowest[1]})")
    print(f"crashes: {len(crashes)}")
    for c in crashes:
        print(f"  {c}")
    if args.json:
        data = {
            "device": cpu_name(),
            "date": datetime.date.today().isoformat(),
            "kernels": kernels,
            "files": sum(len(p) for p, _ in files.values()),
            "corpora": {k: dict(v) for k, v in per_corpus.items()},
            "launched": launched,
            "launched_with_variant": launched_variant,
            "launched_ex": launched_ex,
            "launched_ex_with_variant": launched_ex_variant,
            "launched_anywhere": anywhere_all,
            "launched_anywhere_with_variant": anywhere_variant,
            "applied": dict(applied),
            "refused": {k: dict(v.most_common()) for k, v in refused.items()},
            "row_reduction_kernels": row_kernels,
            "excluded_kernels": column_kernels,
            "slowest_kernel_s": round(slowest[0], 3),
            "crashes": crashes,
        }
        args.json.write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
