"""Reading a `.cu` file: its path and text, or a SourceError that says why not (light to import)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from cutune.errors import SourceError


def read_source(path: str | Path) -> tuple[Path, str]:
    """The path and text of a source file, with a clear error when unreadable."""
    p = Path(path)
    try:
        return p, p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SourceError("file not found", path=str(p)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SourceError(f"cannot read: {e}", path=str(p)) from None


def text_hash(text: str) -> str:
    """SHA-256 of a text (UTF-8): how sources, specs and recordings are told apart."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
