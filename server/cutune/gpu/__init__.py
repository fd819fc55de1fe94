"""cutune.gpu: device limits, occupancy, compile-only checks and the measuring backends."""

from cutune.gpu.compile import CompileJob, compile_many, compile_resources
from cutune.gpu.limits import BUILTIN, DeviceLimits, limits_for
from cutune.gpu.nvcc import have_nvcc, nvcc_version
from cutune.gpu.occupancy import Infeasible, Limiter, Occupancy, occupancy, occupancy_of
from cutune.gpu.resources import ResourceUsage, parse_ptxas, pick_entry

__all__ = [
    "BUILTIN",
    "CompileJob",
    "DeviceLimits",
    "Infeasible",
    "Limiter",
    "Occupancy",
    "ResourceUsage",
    "compile_many",
    "compile_resources",
    "have_nvcc",
    "limits_for",
    "nvcc_version",
    "occupancy",
    "occupancy_of",
    "parse_ptxas",
    "pick_entry",
]
