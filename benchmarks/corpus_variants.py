"""Production kernels, each read in place from its corpus file with only a spec written here
(`benchmarks/corpus_specs/`), tuned with their structural variants (canonicalised first) on the GPU.

    python benchmarks/corpus_variants.py OUT_DIR [--trials 8] [--seconds 6] [--only k1,k2]
    python benchmarks/corpus_variants.py --check          # CPU: every spec loads, every variant compiles
    python benchmarks/corpus_variants.py --merge STEM A.json B.json   # one table and bar over runs split in parts

Per kernel and size: original and tuned time, speedup, % of the floor, the winning variant (every candidate is
checked against the original by the tuner); then the bar of issue #21: never slower, and over the kernels whose
original runs below 60% of the floor at ≥ 64 MB, the geomean speedup there and the tuned % of the floor.
The corpora must be where `tests/corpus/sources.py` finds them (scripts/corpus.sh; flashinfer's wheel).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.variants import BIG, log_selection, measure, size_table  # noqa: E402
from tests.corpus.sources import corpora, held_out  # noqa: E402

from cutune.check import check_kernel  # noqa: E402
from cutune.project import KernelContext, open_kernel  # noqa: E402
from cutune.spec import load_spec  # noqa: E402
from cutune.spec.check import check_against_kernel  # noqa: E402
from cutune.template.recipes.index_bits import NAME as INDEX_BITS  # noqa: E402
from cutune.template.variants import VARIANT, combine_all  # noqa: E402
from cutune.tune.options import SelectionOptions, TuneOptions  # noqa: E402

SPECS = ROOT / "benchmarks" / "corpus_specs"
COMPILER = "auto"  # what tune uses: NVRTC, and nvcc where NVRTC cannot compile
SLOW = 60.0  # % of the floor below which an original is slow (the bar's kernels)
FLOOR_BAR = 85.0  # % of the floor each slow kernel's tuned sizes ≥ 64 MB are to reach
# eleven kernels in one short GPU step: 3 finalists, 3 selection and 3 confirmation rounds, one fresh-input re-check
# of each finalist (every candidate is still checked against the original); no compute-sanitizer pass
QUICK = TuneOptions(
    workspace=ROOT, selection=SelectionOptions(top_k=3, rounds=3, confirm_rounds=3, verify_seeds=1), sanitize=False
)  # % of the floor: originals below it at ≥ 64 MB are the ones the bar's geomean is over


@dataclass(frozen=True)
class Entry:
    """One corpus kernel: its kind, where it lies in its corpus, and the spec written for it here."""

    kind: str
    corpus: str
    path: str  # relative to the corpus root
    kernel: str
    spec: str  # a file of SPECS
    include_dirs: tuple[str, ...] = ()  # beyond the corpus's own, relative to its root


LLAMA = "src/ggml-cuda"
DS = "transformer/inference/csrc"
INFERENCE = ("transformer/inference/includes",)
CONVERT = f"{LLAMA}/convert.cu"
TABLE = [
    Entry("elementwise", "llama.cpp", f"{LLAMA}/scale.cu", "scale_f32", "llama_scale.tune.toml"),
    Entry("activation", "llama.cpp", f"{LLAMA}/unary.cu", "unary_op_kernel", "llama_unary_silu.tune.toml"),
    Entry(
        "activation-and-mul", "llama.cpp", f"{LLAMA}/unary.cu", "unary_gated_op_kernel", "llama_gated_silu.tune.toml"
    ),
    Entry("cache write", "llama.cpp", f"{LLAMA}/set-rows.cu", "k_set_rows", "llama_set_rows.tune.toml"),
    Entry("RMSNorm", "llama.cpp", f"{LLAMA}/norm.cu", "rms_norm_f32", "llama_rms_norm.tune.toml"),
    Entry("gather", "llama.cpp", f"{LLAMA}/getrows.cu", "k_get_rows_float", "llama_get_rows.tune.toml"),
    Entry("LayerNorm", "llama.cpp", f"{LLAMA}/norm.cu", "norm_f32", "llama_layer_norm.tune.toml"),
    Entry("L2Norm", "llama.cpp", f"{LLAMA}/norm.cu", "l2_norm_f32", "llama_l2_norm.tune.toml"),
    Entry("softmax backward", "llama.cpp", f"{LLAMA}/softmax.cu", "soft_max_back_f32", "llama_soft_max_back.tune.toml"),
    Entry("quantisation", "llama.cpp", f"{LLAMA}/quantize.cu", "quantize_q8_1", "llama_quantize_q8_1.tune.toml"),
    Entry("softmax (short rows)", "llama.cpp", f"{LLAMA}/softmax.cu", "soft_max_f32", "llama_soft_max.tune.toml"),
    # llama.cpp's dequantisers to fp16 for cuBLAS: q4_K first (the table's kind), then the formats measured beside it
    *(
        Entry("dequantisation", "llama.cpp", CONVERT, f"dequantize_block_{q}", f"llama_dequantize_{q}.tune.toml")
        for q in ("q4_K", "q4_0", "iq4_nl", "q6_K", "q5_K", "q2_K")
    ),
    Entry(
        "fused add + RMSNorm",
        "deepspeed",
        f"{DS}/rms_norm.cu",
        "pre_rms_norm",
        "deepspeed_pre_rms_norm.tune.toml",
        INFERENCE,
    ),
    Entry(
        "softmax",
        "flashinfer",
        "flashinfer/sampling.cuh",
        "OnlineSoftmaxFusedKernel",
        "flashinfer_online_softmax.tune.toml",
    ),
    Entry(
        "bias + activation", "deepspeed", f"{DS}/gelu.cu", "fused_bias_gelu", "deepspeed_bias_gelu.tune.toml", INFERENCE
    ),
    Entry("QK norm", "flashinfer", "flashinfer/norm.cuh", "QKRMSNormKernel", "flashinfer_qk_rms_norm.tune.toml"),
]
# held-out corpora (scripts/held_out.sh): tuned only when asked for by name (--only), never in the bar's table
HELD_OUT = [
    Entry("quantisation (held out)", "exllamav2", "quantize.cu", "quantize_kernel", "exllamav2_quantize.tune.toml"),
    Entry("RMSNorm (held out)", "exllamav2", "rms_norm.cu", "rms_norm_kernel", "exllamav2_rms_norm.tune.toml"),
    Entry(
        "bit packing (held out)", "exllamav2", "pack_tensor.cu", "pack_rows_4_kernel", "exllamav2_pack_rows.tune.toml"
    ),
    Entry(
        "rotary (held out)",
        "vllm",
        "pos_encoding_kernels.cu",
        "rotary_embedding_kernel",
        "vllm_rotary_embedding.tune.toml",
    ),
    Entry(
        "MLA rotary + cache write (held out)",
        "vllm",
        "cache_kernels_fused.cu",
        "concat_and_cache_mla_rope_fused_kernel",
        "vllm_mla_rope_cache.tune.toml",
    ),
    Entry(
        "BatchNorm backward (held out)",
        "mmcv",
        "common/cuda/sync_bn_cuda_kernel.cuh",
        "sync_bn_backward_data_cuda_kernel",
        "mmcv_sync_bn_backward_data.tune.toml",
    ),
    Entry("Adam step (held out)", "gsplat", "csrc/AdamCUDA.cu", "adam_kernel", "gsplat_adam.tune.toml"),
    Entry(
        "split-K reduction (held out)",
        "gptqmodel",
        "awq/quantization/gemm_cuda_gen.cu",
        "reduce_splitk_fp32_to_output_kernel",
        "gptqmodel_reduce_splitk.tune.toml",
    ),
    Entry(
        "4-bit GEMV tile (held out)",
        "auto_gptq",
        "cuda_256/autogptq_cuda_kernel_256.cu",
        "VecQuant4MatMulKernel",
        "auto_gptq_vecquant4.tune.toml",
    ),
    # set 5: measured on the GPU before any rule was read against the set
    Entry(
        "4-bit dequantisation (held out)",
        "hqq",
        "hqq_aten_cuda_kernel.cu",
        "dequantize_4bit_u8_kernel",
        "hqq_dequantize_4bit.tune.toml",
    ),
    Entry("voxel grid (held out)", "torch_cluster", "cuda/grid_cuda.cu", "grid_kernel", "torch_cluster_grid.tune.toml"),
    # set 6: measured on the GPU before any rule was read against the set
    Entry(
        "elementwise (held out)",
        "minkowski",
        "math_functions_gpu.cu",
        "addition_kernel",
        "minkowski_addition.tune.toml",
    ),
    # set 8: row_reduce read against the set's refusals (a FasterTransformer-style LayerNorm in three passes)
    Entry(
        "LayerNorm (held out)",
        "lightseq_infer",
        "transformerKernels.cc.cu",
        "ker_norm_layer",
        "lightseq_norm_layer.tune.toml",
    ),
    Entry(
        "dequantise + residual + LayerNorm (held out)",
        "lightseq_infer",
        "transformerKernels_int8.cc.cu",
        "ker_residual_bias_ln_i32I",
        "lightseq_residual_bias_ln_i32I.tune.toml",
    ),
    Entry(
        "dequantise + residual + LayerNorm + quantise (held out)",
        "lightseq_infer",
        "transformerKernels_int8.cc.cu",
        "ker_residual_bias_ln_i32I_i8O",
        "lightseq_residual_bias_ln_i32I_i8O.tune.toml",
    ),
]


def cuda_include_dirs() -> list[str]:
    """The CUDA toolkit's include folders, where nvcc is on PATH."""
    nvcc = shutil.which("nvcc")
    root = Path(nvcc).resolve().parents[1] if nvcc else Path("/usr/local/cuda")
    return [str(root / "include"), *(str(p) for p in root.glob("targets/*/include"))]


def opened(entry: Entry) -> KernelContext:
    """The kernel templatized from its corpus file, with this benchmark's spec; CutuneError when it is not there."""
    found = {**corpora(), **held_out()}.get(entry.corpus)
    if found is None:
        raise FileNotFoundError(f"corpus {entry.corpus} is not here (scripts/corpus.sh, scripts/held_out.sh)")
    ctx = open_kernel(found.root / entry.path, entry.kernel)
    spec = load_spec(SPECS / entry.spec).kernels[entry.kernel]
    dirs = (*(str(d) for d in found.include_dirs), *(str(found.root / d) for d in entry.include_dirs))
    spec = dataclasses.replace(spec, include_dirs=(*dirs, *spec.include_dirs))
    stubbed = [p.name for p in (SPECS / "stubs").glob("*.h")]
    if not all(any((Path(d) / h).exists() for d in cuda_include_dirs()) for h in stubbed):  # compile-only machines
        spec = dataclasses.replace(spec, include_dirs=(*spec.include_dirs, str(SPECS / "stubs")))
    check_against_kernel(spec, ctx.template_model.kernel(entry.kernel))
    return dataclasses.replace(ctx, spec=spec, spec_path=SPECS / entry.spec, spec_error=None)


def check(entry: Entry) -> str:
    """Compile (no GPU) the original and every variant at its defaults, and the original with 32-bit indices where
    index_bits applies; one line saying how it went."""
    ctx = opened(entry)
    combined = combine_all(ctx.template_model, entry.kernel, ctx.template, ctx.spec)
    space = combined.template.space
    pinned = space.varying(VARIANT)
    assert combined.spec is not None
    ctx = dataclasses.replace(
        ctx,
        template=dataclasses.replace(combined.template, space=pinned),
        template_model=combined.model,
        spec=dataclasses.replace(combined.spec, space=None),
    )
    report = check_kernel(ctx, limit=len(combined.variants) + 1, compiler=COMPILER)
    failed = [r for r in report.rows if r.usage is None]
    names = ["original", *(v.name for v in combined.variants)]
    if any(p.name == INDEX_BITS for p in space.params):
        narrow = dataclasses.replace(ctx, template=dataclasses.replace(ctx.template, space=space.varying(INDEX_BITS)))
        rows = check_kernel(narrow, limit=2, compiler=COMPILER).rows
        names.append(f"{INDEX_BITS}=32")
        failed += [r for r in rows if r.usage is None]
        report = dataclasses.replace(report, rows=(*report.rows, *rows[1:]))
    return f"{entry.kernel}: {len(report.rows) - len(failed)} of {len(names)} compiled ({', '.join(names)})" + (
        f"; FAILED: {failed[0].problem}" if failed else ""
    )


def bar(results: list[dict[str, object]]) -> dict[str, object]:
    """Issue #21's bar over the measured kernels."""
    slow, pct = [], []
    for r in results:
        rows = [row for row in r["rows"] if row["bytes_moved"] >= BIG]  # type: ignore[attr-defined]
        # the original's % of the floor: the tuned one's, scaled by tuned / original time
        if rows and all((row["pct_of_floor"] or 0) * row["tuned_us"] / row["original_us"] < SLOW for row in rows):
            slow += [row["speedup"] for row in rows]
            pct += [row["pct_of_floor"] or 0.0 for row in rows]
    return {
        "never_slower": all(r["never_slower"] for r in results),
        "slow_kernels_sizes": len(slow),
        "geomean_slow": math.exp(sum(math.log(s) for s in slow) / len(slow)) if slow else None,
        "min_pct_of_floor_slow": min(pct, default=None),
        "slow_sizes_at_floor_bar": sum(p >= FLOOR_BAR for p in pct),  # of slow_kernels_sizes
    }


def markdown(results: list[dict[str, object]], summary: dict[str, object], device: str, date: str) -> str:
    """The results as one table per kernel and the bar's summary."""
    lines = [f"# Corpus kernels with canonical forms and variants on {device}, {date}", "", f"bar: {summary}"]
    for r in results:
        lines += ["", f"## {r['kind']}: {r['kernel']} ({r['file']})", ""]
        lines += [f"variants: {', '.join(v['name'] for v in r['variants']) or 'none'}", ""]  # type: ignore[attr-defined]
        lines += size_table(r["rows"])  # type: ignore[arg-type]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Check on the CPU, or tune every kernel of the table on the GPU and write the tables."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--check", action="store_true", help="compile only (no GPU)")
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--only", default="", help="comma-separated kernel names (default: all)")
    ap.add_argument("--merge", nargs="+", metavar="PATH", help="STEM then result JSONs: write STEM.json and STEM.md")
    args = ap.parse_args()
    if args.merge:
        merge(Path(args.merge[0]), [Path(p) for p in args.merge[1:]])
        return
    chosen = [e for e in TABLE if not args.only or e.kernel in args.only.split(",")]
    chosen += [e for e in HELD_OUT if e.kernel in args.only.split(",")]
    if args.check:
        failed = 0
        for entry in chosen:
            try:
                print(check(entry), flush=True)
            except Exception as e:  # each kernel's own verdict: one that fails must not hide the others'
                failed += 1
                print(f"{entry.kernel}: FAILED: {type(e).__name__}: {e}", flush=True)
        sys.exit(1 if failed else 0)
    if args.out is None:
        ap.error("OUT_DIR is needed to measure")
    args.out.mkdir(parents=True, exist_ok=True)
    log_selection(args.out / "corpus_variants.selection.log")
    results: list[dict[str, object]] = []
    for entry in chosen:
        try:
            result = measure(opened(entry), entry.path, args.trials, args.seconds, quick=QUICK)
        except Exception as e:  # one kernel's failure must not lose the others' numbers
            print(f"{entry.kernel}: failed: {type(e).__name__}: {e}", flush=True)
            continue
        results.append({"kind": entry.kind, "corpus": entry.corpus, **result})
        print(
            f"{entry.kernel}: geomean {result['geomean']:.2f}×, min % floor ≥64MB {result['min_pct_big']}", flush=True
        )
        write(args.out, results)  # after each kernel: a run cut short keeps what it measured


def merge(stem: Path, parts: list[Path]) -> None:
    """Runs of parts of the table (a device call is capped at minutes) written as one, the bar over all of them; a
    kernel measured in several parts (given oldest first) keeps its last measurement, and each says its part."""
    loaded = [json.loads(p.read_text()) for p in parts]
    devices = {d["device"] for d in loaded}
    if len(devices) != 1:
        raise SystemExit(f"the parts were measured on different devices: {sorted(devices)}")
    order = {e.kernel: i for i, e in enumerate((*TABLE, *HELD_OUT))}  # held-out kernels after the table's
    latest = {k["kernel"]: (k, part.name) for part, d in zip(parts, loaded, strict=True) for k in d["kernels"]}
    results = sorted((k for k, _ in latest.values()), key=lambda k: order[k["kernel"]])
    summary = bar(results)
    device, date = devices.pop(), max(d["date"] for d in loaded)
    source = {name: part for name, (_, part) in latest.items()}
    data = {"device": device, "date": date, "bar": summary, "parts": [p.name for p in parts], "from": source}
    Path(f"{stem}.json").write_text(json.dumps({**data, "kernels": results}, indent=1))
    measured_in = "\n".join(f"- {name}: {part}" for name, part in sorted(source.items(), key=lambda x: order[x[0]]))
    Path(f"{stem}.md").write_text(f"{markdown(results, summary, device, date)}\n## Measured in\n\n{measured_in}\n")
    print(f"bar: {summary}")


def write(out: Path, results: list[dict[str, object]]) -> None:
    """The JSON and Markdown files, named by device and date."""
    device = str(results[0]["device"])
    date = datetime.date.today().isoformat()
    summary = bar(results)
    stem = f"corpus_variants.{device.replace(' ', '-')}.{date}"
    data = {"device": device, "date": date, "bar": summary, "kernels": results}
    (out / f"{stem}.json").write_text(json.dumps(data, indent=1))
    (out / f"{stem}.md").write_text(markdown(results, summary, device, date))


if __name__ == "__main__":
    main()
