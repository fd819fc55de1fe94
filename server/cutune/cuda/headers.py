"""Project headers (`#include "..."` found beside the file or on the include path): what each declares.

A stand-alone unit keeps a project header only when the kernel's code names something it declares,
directly or through the headers it includes in turn. Real files include project headers that pull in
host-only libraries (torch, cuBLAS, cuRAND) for their host code; the kernel rarely needs them.
"""

from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cutune.cuda.decls import collect_decls
from cutune.cuda.includes import CUDA_HOST_API, STANDARD, TORCH_PREFIXES
from cutune.cuda.syntax import parse_tree

_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
# an object-like `#define NAME value` (a function-like one has `(` right after its name) on one line
_OBJECT_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\n]*?)[ \t]*$", re.M)
INTEGER_ARITHMETIC = re.compile(r"[\w\s+\-*/%()]+")  # integer arithmetic over literals and other names
_WORD = re.compile(r"[A-Za-z_]\w*")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
# a namespace-aware scan: keywords and braces first (one cheap pattern), each keyword's declaration read where it is
_TOKENS = re.compile(r"[{}]|\bnamespace\b|\bconstexpr\b")
_NAMESPACE = re.compile(r"namespace\s+([\w:]+)\s*\{")
_CONSTEXPR = re.compile(
    r"constexpr\s+(?:static\s+)?(?:const\s+)?(?:unsigned\s+|signed\s+)?"
    r"(?:int|long|short|size_t|u?int(?:8|16|32|64)_t|unsigned)\s+([A-Za-z_]\w*)\s*=\s*([^;{}]+);"
)
_ANY_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
_SYSTEM_INCLUDE = re.compile(r"^\s*#\s*include\s*<([^>]+)>", re.M)


def resolve_header(target: str, search: Sequence[str]) -> Path | None:
    """The file a quoted `#include "target"` names, looked up in `search` (the including folder first)."""
    for folder in search:
        candidate = Path(folder, target)
        if candidate.is_file():
            return candidate.resolve()
    return None


@dataclass(frozen=True)
class Declared:
    """What a header declares, with the headers it includes: names, the namespaces they live in, and the torch
    headers (torch/, ATen/, c10/, ...), CUDA host API headers (`<cuda.h>`, ...) and C/C++ standard headers it
    reaches."""

    names: frozenset[str]
    namespaces: frozenset[str]
    torch: frozenset[str] = frozenset()
    host_api: frozenset[str] = frozenset()
    standard: frozenset[str] = frozenset()


def declared_names(header: Path, include_dirs: Sequence[str]) -> Declared:
    """What `header` and the project headers it includes, transitively, declare."""
    names: set[str] = set()
    namespaces: set[str] = set()
    torch: set[str] = set()
    host_api: set[str] = set()
    standard: set[str] = set()
    for path in _walk(header, lambda path, target: resolve_header(target, (str(path.parent), *include_dirs))):
        own, spaces = _declared(str(path), _stamp(path))
        names |= own
        namespaces |= spaces
        scan = _scan(str(path), _stamp(path))
        torch |= scan.torch
        host_api |= scan.host_api
        standard |= scan.standard
    return Declared(*(frozenset(found) for found in (names, namespaces, torch, host_api, standard)))


def _walk(start: Path, resolve: Callable[[Path, str], Path | None]) -> Iterator[Path]:
    """`start`, then every file its quoted includes reach, transitively (each once, breadth first: nearer
    headers before the ones they include); `resolve(includer, target)` finds an include's file, or None."""
    seen: set[Path] = set()
    queue = deque([start])
    while queue:
        path = queue.popleft()
        if path in seen:
            continue
        seen.add(path)
        yield path
        for target in _scan(str(path), _stamp(path)).includes:
            found = resolve(path, target)
            if found is not None:
                queue.append(found)


_CONVENTIONAL = ("", "include", "includes")  # where projects keep headers, under a folder above the source
_ANCESTORS = 5  # folders above the source's own that are searched (the source's folder first)


def project_include_dirs(source: Path) -> tuple[str, ...]:
    """The include folders a project's build evidently passes: for each quoted `#include` (followed through the
    headers it reaches) that resolves neither beside its includer nor in a folder found so far, the nearest folder
    above the source, or its `include/` or `includes/`, that holds it. Absolute paths, nearest first."""
    source = source.resolve()
    candidates = [a / c for a in list(source.parents)[: _ANCESTORS + 1] for c in _CONVENTIONAL]
    found: list[str] = []

    def resolve(path: Path, target: str) -> Path | None:
        hit = resolve_header(target, (str(path.parent), *found))
        if hit is not None:
            return hit
        folder = next((d for d in candidates if (d / target).is_file()), None)
        if folder is None:  # a system or generated header: the build's business
            return None
        found.append(str(folder))
        return (folder / target).resolve()

    for _ in _walk(source, resolve):
        pass
    return tuple(found)


def _stamp(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def project_constants(source: Path) -> dict[str, str]:
    """Integer constants of the source and the project headers it reaches: object-like `#define NAME value`
    whose value is integer arithmetic (`#define CUDA_SCALE_BLOCK_SIZE 256`), and namespace-scope `constexpr`
    integers by qualified name (`pwise::threads`); the first definition met wins, the source's own first."""
    source = source.resolve()
    dirs = project_include_dirs(source)
    found: dict[str, str] = {}
    for path in _walk(source, lambda path, target: resolve_header(target, (str(path.parent), *dirs))):
        for name, value in _scan(str(path), _stamp(path)).constants:
            found.setdefault(name, value)
    return found


@dataclass(frozen=True)
class _Scan:
    """What a file's preprocessor lines say, read without parsing it (cheap for a 50,000-line source)."""

    includes: tuple[str, ...]  # quoted include targets
    torch: frozenset[str]  # torch headers it includes
    host_api: frozenset[str]  # CUDA host API headers it includes
    standard: frozenset[str]  # C/C++ standard headers it includes (`<stdint.h>`, `<type_traits>`)
    constants: tuple[tuple[str, str], ...]  # object-like integer macros, in order


@functools.lru_cache(maxsize=512)
def _scan(path: str, stamp: int) -> _Scan:
    """A file's quoted include targets, the torch, CUDA host API and standard headers it includes, and its integer
    macros."""
    del stamp  # part of the cache key only: an edited file is read again
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return _Scan((), frozenset(), frozenset(), frozenset(), ())
    constants = tuple(
        (m.group(1), m.group(2))
        for m in _OBJECT_MACRO.finditer(text)
        if INTEGER_ARITHMETIC.fullmatch(m.group(2)) and not m.group(2).endswith("\\")
    )
    included = _ANY_INCLUDE.findall(text)
    torch = frozenset(t for t in included if t.startswith(TORCH_PREFIXES))
    host_api = frozenset(t for t in included if t in CUDA_HOST_API)
    standard = frozenset(t for t in _SYSTEM_INCLUDE.findall(text) if t in STANDARD)
    return _Scan(tuple(_INCLUDE.findall(text)), torch, host_api, standard, constants + _namespace_constants(text))


def _in_namespace(prefix: str, known: set[str], word: re.Match[str]) -> str:
    """A bare name as the constant of namespace `prefix` it names, where that one is `known`."""
    qualified = f"{prefix}::{word.group(0)}"
    return qualified if qualified in known else word.group(0)


def _namespace_constants(text: str) -> tuple[tuple[str, str], ...]:
    """Integer `constexpr` constants at namespace scope, by qualified name (`namespace pwise { constexpr int
    threads = 256; }` → `pwise::threads`); those inside functions or classes are left to the host reading."""
    last = text.rfind("constexpr")
    if last < 0:  # most sources: no scan
        return ()
    text = _COMMENT.sub(" ", text[: text.find(";", last) + 1])  # braces after the last constant change nothing
    found = []
    known: set[str] = set()
    scopes: list[str | None] = []  # per open brace: the namespace it opened, or None (a function, a class)
    skip = -1  # the `{` a namespace match consumed
    for token in _TOKENS.finditer(text):
        at = token.start()
        if at == skip:
            continue
        if token.group(0) == "namespace":
            if (m := _NAMESPACE.match(text, at)) is not None:
                scopes.append(m.group(1))
                skip = m.end() - 1
        elif token.group(0) == "{":
            scopes.append(None)
        elif token.group(0) == "}":
            if scopes:
                scopes.pop()
        elif None not in scopes and (m := _CONSTEXPR.match(text, at)) is not None:
            name, value = m.group(1), m.group(2).strip()
            if not INTEGER_ARITHMETIC.fullmatch(value):
                continue
            prefix = "::".join(s for s in scopes if s)
            # a name of the same namespace in the value (`vals_per_block = threads * 4`) is that constant
            own = functools.partial(_in_namespace, prefix, known)
            key = f"{prefix}::{name}" if prefix else name
            known.add(key)
            found.append((key, _WORD.sub(own, value) if prefix else value))
    return tuple(found)


@functools.lru_cache(maxsize=512)
def _declared(path: str, stamp: int) -> tuple[frozenset[str], frozenset[str]]:
    """A header's own declared names and the namespaces they live in."""
    del stamp
    try:
        data = Path(path).read_bytes()
    except OSError:
        return frozenset(), frozenset()
    names: set[str] = set()
    namespaces: set[str] = set()
    for d in collect_decls(parse_tree(data).root_node, data):
        names.update(d.names)
        namespaces.update(d.namespace)
    return frozenset(names - {""}), frozenset(namespaces - {""})
