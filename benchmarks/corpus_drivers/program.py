"""Production kernels called the way their projects call them: each case calls the project's own host launcher
(llama.cpp's `*_cuda` helpers, DeepSpeed's `launch_*` templates), built by `build.py` into one shared library per
corpus file, on torch tensors at three sizes, the smaller sizes more often (as a serving step runs them). What
`cutune capture` records in benchmarks/corpus_capture.py.

Usage: program.py LIBDIR [CASE...] (every case when none is named).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES

F32, F16 = torch.float32, torch.float16
Call = Callable[[ctypes.CDLL, tuple[int, ...]], int]


def _p(t: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


def _rand(*shape: int, dtype: torch.dtype = F32) -> torch.Tensor:
    return torch.randn(*shape, device="cuda").to(dtype)


def _acc(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    rows, cols = size
    x, y, dst = _rand(rows, cols), _rand(rows, cols // 2), torch.empty(rows, cols, device="cuda")
    n, c = ctypes.c_long, ctypes.c_long
    return lib.acc(_p(x), _p(y), _p(dst), n(rows * cols), c(cols // 2), c(rows), c(1), c(1),
                   c(cols), c(rows * cols), c(rows * cols), c(0))  # fmt: skip


def _arange(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    (n,) = size
    dst = torch.empty(n, device="cuda")
    return lib.arange(_p(dst), n, ctypes.c_float(0.0), ctypes.c_float(0.5))


def _unary(entry: str, *extra: ctypes.c_float, scalars_first: bool = True) -> Call:
    """An elementwise op over k floats: `entry(x, dst, extra..., k)` or `entry(x, dst, k, extra...)`."""

    def call(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
        (k,) = size
        x, dst = _rand(k), torch.empty(k, device="cuda")
        args = (*extra, k) if scalars_first else (k, *extra)
        return int(getattr(lib, entry)(_p(x), _p(dst), *args))

    return call


def _concat(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    ne00, ne0, ne1, ne2 = size
    x, y = _rand(ne2, ne1, ne00), _rand(ne2, ne1, ne0 - ne00)
    dst = torch.empty(ne2, ne1, ne0, device="cuda")
    return lib.concat(_p(x), _p(y), _p(dst), ne00, ne1, ne2, ne0, ne1, ne2, 0)


def _diagmask(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    rows, cols = size
    x, dst = _rand(rows, cols), torch.empty(rows, cols, device="cuda")
    return lib.diagmask(_p(x), _p(dst), cols, rows, rows, cols - rows)


def _sgd(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    (k,) = size
    x, g, pars = _rand(k), _rand(k), torch.tensor([1e-3, 1e-4], device="cuda")
    return lib.opt_step_sgd(_p(x), _p(g), _p(pars), ctypes.c_long(k))


def _adamw(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    (k,) = size
    x, g, m, v = _rand(k), _rand(k), torch.zeros(k, device="cuda"), torch.zeros(k, device="cuda")
    pars = torch.tensor([1e-3, 0.9, 0.999, 1e-8, 1e-2, 1.0 / (1 - 0.9), 1.0 / (1 - 0.999)], device="cuda")
    return lib.opt_step_adamw(_p(x), _p(g), _p(m), _p(v), _p(pars), ctypes.c_long(k))


def _pad(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    ne00, ne01, ne02, extra = size
    x = _rand(ne02, ne01, ne00)
    dst = torch.empty(ne02, ne01 + extra, ne00 + extra, device="cuda")
    return lib.pad(_p(x), _p(dst), ne00, ne01, ne02, 1, ne00 + extra, ne01 + extra, ne02, 1)


def _tsembd(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    steps, dim = size
    x, dst = torch.rand(steps, device="cuda") * 1000, torch.empty(steps, dim, device="cuda")
    return lib.tsembd(_p(x), _p(dst), steps, dim * 4, dim, 10000)


def _upscale(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    ne00, ne01, ne02 = size
    x, dst = _rand(ne02, ne01, ne00), torch.empty(ne02, 2 * ne01, 2 * ne00, device="cuda")
    f = ctypes.c_float
    return lib.upscale(_p(x), _p(dst), 4, 4 * ne00, 4 * ne00 * ne01, 4 * ne00 * ne01 * ne02,
                       2 * ne00, 2 * ne01, ne02, 1, f(2.0), f(2.0), f(1.0), f(1.0))  # fmt: skip


def _rope(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    tokens, heads, head_dim = size
    x, dst = _rand(tokens, heads, head_dim), torch.empty(tokens, heads, head_dim, device="cuda")
    pos = torch.arange(tokens, dtype=torch.int32, device="cuda")
    return lib.rope_neox(_p(x), _p(dst), head_dim, heads, head_dim, heads * head_dim, head_dim, tokens * heads,
                         _p(pos), ctypes.c_float(10000.0))  # fmt: skip


def _bias_act(entry: str) -> Call:
    """DeepSpeed's in-place bias + activation over a batch of rows."""

    def call(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
        batch, width = size
        x, bias = _rand(batch, width, dtype=F16), _rand(width, dtype=F16)
        return int(getattr(lib, entry)(_p(x), _p(bias), width, batch))

    return call


def _rms_norm(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    rows, cols = size
    x, gamma = _rand(rows, cols, dtype=F16), _rand(cols, dtype=F16)
    out = torch.empty(rows, cols, dtype=F16, device="cuda")
    return lib.rms_norm(_p(out), _p(x), _p(gamma), ctypes.c_float(1e-6), rows, cols)


def _layer_norm(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    rows, cols = size
    x, out = _rand(rows, cols, dtype=F16), torch.empty(rows, cols, dtype=F16, device="cuda")
    gamma, beta = _rand(cols, dtype=F16), _rand(cols, dtype=F16)
    return lib.layer_norm(_p(out), _p(x), _p(gamma), _p(beta), ctypes.c_float(1e-5), rows, cols)


def _vector_add(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    (n,) = size
    a, b, out = _rand(n, dtype=F16), _rand(n, dtype=F16), torch.empty(n, dtype=F16, device="cuda")
    return lib.vector_add(_p(out), _p(a), _p(b), ctypes.c_float(0.5), n)


def _dequantize_int4(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    groups, group_size = size
    data = torch.randint(0, 256, (groups * group_size // 2,), dtype=torch.uint8, device="cuda")
    out = torch.empty(groups * group_size, dtype=F16, device="cuda")
    scale, low = torch.rand(groups, device="cuda").half() + 0.5, _rand(groups, dtype=F16)
    return lib.dequantize_int4(_p(data), _p(out), _p(scale), _p(low), groups, group_size)


def _opt_bias_add(lib: ctypes.CDLL, size: tuple[int, ...]) -> int:
    batch, seq, channels = size
    act, bias = _rand(batch, seq, channels, dtype=F16), _rand(channels, dtype=F16)
    out = torch.empty_like(act)
    return lib.opt_bias_add(_p(out), _p(act), _p(bias), batch, seq, channels)


f = ctypes.c_float
CALLS: dict[str, Call] = {
    "acc": _acc,
    "arange": _arange,
    "clamp": _unary("clamp", f(-1.0), f(1.0)),
    "concat": _concat,
    "diagmask": _diagmask,
    "opt_step_sgd": _sgd,
    "opt_step_adamw": _adamw,
    "pad": _pad,
    "scale": _unary("scale", f(2.0), f(0.5)),
    "softcap": _unary("softcap", f(0.5), f(30.0)),
    "tsembd": _tsembd,
    "upscale": _upscale,
    "leaky_relu": _unary("leaky_relu", f(0.01), scalars_first=False),
    "rope_neox": _rope,
    "bias_gelu": _bias_act("bias_gelu"),
    "bias_relu": _bias_act("bias_relu"),
    "rms_norm": _rms_norm,
    "layer_norm": _layer_norm,
    "vector_add": _vector_add,
    "dequantize_int4": _dequantize_int4,
    "opt_bias_add": _opt_bias_add,
}


def main(libdir: Path, names: list[str]) -> None:
    for case in CASES:
        if names and case.name not in names:
            continue
        lib = ctypes.CDLL(str(libdir / f"{case.library}.so"))
        for size, calls in zip(case.sizes, case.calls, strict=True):
            for _ in range(calls):
                status = CALLS[case.name](lib, size)
                if status != 0:
                    raise SystemExit(f"{case.name} at {size}: CUDA error {status}")
        torch.cuda.synchronize()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
