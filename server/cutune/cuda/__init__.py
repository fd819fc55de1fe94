"""cutune.cuda: the CUDA source model (tree-sitter-cuda) and stand-alone kernel extraction."""

from cutune.cuda.extract import CompileUnit, extract_kernel, qualified_name
from cutune.cuda.model import (
    DeviceFunction,
    Include,
    Kernel,
    LaunchBounds,
    LaunchSite,
    LiteralKind,
    Macro,
    Parameter,
    ParseIssue,
    SourceModel,
    TemplateParam,
    TemplateParamKind,
    TunableLiteral,
    TypeDecl,
)
from cutune.cuda.parse import parse_source
from cutune.cuda.text import LineIndex, Position, Span

__all__ = [
    "CompileUnit",
    "DeviceFunction",
    "Include",
    "Kernel",
    "LaunchBounds",
    "LaunchSite",
    "LineIndex",
    "LiteralKind",
    "Macro",
    "Parameter",
    "ParseIssue",
    "Position",
    "SourceModel",
    "Span",
    "TemplateParam",
    "TemplateParamKind",
    "TunableLiteral",
    "TypeDecl",
    "extract_kernel",
    "parse_source",
    "qualified_name",
]
