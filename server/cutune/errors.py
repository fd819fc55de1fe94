"""One root exception with specific subclasses that carry what the user must know."""

from __future__ import annotations


class CutuneError(Exception):
    """Root of every error cutune raises on purpose."""


class SourceError(CutuneError):
    """A `.cu` file could not be read or a kernel in it could not be found or handled."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = f"{path or '<source>'}:{line + 1}: " if line is not None else (f"{path}: " if path else "")
        super().__init__(f"{where}{message}")
        self.path = path
        self.line = line


class SpecError(CutuneError):
    """A tuning spec is missing, malformed or inconsistent; names the file, line and key."""

    def __init__(
        self, message: str, *, path: str | None = None, line: int | None = None, key: str | None = None
    ) -> None:
        parts = [path or "<spec>"]
        if line is not None:
            parts.append(str(line))
        where = ":".join(parts)
        at = f" [{key}]" if key else ""
        super().__init__(f"{where}:{at} {message}")
        self.path = path
        self.line = line
        self.key = key
        self.detail = message


class ExpressionError(CutuneError):
    """A spec or constraint expression could not be parsed or evaluated."""


class RecipeRefused(CutuneError):
    """A recipe does not apply to this kernel; the message says why."""

    def __init__(self, recipe: str, reason: str) -> None:
        super().__init__(f"{recipe}: {reason}")
        self.recipe = recipe
        self.reason = reason


class CompileError(CutuneError):
    """The CUDA compiler rejected a compile unit; carries the compiler's log and, where extraction changed
    something that may be the cause (a stood-in header), a hint saying what."""

    def __init__(self, message: str, *, log: str = "", hint: str = "") -> None:
        super().__init__(message if not log else f"{message}\n{log}")
        self.hint = hint
        self.log = log


class NoGpuError(CutuneError):
    """Measured tuning was asked for where no CUDA GPU (or CuPy) is available."""


class StudyError(CutuneError):
    """The tuning study could not be created, loaded or continued."""


class TransformRefused(CutuneError):
    """A structural transform cannot rewrite this kernel safely; the message says why."""

    def __init__(self, transform: str, reason: str) -> None:
        super().__init__(f"{transform}: {reason}")
        self.transform = transform
        self.reason = reason


class ReferenceInvalid(CutuneError):
    """The original kernel cannot serve as the oracle on this spec; names the argument and what to change."""

    def __init__(self, message: str, arg: str | None = None) -> None:
        super().__init__(message)
        self.arg = arg


class ParseStopped(CutuneError):
    """A parse ended early because its caller no longer wanted it (an editor's newer version)."""
