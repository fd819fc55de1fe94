"""cutune.cuda: the CUDA source model (tree-sitter-cuda) and stand-alone kernel extraction."""

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
    "parse_source",
]
