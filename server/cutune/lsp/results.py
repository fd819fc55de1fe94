"""Stored tuning results, read from `<workspace>/.cutune/results/` and re-read only when their file changes."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from cutune.errors import CutuneError
from cutune.project import STATE_DIR, workspace_dir
from cutune.tune.result import TuneResult, read_result, result_path

log = logging.getLogger(__name__)


class ResultStore:
    """A cache of result files by path and modification time; safe to use from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read: dict[Path, tuple[int, TuneResult | None]] = {}
        self._listed: dict[Path, tuple[int, frozenset[str]]] = {}  # a results folder's names, by its mtime
        self._workspaces: dict[Path, Path] = {}  # a source's folder → its workspace (found by walking up)
        self._folders: dict[Path, Path] = {}  # a source → its results folder

    def _names(self, folder: Path) -> frozenset[str]:
        """The file names in a results folder, listed again only when the folder changes."""
        try:
            mtime = folder.stat().st_mtime_ns
        except OSError:
            return frozenset()
        with self._lock:
            listed = self._listed.get(folder)
        if listed is None or listed[0] != mtime:
            listed = (mtime, frozenset(os.listdir(folder)))
            with self._lock:
                self._listed[folder] = listed
        return listed[1]

    def path(self, source: Path, kernel: str) -> Path:
        """Where the result of `kernel` in `source` is stored."""
        workspace = self._workspaces.get(source.parent)
        if workspace is None:
            workspace = self._workspaces[source.parent] = workspace_dir(source)
        return result_path(workspace / STATE_DIR, str(source), kernel)

    def stored(self, source: Path) -> frozenset[str]:
        """The kernels of `source` that have a result file: one listing for a whole file's kernels (most kernels
        of a large file have none)."""
        folder = self._folders.get(source)
        if folder is None:
            folder = self._folders[source] = self.path(source, "").parent
        prefix, suffix = f"{source.stem}.", ".json"
        return frozenset(
            n[len(prefix) : -len(suffix)] for n in self._names(folder) if n.startswith(prefix) and n.endswith(suffix)
        )

    def get(self, source: Path, kernel: str, stored: frozenset[str] | None = None) -> TuneResult | None:
        """The stored result of a kernel, or None (unreadable files are logged and count as none); `stored` is
        what `stored(source)` said, where the caller looks at many kernels."""
        if kernel not in (self.stored(source) if stored is None else stored):
            return None
        path = self.path(source, kernel)
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            return None
        with self._lock:
            cached = self._read.get(path)
        if cached is not None and cached[0] == mtime:
            return cached[1]
        try:
            result: TuneResult | None = read_result(path)
        except CutuneError as e:
            log.warning("%s", e)
            result = None
        with self._lock:
            self._read[path] = (mtime, result)
        return result
