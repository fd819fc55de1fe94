"""Element types a tuning spec can name, with their sizes in bytes."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cutune.errors import SpecError

DTYPE_SIZES: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "bool": 1,
}

DTYPES: tuple[str, ...] = tuple(DTYPE_SIZES)
INTEGER_DTYPES = frozenset({"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64"})


# a struct passed by value, as the bytes a launch passed (`cutune capture`): `bytes8` for 8 bytes
_BYTES = re.compile(r"bytes([1-9][0-9]{0,3})")


def struct_bytes(dtype: str) -> int | None:
    """The size of a by-value struct dtype (`bytesN`), None for any other dtype."""
    m = _BYTES.fullmatch(dtype)
    return int(m.group(1)) if m else None


def dtype_size(dtype: str) -> int:
    """The size in bytes of one element of `dtype` (one of DTYPES, or `bytesN`)."""
    try:
        return DTYPE_SIZES[dtype]
    except KeyError:
        if (size := struct_bytes(dtype)) is not None:
            return size
        raise SpecError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}, bytesN (a struct by value)") from None


# C/C++ element types as kernels spell them → dtype (used to draft specs and to suggest fixes)
C_TYPES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "__half": "float16",
    "c10::Half": "float16",
    "at::Half": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
    "c10::BFloat16": "bfloat16",
    "at::BFloat16": "bfloat16",
    "int": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "uint": "uint32",
    "uint32_t": "uint32",
    "long long": "int64",
    "int64_t": "int64",
    "size_t": "int64",
    "signed char": "int8",
    "int8_t": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "short": "int16",
    "short int": "int16",
    "int16_t": "int16",
    "unsigned short": "uint16",
    "unsigned short int": "uint16",
    "uint16_t": "uint16",
    "bool": "bool",
}

_QUALIFIERS = frozenset({"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "signed"})
_C_TOKEN = re.compile(r"[A-Za-z_][\w:]*|\*|&")


@dataclass(frozen=True, slots=True)
class CType:
    """A parameter's declared type, reduced to what a spec needs."""

    base: str  # the element type without qualifiers, e.g. "T", "unsigned int", "__nv_bfloat16"
    pointer: bool
    const: bool  # the pointee (for pointers) or the value is const


def parse_c_type(text: str) -> CType:
    """Split a declared type such as `const T* __restrict__` into base type, pointer and constness."""
    tokens = _C_TOKEN.findall(text)
    pointer = "*" in tokens
    head = tokens[: tokens.index("*")] if pointer else tokens
    base = " ".join(t for t in head if t not in _QUALIFIERS and t != "&")
    return CType(base=base, pointer=pointer, const="const" in head)
