"""Where the production corpora lie: flashinfer's headers (its wheel, pip-installed --no-deps), DeepSpeed's
`csrc/` and llama.cpp's `ggml-cuda/` (their sdists, unpacked by scripts/corpus.sh). Nothing of them is
copied into this repository; tests and benchmarks read the files where the scripts put them."""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEEPSPEED = "deepspeed-0.18.2"
LLAMA = "llama_cpp_python-0.3.16"
VLLM = "vllm-0.33.0"
# the second held-out set (2026-11-28, measured first on 7f0a80c's rules): CUDA extensions of three more projects
# (include folders: the root and every folder of kernel files); the third (2026-11-29, measured first on this day's
# rules): mmcv's CUDA ops, computer vision and HPC rather than serving, with the include folders of its setup.py; the
# fourth (2026-11-29, measured first on 2f6b2d0's rules): GPTQModel, gsplat, torch-scatter and AutoGPTQ
HELD_OUT: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "exllamav2": ("exllamav2-0.0.3/exllamav2/exllamav2_ext/cuda", None),
    "mamba": ("mamba_ssm-2.3.2.post1/csrc", None),
    "causal_conv1d": ("causal_conv1d-1.7.0/csrc", None),
    "mmcv": ("mmcv-2.2.0/mmcv/ops/csrc", ("common", "common/cuda")),
    # set 4 (2026-11-29): quantised GEMM/GEMV (two GPTQ code bases), Gaussian splatting, segment reductions
    "gptqmodel": ("gptqmodel-7.7.0/gptqmodel_ext", None),
    "gsplat": ("gsplat-1.5.3/gsplat/cuda", None),
    "torch_scatter": ("torch_scatter-2.1.2/csrc", None),
    "auto_gptq": ("auto_gptq-0.7.1/autogptq_extension", None),
    # set 5 (2026-11-29, measured once, on the code of this day, before any rule was read against it): training and
    # serving numerics (Transformer Engine's headers), two more quantisation code bases, radiance fields, graph kernels
    "transformer_engine": ("transformer_engine_torch-2.9.0/common_headers", None),
    "hqq": ("hqq-0.2.8.post1/hqq/kernels", None),
    "quanto": ("optimum_quanto-0.2.7/optimum/quanto/library/extensions/cuda", None),
    "nerfacc": ("nerfacc-0.5.3/nerfacc/cuda/csrc", None),
    "torch_cluster": ("torch_cluster-1.6.3/csrc", None),
    "torch_sparse": ("torch_sparse-0.6.9/csrc", None),
    # set 6 (2026-11-29, measured once, at the end of that day's rules): scientific and 3-D deep learning
    "torch_harmonics": ("torch_harmonics-0.8.1/torch_harmonics", None),
    "minkowski": ("MinkowskiEngine-0.5.4/src", None),
    "torch_points_kernels": ("torch-points-kernels-0.7.0/cuda", None),
    # set 7 (2026-11-29, measured once, on the session's final code): FlashAttention 2.8's own CUDA sources
    "flash_attn_ln": ("flash_attn-2.8.3.post2/csrc/layer_norm", None),
    "flash_attn": ("flash_attn-2.8.3.post2/csrc/flash_attn", None),
    "flash_attn_dense": ("flash_attn-2.8.3.post2/csrc/fused_dense_lib", None),
    # set 8 (2026-11-29, measured once, on the code the session started from, before any rule was read against it):
    # LightSeq's transformer training and inference kernels, ColossalAI's serving and optimiser kernels (its setup.py's
    # include folders), torch-spline-conv
    "lightseq_train": ("lightseq-3.0.1/lightseq/csrc/kernels", (".", "includes")),
    "lightseq_infer": ("lightseq-3.0.1/lightseq/inference/kernels", None),
    "colossalai": ("colossalai-0.5.0/extensions/csrc", (".",)),
    "torch_spline_conv": ("torch_spline_conv-1.2.2/csrc", None),
}
_AMD = re.compile(r"rocm|hip|rdna|cdna|mfma|wmma", re.IGNORECASE)  # file names of sources for AMD GPUs only


@dataclass(frozen=True)
class Corpus:
    """One code base: its name, the `.cu`/`.cuh` files that define kernels, and the include folders its build uses."""

    name: str
    root: Path
    files: tuple[Path, ...]
    include_dirs: tuple[Path, ...]


def corpus_dir() -> Path:
    """The folder scripts/corpus.sh unpacks into (`$CUTUNE_CORPUS`, else `.corpus/` at the repository root)."""
    return Path(os.environ.get("CUTUNE_CORPUS", REPO / ".corpus"))


def flashinfer_root() -> Path | None:
    """flashinfer's `data/include` folder, or None when flashinfer-python is not installed."""
    spec = importlib.util.find_spec("flashinfer")
    for location in (spec.submodule_search_locations or []) if spec else []:
        root = Path(location) / "data" / "include"
        if (root / "flashinfer").is_dir():
            return root
    return None


def corpora() -> dict[str, Corpus]:
    """Every corpus that is present here, by name."""
    found: dict[str, Corpus] = {}
    fi = flashinfer_root()
    if fi is not None:
        found["flashinfer"] = Corpus("flashinfer", fi, _kernel_files(fi / "flashinfer", ".cuh"), (fi,))
    ds = corpus_dir() / DEEPSPEED / "csrc"
    if ds.is_dir():  # each op's build adds its own `includes/` folder (DeepSpeed's op builders)
        includes = (
            ds / "includes",
            *sorted(p for p in ds.glob("*/**/includes") if p.is_dir() and "xpu" not in p.parts),
        )
        found["deepspeed"] = Corpus("deepspeed", ds, _kernel_files(ds, ".cu"), includes)
    gg = corpus_dir() / LLAMA / "vendor" / "llama.cpp" / "ggml"
    if (gg / "src" / "ggml-cuda").is_dir():
        found["llama.cpp"] = Corpus(
            "llama.cpp", gg, _kernel_files(gg / "src" / "ggml-cuda", ".cu"), (gg / "include", gg / "src")
        )
    return found


def held_out() -> dict[str, Corpus]:
    """The corpora kept out of the corpus tests, present here (scripts/held_out.sh), which only benchmarks read, by
    name: vLLM's `csrc/`, unseen until its first measurement (2026-11-28, on the code of 9b7c233:
    `benchmarks/results/transform_report.vllm-held-out.*`; rules written since may have been read against it), and
    exllamav2's, mamba-ssm's and causal-conv1d's CUDA sources (first measured on 2026-11-28), mmcv's CUDA ops
    (first measured on 2026-11-29), GPTQModel's, gsplat's, torch-scatter's and AutoGPTQ's (the same day), and sets 5
    and 6 (HELD_OUT's comments say when each was first measured)."""
    found: dict[str, Corpus] = {}
    vl = corpus_dir() / VLLM / "csrc"
    if vl.is_dir():  # vLLM's CMake build puts csrc/ on the include path; the AMD-only sources are left out
        files = tuple(p for p in _kernel_files(vl, ".cu") if "rocm" not in p.parts and not _AMD.search(p.stem))
        found["vllm"] = Corpus("vllm", vl, files, (vl,))
    for name, (folder, includes) in HELD_OUT.items():
        root = corpus_dir() / folder
        if root.is_dir():  # kernels in headers too (mamba's selective scan: `.cu` files only instantiate them)
            files = tuple(sorted({*_kernel_files(root, ".cu"), *_kernel_files(root, ".cuh")}))
            dirs = (
                tuple(root / i for i in includes)
                if includes is not None
                else (root, *sorted({p.parent for p in files} - {root}))
            )
            found[name] = Corpus(name, root, files, dirs)
    return found


def _kernel_files(folder: Path, suffix: str) -> tuple[Path, ...]:
    """The files under `folder` with `suffix` that define a `__global__` function, in path order."""
    return tuple(
        p for p in sorted(folder.rglob(f"*{suffix}")) if "__global__" in p.read_text(encoding="utf-8", errors="replace")
    )
