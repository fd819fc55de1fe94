"""Element types a tuning spec can name, with their sizes in bytes."""

from __future__ import annotations

from cutune.errors import SpecError

DTYPE_SIZES: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
}

DTYPES: tuple[str, ...] = tuple(DTYPE_SIZES)


def dtype_size(dtype: str) -> int:
    """The size in bytes of one element of `dtype` (one of DTYPES)."""
    try:
        return DTYPE_SIZES[dtype]
    except KeyError:
        raise SpecError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}") from None


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
}
