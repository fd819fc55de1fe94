"""NVRTC for tests: the production driver (cutune.gpu.nvrtc), with the test suite's old call shape."""

from __future__ import annotations

from cutune.errors import CompileError
from cutune.gpu.nvrtc import compile_program, find_libnvrtc

__all__ = ["compile_ptx", "find_libnvrtc"]


def compile_ptx(source: str, options: list[str], name_expressions: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """Compile with NVRTC: (PTX, name expression → lowered name); raises RuntimeError with the log."""
    try:
        out = compile_program(source, options, name_expressions)
    except CompileError as e:
        raise RuntimeError(str(e)) from None
    return out.binary.rstrip(b"\0").decode(errors="replace"), out.lowered
