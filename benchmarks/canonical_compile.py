"""Do the canonical rewrites of production kernels compile? Every kernel of DeepSpeed's csrc/ and llama.cpp's
ggml-cuda/ that a canonical step rewrites, compiled with nvcc in its canonical form (instantiated as the corpus
tests instantiate it); where that fails, the original is compiled the same way, so a failure the rewrite caused
(the original compiles, the rewrite does not) stands apart from one of the instantiation or the headers.
With `--transform NAME`, every kernel that transform applies to is compiled with the variant's body in place of
its own (its helpers before the kernel, as combine places them), the variant's parameters at their defaults (`-D`;
`--define` sets one to another value: `THREAD_PACKS=1` compiles the packed path), and its canonical form is the
original to compare.

    python benchmarks/canonical_compile.py [--transform flat_rows [--define NAME=VALUE ...]] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.corpus.corpus import instantiation  # noqa: E402
from tests.corpus.sources import corpora  # noqa: E402

from cutune.cuda.extract import extract_kernel  # noqa: E402
from cutune.cuda.model import SourceModel  # noqa: E402
from cutune.cuda.parse import parse_source  # noqa: E402
from cutune.errors import CutuneError  # noqa: E402
from cutune.gpu.compile import compile_resources  # noqa: E402
from cutune.template.variants import TRANSFORMS  # noqa: E402
from cutune.template.variants.canonical import canonicalise  # noqa: E402

STUBS = ROOT / "benchmarks" / "corpus_specs" / "stubs"  # cuBLAS's header, where the toolkit lacks it
EXTRA = {"deepspeed": ("transformer/inference/includes",)}


def compiles(model: SourceModel, kernel: str, include_dirs: list[str], defines: dict[str, str] | None = None) -> str:
    """'' when the kernel (instantiated) compiles, else the first line of why not."""
    try:
        name, _ = instantiation(model.kernel(kernel), model)
        unit = extract_kernel(model, kernel, instantiations=[name])
        flags = ["--expt-relaxed-constexpr", "-std=c++17"]
        compile_resources(
            unit.source,
            include_dirs=[*unit.include_dirs, *include_dirs],
            kernel=unit.kernel,
            flags=flags,
            defines=defines,
        )
    except CutuneError as e:
        return str(e).splitlines()[0]
    return ""


def transformed(model: SourceModel, kernel: str, transform: str) -> tuple[SourceModel, dict[str, str]] | None:
    """The kernel with `transform`'s variant as its body and the variant's parameters at their defaults; None where
    the transform refuses it."""
    try:
        variant = TRANSFORMS[transform].apply(model, kernel, None)
    except CutuneError:
        return None
    k = model.kernel(kernel)
    text = model.text.encode("utf-8")
    helpers = variant.helpers.strip() + "\n\n" if variant.helpers.strip() else ""  # placed as combine places them
    source = (
        text[: k.span.start_byte].decode()
        + helpers
        + text[k.span.start_byte : k.body_span.start_byte + 1].decode()
        + variant.body
        + text[k.body_span.end_byte - 1 :].decode()
    )
    return parse_source(source, model.path), {p.name: str(p.default).lower() for p in variant.params}


def main() -> None:
    """Compile every rewritten kernel; print one line per failure and the counts."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--transform", choices=sorted(TRANSFORMS), help="compile this transform's variants instead")
    ap.add_argument(
        "--define", action="append", default=[], metavar="NAME=VALUE", help="a variant's parameter at this value"
    )
    args = ap.parse_args()
    overrides = dict(d.split("=", 1) for d in args.define)
    lines: list[str] = []
    counts = {"compiles": 0, "fails, original too": 0, "fails, original compiles": 0}
    for name, corpus in corpora().items():
        if name not in ("deepspeed", "llama.cpp"):
            continue
        dirs = [*map(str, corpus.include_dirs), *(str(corpus.root / d) for d in EXTRA.get(name, ())), str(STUBS)]
        for path in corpus.files:
            model = parse_source(path.read_text(encoding="utf-8", errors="replace"), str(path))
            for kernel in dict.fromkeys(k.name for k in model.kernels if not k.has_errors):
                canonical = canonicalise(model, kernel, list(map(str, corpus.include_dirs)))
                rewritten, defines, before, what = canonical.model, None, model, str(canonical.applied)
                if args.transform is not None:
                    found = transformed(canonical.model, kernel, args.transform)
                    if found is None:
                        continue
                    (rewritten, defines), before, what = found, canonical.model, args.transform
                    defines = {**defines, **{k: v for k, v in overrides.items() if k in defines}}
                elif not canonical.applied:
                    continue
                why = compiles(rewritten, kernel, dirs, defines)
                if not why:
                    counts["compiles"] += 1
                    lines.append(f"compiles: {name} {path.name} {kernel} {what}")
                    continue
                original = compiles(before, kernel, dirs)
                key = "fails, original too" if original else "fails, original compiles"
                counts[key] += 1
                lines.append(f"{key}: {name} {path.name} {kernel} {what}: {why[:200]}")
                print(lines[-1], flush=True)
    lines.append(", ".join(f"{k}: {v}" for k, v in counts.items()))
    print(lines[-1])
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
