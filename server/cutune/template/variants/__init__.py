"""Structural variants of a kernel: the model, and the built-in transforms that produce them."""

from cutune.template.variants.model import Launch, Provenance, Transform, Variant

__all__ = ["Launch", "Provenance", "Transform", "Variant"]
