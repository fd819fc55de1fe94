"""Demangled kernel names: qualified name and template arguments as the source would write them."""

from __future__ import annotations

import shutil

import pytest

from cutune.capture.demangle import demangle, kernel_name

NAMES = {
    "_ZN4vllm15rms_norm_kernelIN3c108BFloat16EEEvPT_PKS3_S6_fii": ("vllm::rms_norm_kernel", ("c10::BFloat16",)),
    "_ZN12_GLOBAL__N_18k_kernelILi4ELb1EEEvPfi": ("k_kernel", ("4", "true")),
    "_ZN3ops6detail10act_kernelIN3c104HalfEXadL_ZNS0_4siluIS3_EET_RKS5_EEEEvPS5_PKS5_i": (
        "ops::detail::act_kernel",
        ("c10::Half", "ops::detail::silu<c10::Half>"),
    ),
    "scale_kernel": ("scale_kernel", ()),  # extern "C": not mangled
}


@pytest.mark.skipif(shutil.which("c++filt") is None and shutil.which("cu++filt") is None, reason="no demangler")
@pytest.mark.parametrize("mangled", sorted(NAMES))
def test_names_and_template_arguments(mangled: str) -> None:
    name = kernel_name(demangle([mangled])[mangled])
    assert (name.qualified, name.template_args) == NAMES[mangled]
