"""How far a softmax backward's output moves when only the order of its row's dot product changes (CPU, float32).

llama.cpp's `soft_max_back_f32` computes `dst = scale * (grad - dot) * dstf` with `dot` the row's sum of
`dstf * grad`, summed by one warp: lane l adds elements l, l + 32, ... in turn, then an xor butterfly. Its vectorized
and row_reduce variants sum the same products in another order (packs of 4 consecutive elements a lane; 256 threads
then a block all-reduce). This emulates the three orders in numpy's float32 arithmetic on the spec's data and counts
the elements whose difference from the original's order exceeds the checks' float32 tolerance (rtol 1e-5, atol
1e-6). With the forward output drawn as the spec first drew it (standard normal), `dot` is about 50 and `grad - dot`
cancels; drawn as probabilities (uniform in [0, 0.0005), as a softmax's output of 4096 columns is), it does not.

    python benchmarks/summation_order.py [--rows 64]
"""

from __future__ import annotations

import argparse

import numpy as np

N = 4096
F32 = np.float32
LANES = np.arange(32)


def butterfly(values: np.ndarray) -> np.ndarray:
    """Every lane's total after the xor butterfly over 32 lanes (offsets 16 ... 1)."""
    v = values.astype(F32)
    for o in (16, 8, 4, 2, 1):
        v = (v + v[LANES ^ o]).astype(F32)
    return v


def original(products: np.ndarray) -> np.float32:
    """Lane l adds elements l, l + 32, ... in turn; then the butterfly."""
    acc = np.zeros(32, F32)
    for c in range(0, N, 32):
        acc = (acc + products[c : c + 32]).astype(F32)
    return F32(butterfly(acc)[0])


def packed(products: np.ndarray, threads: int, width: int) -> np.float32:
    """Thread t adds the `width` elements of packs t, t + threads, ... in turn; a butterfly in each warp, then the
    warps' totals in order (the variants' all-reduce)."""
    acc = np.zeros(threads, F32)
    for base in range(0, N, threads * width):
        for j in range(width):
            acc = (acc + products[base + np.arange(threads) * width + j]).astype(F32)
    warps = [F32(butterfly(acc[w : w + 32])[0]) for w in range(0, threads, 32)]
    total = warps[0]
    for w in warps[1:]:
        total = F32(total + w)
    return total


def main() -> None:
    """Print, for each data and order, the elements beyond the tolerance and the largest scaled error."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=64)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    draws = {
        "standard normal": lambda: rng.standard_normal(N).astype(F32),
        "probabilities in [0, 0.0005)": lambda: (rng.random(N) * 0.0005).astype(F32),
    }
    orders = {"vectorized (32 lanes, packs of 4)": (32, 4), "row_reduce (256 threads, packs of 4)": (256, 4)}
    print(f"soft_max_back_f32 rows of {N}, {args.rows} rows; tolerance rtol 1e-5, atol 1e-6 (float32)")
    for label, draw in draws.items():
        counts = {name: [0, 0.0] for name in orders}
        for _ in range(args.rows):
            grad, dstf = rng.standard_normal(N).astype(F32), draw()
            products = (dstf * grad).astype(F32)
            want = ((grad - original(products)) * dstf).astype(F32)
            for name, (threads, width) in orders.items():
                got = ((grad - packed(products, threads, width)) * dstf).astype(F32)
                scaled = np.abs(got - want) / (F32(1e-6) + F32(1e-5) * np.abs(want))
                counts[name][0] += int((scaled > 1).sum())
                counts[name][1] = max(counts[name][1], float(scaled.max()))
        for name, (beyond, worst) in counts.items():
            share = 100 * beyond / (N * args.rows)
            print(f"forward output {label}: {name}: {beyond} elements beyond ({share:.2f}%), worst {worst:.3g}")


if __name__ == "__main__":
    main()
