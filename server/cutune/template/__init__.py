"""Templates: a kernel's hidden choices as explicit parameters, their space, and the recipes and variants that
find them. Only the model's names are re-exported here: importing the package must not import the spec,
which builds on this model."""

from cutune.template.dtypes import DTYPES, dtype_size
from cutune.template.edits import TextEdit, apply_edits
from cutune.template.expr import Expr, compile_expr
from cutune.template.model import Binding, Config, Refusal, Space, Template, TunableParam, Value

__all__ = [
    "DTYPES",
    "Binding",
    "Config",
    "Expr",
    "Refusal",
    "Space",
    "Template",
    "TextEdit",
    "TunableParam",
    "Value",
    "apply_edits",
    "compile_expr",
    "dtype_size",
]
