"""cutune: make existing CUDA kernels faster — templatize, autotune on a real GPU, apply."""

from cutune.errors import CutuneError

__all__ = ["CutuneError"]
__version__ = "0.1.0"
