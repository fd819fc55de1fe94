"""The tuning spec: how to run a kernel (arguments, launch, problem sizes, tolerances, space)."""

from cutune.spec.check import check_against_kernel
from cutune.spec.draft import draft_spec
from cutune.spec.load import load_spec, parse_spec, spec_path_for
from cutune.spec.model import ArgSpec, Init, KernelSpec, Role, SpecFile, Tolerance, default_tolerance
from cutune.spec.schema import spec_schema
from cutune.spec.write import dump_kernel_spec
from cutune.template.dtypes import DTYPES, dtype_size

__all__ = [
    "DTYPES",
    "ArgSpec",
    "Init",
    "KernelSpec",
    "Role",
    "SpecFile",
    "Tolerance",
    "check_against_kernel",
    "default_tolerance",
    "draft_spec",
    "dtype_size",
    "dump_kernel_spec",
    "load_spec",
    "parse_spec",
    "spec_path_for",
    "spec_schema",
]
