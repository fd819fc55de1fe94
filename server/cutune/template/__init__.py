"""Templates: a kernel's hidden choices as explicit parameters, their space, the recipes that find them,
the tuning spec, and how a configuration reaches the compiler and the source."""

from cutune.template.apply import AppliedConfig, apply_config
from cutune.template.dtypes import DTYPES, dtype_size
from cutune.template.edits import TextEdit, apply_edits
from cutune.template.expr import Expr, compile_expr
from cutune.template.instantiate import compile_key, compile_options, instantiation, tuned_options
from cutune.template.model import Binding, Config, Refusal, Space, Template, TunableParam, Value
from cutune.template.recipes import RECIPES, Draft, Recipe
from cutune.template.spec import (
    ArgSpec,
    Init,
    KernelSpec,
    Role,
    SpecFile,
    Tolerance,
    check_against_kernel,
    default_tolerance,
    draft_spec,
    dump_kernel_spec,
    load_spec,
    parse_spec,
    spec_path_for,
    spec_schema,
)
from cutune.template.templatize import templatize
from cutune.template.tuning import tuning_name

__all__ = [
    "DTYPES",
    "RECIPES",
    "AppliedConfig",
    "ArgSpec",
    "Binding",
    "Config",
    "Draft",
    "Expr",
    "Init",
    "KernelSpec",
    "Recipe",
    "Refusal",
    "Role",
    "Space",
    "SpecFile",
    "Template",
    "TextEdit",
    "Tolerance",
    "TunableParam",
    "Value",
    "apply_config",
    "apply_edits",
    "check_against_kernel",
    "compile_expr",
    "compile_key",
    "compile_options",
    "default_tolerance",
    "draft_spec",
    "dtype_size",
    "dump_kernel_spec",
    "instantiation",
    "load_spec",
    "parse_spec",
    "spec_path_for",
    "spec_schema",
    "templatize",
    "tuned_options",
    "tuning_name",
]
