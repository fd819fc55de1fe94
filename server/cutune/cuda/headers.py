"""Project headers (`#include "..."` found beside the file or on the include path): what each declares.

A stand-alone unit keeps a project header only when the kernel's code names something it declares,
directly or through the headers it includes in turn. Real files include project headers that pull in
host-only libraries (torch, cuBLAS, cuRAND) for their host code; the kernel rarely needs them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cutune.cuda.decls import collect_decls
from cutune.cuda.includes import TORCH_PREFIXES
from cutune.cuda.syntax import parse_tree

_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
_ANY_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def resolve_header(target: str, search: Sequence[str]) -> Path | None:
    """The file a quoted `#include "target"` names, looked up in `search` (the including folder first)."""
    for folder in search:
        candidate = Path(folder, target)
        if candidate.is_file():
            return candidate.resolve()
    return None


@dataclass(frozen=True)
class Declared:
    """What a header declares, with the headers it includes: names, the namespaces they live in, and the
    torch headers (torch/, ATen/, c10/, ...) it reaches."""

    names: frozenset[str]
    namespaces: frozenset[str]
    torch: frozenset[str] = frozenset()


def declared_names(header: Path, include_dirs: Sequence[str]) -> Declared:
    """What `header` and the project headers it includes, transitively, declare."""
    names: set[str] = set()
    namespaces: set[str] = set()
    torch: set[str] = set()
    seen: set[Path] = set()
    todo = [header]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        own, spaces, included, framework = _read(str(path), _stamp(path))
        names |= own
        namespaces |= spaces
        torch |= framework
        for target in included:
            found = resolve_header(target, (str(path.parent), *include_dirs))
            if found is not None:
                todo.append(found)
    return Declared(frozenset(names), frozenset(namespaces), frozenset(torch))


_CONVENTIONAL = ("", "include", "includes")  # where projects keep headers, under a folder above the source
_ANCESTORS = 5  # folders above the source's own that are searched (the source's folder first)


def project_include_dirs(source: Path) -> tuple[str, ...]:
    """The include folders a project's build evidently passes: for each quoted `#include` (followed through the
    headers it reaches) that resolves neither beside its includer nor in a folder found so far, the nearest folder
    above the source, or its `include/` or `includes/`, that holds it. Absolute paths, nearest first."""
    source = source.resolve()
    candidates = [a / c for a in list(source.parents)[: _ANCESTORS + 1] for c in _CONVENTIONAL]
    found: list[str] = []
    seen: set[Path] = set()
    todo = [source]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for target in _read(str(path), _stamp(path))[2]:
            hit = resolve_header(target, (str(path.parent), *found))
            if hit is None:
                folder = next((d for d in candidates if (d / target).is_file()), None)
                if folder is None:  # a system or generated header: the build's business
                    continue
                found.append(str(folder))
                hit = (folder / target).resolve()
            todo.append(hit)
    return tuple(found)


def _stamp(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


@functools.lru_cache(maxsize=512)
def _read(path: str, stamp: int) -> tuple[frozenset[str], frozenset[str], tuple[str, ...], frozenset[str]]:
    """A header's own declared names, their namespaces, its quoted include targets and the torch headers it
    includes."""
    del stamp  # part of the cache key only: an edited header is read again
    try:
        data = Path(path).read_bytes()
    except OSError:
        return frozenset(), frozenset(), (), frozenset()
    names: set[str] = set()
    namespaces: set[str] = set()
    for d in collect_decls(parse_tree(data).root_node, data):
        names.update(d.names)
        namespaces.update(d.namespace)
    text = data.decode("utf-8", errors="replace")
    return (
        frozenset(names - {""}),
        frozenset(namespaces - {""}),
        tuple(_INCLUDE.findall(text)),
        frozenset(t for t in _ANY_INCLUDE.findall(text) if t.startswith(TORCH_PREFIXES)),
    )
