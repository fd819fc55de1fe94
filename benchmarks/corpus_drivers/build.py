"""Building the corpus drivers: each driver file includes one corpus file and calls its host launcher; nvcc builds
it into a shared library with the corpus's include folders, exporting only the driver's entry point (so the
project's other host functions, which reach the rest of their library, are dropped at link time)."""

from __future__ import annotations

import glob
import importlib.util
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
FLAGS = ["-O3", "-std=c++17", "-arch=sm_90", "-shared", "-cudart", "shared", "-Xlinker", "--gc-sections",
         "-Xcompiler", "-fPIC,-fvisibility=hidden,-ffunction-sections,-fdata-sections"]  # fmt: skip


def cublas_include() -> list[str]:
    """The folder of `cublas_v2.h` (ggml's CUDA header includes it): the toolkit's, else a pip wheel's."""
    nvcc = shutil.which("nvcc")
    toolkit = Path(nvcc).resolve().parents[1] / "include" if nvcc else None
    if toolkit is not None and (toolkit / "cublas_v2.h").exists():
        return []
    spec = importlib.util.find_spec("nvidia")  # the nvidia-cublas wheel PyTorch depends on
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    found = sorted(h for f in folders for h in glob.glob(f"{f}/*/include/cublas_v2.h"))
    return [f"-I{Path(found[0]).parent}"] if found else []


def includes(corpus: str, root: Path) -> list[str]:
    """The include folders a corpus's own build passes (root: ggml/ for llama.cpp, csrc/ for DeepSpeed)."""
    if corpus == "llama.cpp":
        folders = [root / "include", root / "src", root / "src" / "ggml-cuda"]
        return [f"-I{f}" for f in folders] + cublas_include()
    folders = [root, root / "includes", root / "transformer" / "inference" / "includes", root / "spatial" / "includes"]
    return [f"-I{f}" for f in folders]


def build(libraries: dict[str, tuple[str, Path]], out: Path) -> dict[str, str]:
    """Build each library (name → (corpus, corpus root)) into `out` in parallel; name → nvcc's error, for failures."""
    out.mkdir(parents=True, exist_ok=True)

    def one(name: str) -> tuple[str, str | None]:
        corpus, root = libraries[name]
        folder = HERE / ("llama_cpp" if corpus == "llama.cpp" else "deepspeed")
        sources = [folder / f"{name}.cu"] + ([folder / "ggml_stubs.cu"] if corpus == "llama.cpp" else [])
        cmd = ["nvcc", *FLAGS, *includes(corpus, root), "-o", str(out / f"{name}.so"), *map(str, sources)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        return name, None if done.returncode == 0 else (done.stderr or done.stdout)[-2000:]

    with ThreadPoolExecutor(max_workers=8) as pool:
        return {name: error for name, error in pool.map(one, sorted(libraries)) if error is not None}
