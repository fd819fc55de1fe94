"""Canonical forms: rewrites of a kernel's body, each proven like a variant (at the launch the spec gives it is
the original), that put the loops people write into the forms the structural transforms read."""

from cutune.template.variants.canonical.pipeline import STEPS, Canonical, canonicalise

__all__ = ["STEPS", "Canonical", "canonicalise"]
