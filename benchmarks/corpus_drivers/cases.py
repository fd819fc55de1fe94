"""The corpus kernels the capture benchmark drives: which file and kernel, which driver library calls it, at
which sizes and how often (the smallest most often, as a serving step runs decode sizes)."""

from __future__ import annotations

from dataclasses import dataclass

CALLS = (12, 4, 1)
ELEMENTS = ((1 << 16,), (1 << 20,), (1 << 24,))


@dataclass(frozen=True)
class Case:
    """One corpus kernel reached through its project's host launcher."""

    name: str  # the driver's entry point
    corpus: str  # "llama.cpp" or "deepspeed"
    file: str  # the kernel's file under the corpus root (ggml/src/ggml-cuda for llama.cpp, csrc for DeepSpeed)
    kernel: str
    library: str  # the driver library (benchmarks/corpus_drivers/<corpus>/<library>.cu)
    sizes: tuple[tuple[int, ...], ...]
    calls: tuple[int, ...] = CALLS


def _llama(name: str, file: str, kernel: str, sizes: tuple[tuple[int, ...], ...] = ELEMENTS) -> Case:
    return Case(name, "llama.cpp", file, kernel, "drive_" + file.removesuffix(".cu").replace("-", "_"), sizes)


def _deepspeed(name: str, file: str, kernel: str, library: str, sizes: tuple[tuple[int, ...], ...]) -> Case:
    return Case(name, "deepspeed", file, kernel, library, sizes)


ROWS = ((1, 4096), (64, 4096), (2048, 4096))
BATCHES = ((1, 16384), (64, 16384), (1024, 16384))
CASES = (
    _llama("acc", "acc.cu", "acc_f32", ((64, 4096), (512, 4096), (4096, 4096))),
    _llama("arange", "arange.cu", "arange_f32", ((4096,), (1 << 16,), (1 << 22,))),
    _llama("clamp", "clamp.cu", "op_clamp_kernel"),
    _llama("concat", "concat.cu", "concat_f32_dim0", tuple((2048, 4096, rows, 1) for rows in (32, 512, 4096))),
    _llama("diagmask", "diagmask.cu", "diag_mask_inf_f32", ((128, 256), (1024, 2048), (4096, 4096))),
    _llama("opt_step_sgd", "opt-step-sgd.cu", "opt_step_sgd_f32"),
    _llama("opt_step_adamw", "opt-step-adamw.cu", "opt_step_adamw_f32"),
    _llama("pad", "pad.cu", "pad_f32", ((512, 512, 4, 8), (1024, 1024, 8, 8), (2048, 2048, 8, 16))),
    _llama("scale", "scale.cu", "scale_f32"),
    _llama("softcap", "softcap.cu", "softcap_f32"),
    _llama("tsembd", "tsembd.cu", "timestep_embedding_f32", ((8, 256), (64, 1024), (1024, 2048))),
    _llama("upscale", "upscale.cu", "upscale_f32", ((64, 64, 16), (256, 256, 16), (512, 512, 32))),
    _llama("leaky_relu", "unary.cu", "leaky_relu_kernel"),
    _llama("rope_neox", "rope.cu", "rope_neox", ((1, 32, 128), (64, 32, 128), (2048, 32, 128))),
    _deepspeed("bias_gelu", "transformer/inference/csrc/gelu.cu", "fused_bias_gelu", "drive_bias_gelu", BATCHES),
    _deepspeed("bias_relu", "transformer/inference/csrc/relu.cu", "fused_bias_relu", "drive_bias_relu", BATCHES),
    _deepspeed("rms_norm", "transformer/inference/csrc/rms_norm.cu", "rms_norm", "drive_rms_norm", ROWS),
    _deepspeed("layer_norm", "transformer/inference/csrc/layer_norm.cu", "fused_ln", "drive_layer_norm", ROWS),
    _deepspeed(
        "vector_add", "transformer/inference/csrc/pointwise_ops.cu", "vector_add_kernel", "drive_vector_add", ELEMENTS
    ),
    _deepspeed(
        "dequantize_int4",
        "quantization/quantize_intX.cu",
        "dequantize_int4_to_half",
        "drive_dequantize_int4",
        ((4096, 128), (32768, 128), (262144, 128)),
    ),
    _deepspeed(
        "opt_bias_add",
        "spatial/csrc/opt_bias_add.cu",
        "opt_bias_add",
        "drive_opt_bias_add",
        ((1, 256, 1280), (4, 1024, 1280), (8, 4096, 1280)),
    ),
)
