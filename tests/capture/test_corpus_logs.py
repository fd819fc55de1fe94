"""Specs from recorded launches of production kernels no one here wrote (llama.cpp's ggml-cuda, DeepSpeed), laid
out as their host launchers make them: nothing left TODO, the include folders their builds pass found, and the
original compiling with `check` from the spec as the capture wrote it (real tree-sitter, nvcc/NVRTC)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cutune.capture.log import read_log
from cutune.capture.run import specs_from_log
from cutune.check import check_kernel
from cutune.gpu.nvcc import have_nvcc
from cutune.project import open_kernel
from tests.capture.logs import f32, i32, launch, ptr, write_log
from tests.corpus.sources import corpora

FOUND = corpora()
SCALE = "_ZL9scale_f32PKfPfffi"  # static __global__ void scale_f32(const float*, float*, float, float, int)
GELU = "_Z15fused_bias_geluI6__halfEvPT_PKS1_ii"  # template <typename T> fused_bias_gelu(T*, const T*, int, int)


def _tree(corpus: str, tmp_path: Path, keep: str) -> Path:
    """A copy of a corpus tree (the capture writes specs beside the sources) without the folders `keep` skips."""
    root = FOUND[corpus].root
    shutil.copytree(root, tmp_path / root.name, ignore=shutil.ignore_patterns(keep, "*.tune.toml"))
    return tmp_path / root.name


@pytest.mark.skipif("llama.cpp" not in FOUND, reason="llama.cpp's sdist is not unpacked (scripts/corpus.sh)")
def test_llama_cpp_scale_as_its_launcher_launches_it_gets_a_spec_with_nothing_todo(tmp_path: Path) -> None:
    ggml = _tree("llama.cpp", tmp_path, "template-instances")
    kernels = ggml / "src" / "ggml-cuda"
    # scale_f32_cuda: num_blocks = (k + 255) / 256, block 256; a decode size most often
    lines = [
        launch(SCALE, (-(-k // 256),), (256,), [ptr(0x1000, 4 * k), ptr(0x2000, 4 * k), f32(2.0), f32(0.5), i32(k)], n)
        for k, n in ((1 << 16, 12), (1 << 20, 4), (1 << 24, 1))
    ]
    outcome = specs_from_log(read_log(write_log(tmp_path / "l.jsonl", lines)), kernels, kernels=["scale_f32"])
    [result] = outcome.kernels
    assert not outcome.errors and result.path == kernels / "scale.cu"
    text = (kernels / "scale.tune.toml").read_text(encoding="utf-8")
    assert "TODO" not in text
    assert 'include_dirs = ["../../include", ".."]' in text or 'include_dirs = ["..", "../../include"]' in text
    assert [dict(s) for s in result.spec.sizes] == [{"k": 1 << 16}, {"k": 1 << 20}, {"k": 1 << 24}]
    assert result.spec.weights == (12.0, 4.0, 1.0)
    if have_nvcc():  # the original compiles from the captured spec alone, as tune's compile path does
        report = check_kernel(open_kernel(kernels / "scale.cu", "scale_f32"), limit=1)
        assert report.rows[0].problem is None, report.rows[0].problem


@pytest.mark.skipif("deepspeed" not in FOUND, reason="DeepSpeed's sdist is not unpacked (scripts/corpus.sh)")
def test_deepspeed_bias_gelu_matches_the_inference_copy_and_takes_its_template_argument(tmp_path: Path) -> None:
    csrc = _tree("deepspeed", tmp_path, "xpu")
    # launch_bias_gelu<__half>: 1024 threads, 8 halves each per block; the training copy in transformer/ has
    # the same kernel name with five parameters
    lines = []
    for batch, calls in ((1, 12), (64, 4), (1024, 1)):
        total = batch * 16384
        args = [ptr(0x1000, 2 * total), ptr(0x2000, 2 * 16384), i32(total), i32(16384)]
        lines.append(launch(GELU, (-(-total // 8192),), (1024,), args, calls))
    outcome = specs_from_log(read_log(write_log(tmp_path / "l.jsonl", lines)), csrc, kernels=["fused_bias_gelu"])
    [result] = outcome.kernels
    assert result.path == csrc / "transformer" / "inference" / "csrc" / "gelu.cu"
    assert result.spec.template_args == {"T": "__half"}
    text = (result.path.with_suffix(".tune.toml")).read_text(encoding="utf-8")
    assert "TODO" not in text and "../../../includes" in text and "../includes" in text
    # the launch's own grid, `sizeof(T)` read as the captured __half's 2 bytes: the block size stays searchable
    assert result.spec.grid == ("(total_count + ((BLOCK_THREADS) * (16 / 2)) - 1) / ((BLOCK_THREADS) * (16 / 2))",)


RECORDED = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "capture_logs"


@pytest.mark.skipif(len(FOUND) < 2, reason="the llama.cpp and DeepSpeed sdists are not unpacked (scripts/corpus.sh)")
@pytest.mark.parametrize(
    ("corpus", "log", "sub"),
    [
        ("llama.cpp", "llama.cpp.NVIDIA-H100-80GB-HBM3.2026-11-25.launches.jsonl", "src/ggml-cuda"),
        ("deepspeed", "deepspeed.NVIDIA-H100-80GB-HBM3.2026-11-25.launches.jsonl", ""),
    ],
)
def test_the_launches_recorded_on_an_h100_give_every_kernel_a_spec_with_nothing_todo(
    corpus: str, log: str, sub: str, tmp_path: Path
) -> None:
    """Replays what `benchmarks/corpus_capture.py` recorded (14 llama.cpp kernels, 7 DeepSpeed ones, each called
    through its own host launcher): the snapshots it kept stayed on the GPU machine, so inputs are the spec's."""
    header, *launches = (RECORDED / log).read_text(encoding="utf-8").splitlines()
    recorded = tmp_path / "launches.jsonl"
    recorded.write_text("\n".join([header.replace('"data_dir": "', '"data_dir_on_gpu": "'), *launches]) + "\n")
    root = _tree(corpus, tmp_path, "template-instances")
    outcome = specs_from_log(read_log(recorded), root / sub if sub else root)
    assert outcome.errors == ()
    assert not [r.kernel for r in outcome.kernels if any("still TODO" in n for n in r.notes)]
    if corpus == "llama.cpp":  # rope_neox takes `const rope_corr_dims corr_dims`: the bytes its launches passed
        [rope] = [r.spec for r in outcome.kernels if r.kernel == "rope_neox"]
        corr = next(a for a in rope.args if a.name == "corr_dims")
        assert (corr.dtype, corr.value) == ("bytes8", "0x0000000000000000")
    assert len(outcome.kernels) == (14 if corpus == "llama.cpp" else 7)
    for r in outcome.kernels:
        assert len(r.spec.sizes) == 3 and sum(r.spec.weights) == 17, r.kernel  # 12, 4 and 1 launches
        # a length only the allocation bounds is marked so, and what the kernel writes there compares as inout
        assert all(a.role.value == "inout" for a in r.spec.args if a.bound and a.name in ("dst", "output")), r.kernel
