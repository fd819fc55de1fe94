"""loop_macros: a loop written through a function-like macro whose definition is a `for` header, expanded as the
preprocessor expands it, so the transforms see the loop.

    #define KERNEL_LOOP(i, n) \\
      for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

    KERNEL_LOOP(j, N / 4) { BODY }     →     for (size_t j = blockIdx.x * blockDim.x + threadIdx.x; j < (N / 4);
                                                  j += blockDim.x * gridDim.x) { BODY }

The macro is defined in the file or in a project header it includes (`#include "..."`, looked up beside the
including file, then on the include path), transitively. Its replacement text must be one or more `for (...)`
headers and nothing else, with no `#`/`##` operators; each parameter is replaced by its argument's text, token for
token, which is what the preprocessor does. Refused, with the reason, where the macro's definition is not found,
is defined differently in two places, or is not a loop header.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from cutune.cuda.headers import resolve_header
from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.variants.canonical.shape import kernel_body

NAME = "loop_macros"
MAX_HEADERS = 200  # a project's header graph reached from one file; beyond it the search stops (and says so)
# `NAME(args)` followed by a block or a statement's start: a call never is, so it is a macro that opens a loop
_USE = re.compile(r"(?<![\w.>:])([A-Z_][A-Z0-9_]*)\s*\(")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(([^()]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)
_OBJECT_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])[ \t]*([^\n\\]*)$", re.M)
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_TOKEN = re.compile(r"\.?\d[\w.]*|[A-Za-z_]\w*")  # a number (left as it is) or an identifier


def expand_loop_macros(model: SourceModel, kernel: str, include_dirs: Sequence[str] = ()) -> SourceModel | str | None:
    """The model with `kernel`'s loop macros expanded; why not; None when its body uses none."""
    text = kernel_body(model, kernel)
    comments = [(c.start(), c.end()) for c in _COMMENT.finditer(text)]
    calls = [m for m in _USE.finditer(text) if not any(a <= m.start() < b for a, b in comments)]
    ends = [(m, _call_end(text, m.end() - 1)) for m in calls]
    uses = [(m, end) for m, end in ends if end is not None and _opens_statement(text, end)]
    if not uses:
        return None
    definitions = _definitions(model, include_dirs, {m.group(1) for m, _ in uses})
    start = model.kernel(kernel).body_span.start_byte
    edits = EditList(model.text.encode("utf-8"))
    for match, end in uses:
        name = match.group(1)
        found = definitions.get(name)
        if found is None:
            where = "the file or a header found beside it or on the include path"
            return f"`{name}(...)` opens a statement like a loop macro, but its `#define` is in neither {where}"
        if isinstance(found, str):
            return f"`{name}(...)` {found}"
        params, body = found
        args = split_args(text[match.end() : end - 1])
        if len(args) != len(params):
            return f"`{name}(...)` is given {len(args)} arguments where its `#define` takes {len(params)}"
        expansion = _substituted(body, dict(zip(params, args, strict=True)))
        first, last = (start + len(text[:i].encode("utf-8")) for i in (match.start(), end))
        edits.replace(first, last, expansion)
    return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)


def _substituted(body: str, values: dict[str, str]) -> str:
    """`body` with each identifier that names a parameter replaced by its argument (numbers left as they are)."""
    return _TOKEN.sub(lambda m: values.get(m.group(0), m.group(0)), body)


def _call_end(text: str, open_paren: int) -> int | None:
    """The index just past the `)` that closes the `(` at `open_paren`, or None when it does not close."""
    depth = 0
    for i in range(open_paren, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    return None


def _opens_statement(text: str, end: int) -> bool:
    """Whether the call ending at `end` is followed by a block or a statement rather than an expression's rest."""
    rest = text[end:].lstrip()
    return rest.startswith("{") or bool(re.match(r"(?:[A-Za-z_]\w*(?:\s*[\[.(]|\s*(?:[-+*/]?=|\+\+|--)))", rest))


def split_args(text: str) -> list[str]:
    """A macro call's (or a launch configuration's) arguments: split at the commas outside parentheses, brackets and
    braces."""
    args: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(ch, 0)
        current.append(ch)
    args.append("".join(current).strip())
    return args if args != [""] else []


Definition = tuple[list[str], str] | str  # (parameters, replacement text), or why the macro cannot be expanded


def _definitions(model: SourceModel, include_dirs: Sequence[str], names: set[str]) -> dict[str, Definition]:
    """The definitions of `names` in the file, then in the project headers it reaches (first found, in order)."""
    found: dict[str, Definition] = {}
    texts = _texts(model, include_dirs)
    while names - found.keys() and (text := next(texts, None)) is not None:
        _collect(text, names, found)
    return found


def object_macros(model: SourceModel, include_dirs: Sequence[str], names: set[str]) -> dict[str, str | None]:
    """The replacement text of each of `names` defined as an object-like macro (`#define WARP_SIZE 32`) in the file
    or the project headers it reaches; None for a name defined differently in two places (under different `#if`s)."""
    found: dict[str, str | None] = {}
    texts = _texts(model, include_dirs)
    while names - found.keys() and (text := next(texts, None)) is not None:
        for match in _OBJECT_DEFINE.finditer(text):
            if match.group(1) in names:
                value = " ".join(_COMMENT.sub(" ", match.group(2)).split())
                previous = found.setdefault(match.group(1), value)
                if previous != value:
                    found[match.group(1)] = None
    return found


def _texts(model: SourceModel, include_dirs: Sequence[str]) -> Iterator[str]:
    """The file's text, then the texts of the project headers it reaches (`reached_headers`), read as asked for."""
    yield model.text
    yield from reached_headers(model, include_dirs)


def reached_headers(model: SourceModel, include_dirs: Sequence[str]) -> Iterator[str]:
    """The texts of the project headers the file includes (`#include "..."`, looked up beside the including file,
    then in `include_dirs`), transitively, breadth first, each once (at most MAX_HEADERS)."""
    folder = str(Path(model.path).parent) if model.path else "."
    todo = [(t, folder) for t in _INCLUDE.findall(model.text)]
    seen: set[Path] = set()
    while todo and len(seen) < MAX_HEADERS:
        target, beside = todo.pop(0)
        header = resolve_header(target, (beside, *include_dirs))
        if header is None or header in seen:
            continue
        seen.add(header)
        header_text = _read(str(header), _stamp(header))
        yield header_text
        todo += [(t, str(header.parent)) for t in _INCLUDE.findall(header_text)]


def _collect(text: str, names: set[str], found: dict[str, Definition]) -> None:
    """Add the loop-macro definitions of `names` that `text` holds; two different ones make it a reason."""
    for match in _DEFINE.finditer(text):
        name = match.group(1)
        if name not in names:
            continue
        params = [p.strip() for p in match.group(2).split(",") if p.strip()]
        body = " ".join(_COMMENT.sub(" ", match.group(3).replace("\\\n", " ")).split())
        definition: Definition = (params, body) if _is_loop_header(body) else "is a macro, but not a `for` header"
        if "#" in body or "..." in params or "__VA_ARGS__" in body:
            definition = "uses `#`, `##` or variadic arguments, which this expansion does not model"
        previous = found.get(name)
        if previous is not None and previous != definition:
            found[name] = "is defined differently in two places (under different `#if`s?)"
        else:
            found[name] = definition


def _is_loop_header(body: str) -> bool:
    """Whether `body` is one or more `for (...)` headers and nothing else."""
    rest = body.strip()
    if not rest.startswith("for"):
        return False
    while rest:
        if not re.match(r"for\s*\(", rest):
            return False
        end = _call_end(rest, rest.index("("))
        if end is None:
            return False
        rest = rest[end:].strip()
    return True


def _stamp(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


@functools.lru_cache(maxsize=256)
def _read(path: str, stamp: int) -> str:
    """A header's text (`stamp`, its modification time, keys the cache: an edited header is read again)."""
    del stamp
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
