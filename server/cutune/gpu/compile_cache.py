"""A directory of finished compiles, one JSON file per key, safe to share between processes."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class CachedCompile:
    """The compiler's output for one compile, how long that compile took, and what else it left (JSON-ready:
    the binary, lowered names)."""

    output: str
    seconds: float
    extra: dict[str, Any] | None = None


class CompileCache:
    """Compiler outputs by key in `directory`; each entry is written atomically."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def get(self, key: str) -> CachedCompile | None:
        """The entry for `key`, or None when absent or unreadable."""
        try:
            data = json.loads((self.directory / f"{key}.json").read_text(encoding="utf-8"))
            extra = data.get("extra")
            extra = extra if isinstance(extra, dict) else None
            return CachedCompile(str(data["output"]), float(data["seconds"]), extra)
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a missing or damaged entry only costs a recompile

    def put(self, key: str, entry: CachedCompile) -> None:
        """Store an entry; readers see the old file or the whole new one, never a partial write."""
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"output": entry.output, "seconds": entry.seconds, "extra": entry.extra}, f)
            os.replace(tmp, self.directory / f"{key}.json")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
