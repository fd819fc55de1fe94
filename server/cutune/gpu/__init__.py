"""cutune.gpu: occupancy, compile-only checks and the measuring backends (device limits: `cutune.limits`)."""

from cutune.gpu.compile import CompileJob, compile_many, compile_resources
from cutune.gpu.nvcc import have_nvcc, nvcc_version
from cutune.gpu.occupancy import Infeasible, Limiter, Occupancy, occupancy, occupancy_of
from cutune.gpu.resources import ResourceUsage, parse_ptxas, pick_entry

__all__ = [
    "CompileJob",
    "Infeasible",
    "Limiter",
    "Occupancy",
    "ResourceUsage",
    "compile_many",
    "compile_resources",
    "have_nvcc",
    "nvcc_version",
    "occupancy",
    "occupancy_of",
    "parse_ptxas",
    "pick_entry",
]
