"""tree-sitter-cuda plumbing: the language, parsing, queries and small node helpers."""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser, Point, Query, QueryCursor, Tree

from cutune.cuda.conditionals import device_view
from cutune.errors import ParseStopped

LANGUAGE = Language(tree_sitter_cuda.language())

# CUDA attributes tree-sitter-cuda does not know; blanked (same byte length, newlines kept) before
# parsing so offsets stay valid: `struct __align__(16) S`, `__cluster_dims__(2,1,1)`, `__maxnreg__(64)`
# (their argument may hold one level of parentheses: `extern __shared__ __align__(sizeof(float)) char s[];`)
# and the execution-space specifiers of extended lambdas `[] __device__ (int i) {...}`. Two patterns,
# not one alternation: each keeps the regex engine's fast literal-prefix scan (1 ms vs 4 ms per 250 KB).
_UNPARSED_ATTRIBUTES = (
    re.compile(rb"__(?:align|cluster_dims|maxnreg)__\s*\((?:[^()]|\([^()]*\))*\)"),
    re.compile(rb"\][ \t]*__(?:host|device)__(?:\s+__(?:host|device)__)?"),
)
# the keyword of a functional cast to a dependent type (`typename Ktraits::BlockLoadT(smem).Load(...)`, cub's idiom),
# which tree-sitter-cpp cannot read in an expression: without it, it reads as the call it is
_DEPENDENT_CAST = re.compile(
    rb"\btypename(?=\s+(?:::)?[A-Za-z_][\w:<>, ]*?::\s*[A-Za-z_]\w*\s*(?:<[\w:<>, ]*>\s*)?[({])"
)
# `#pragma` lines between a control statement's header and its unbraced body (`for (...)` or `if (...)`, then
# `#pragma unroll`, then the inner loop): tree-sitter reads a directive only between statements
_PRAGMA_IN_STATEMENT = re.compile(rb"(?<=\))[ \t]*(?://[^\n]*)?\n((?:[ \t]*#[ \t]*pragma\b[^\n]*\n)+)")
_INT_LITERAL = re.compile(r"(0[xX][0-9a-fA-F']+|0[bB][01']+|[0-9][0-9']*)([uUlLzZ]*)")


def _blank(match: re.Match[bytes]) -> bytes:
    text = match.group()
    keep = 1 if text.startswith(b"]") else 0  # the lambda's capture list stays
    return text[:keep] + _blank_text(text[keep:])


def _blank_text(text: bytes) -> bytes:
    """`text` as spaces, its newlines kept (the same byte length: every offset stays valid)."""
    return bytes(b if b == 0x0A else 0x20 for b in text)


# what says a parse (and the model built from it) is no longer wanted, in the thread that set it (`stoppable`)
_STOP: ContextVar[Callable[[], bool] | None] = ContextVar("cutune_stop", default=None)


@contextlib.contextmanager
def stoppable(stop: Callable[[], bool]) -> Iterator[None]:
    """Within the block, parsing and building a source model raise ParseStopped soon after `stop()` says yes
    (an editor's newer version): tree-sitter asks as it parses, the model's builders between items."""
    token = _STOP.set(stop)
    try:
        yield
    finally:
        _STOP.reset(token)


def check_stop() -> None:
    """Raise ParseStopped where the enclosing `stoppable` block's `stop()` says so."""
    stop = _STOP.get()
    if stop is not None and stop():
        raise ParseStopped("stopped: a newer text replaced this one")


def parse_tree(data: bytes, key: str | None = None) -> Tree:
    """Parse UTF-8 CUDA source with the attributes tree-sitter-cuda cannot read blanked out.

    A text parsed recently is not parsed again: its tree is shared (trees are never edited in place).
    A new text is parsed incrementally from the last tree parsed under `key` (a file path), or without a
    key from the last tree parsed at all: a recipe's rewrite of a 50,000-line file re-parses in
    milliseconds instead of 300. Inside `stoppable`, raises ParseStopped once the tree is no longer wanted.
    """
    return _chosen(data, key)[0]


@functools.lru_cache(maxsize=16)
def device_view_spans(data: bytes) -> tuple[tuple[int, int], ...]:
    """The byte ranges of `data` its parse blanked as a device pass's view (`cutune.cuda.conditionals`): the
    directives and branches not taken of the conditionals that split its braces; () where the text was parsed
    as it is."""
    return _chosen(data, None)[1]


def _chosen(data: bytes, key: str | None) -> tuple[Tree, tuple[tuple[int, int], ...]]:
    """The tree `parse_tree` gives, and the ranges blanked for a device pass's view where that is the tree: only a
    text that does not parse as it is, read as `_view` gives it where it has fewer syntax errors so (parsed afresh:
    the view is not an edit of the text the editor last parsed)."""
    blanked = _blanked(data)
    tree = _RECENT.parse(blanked, key)
    if tree.root_node.has_error:
        view, spans = _view(blanked)
        if view != blanked:
            viewed = _RECENT.parse(view, None)
            if _errors(viewed.root_node) < _errors(tree.root_node):
                return viewed, spans
    return tree, ()


@functools.lru_cache(maxsize=8)  # a broken file is parsed again on every model built
def _view(data: bytes) -> tuple[bytes, tuple[tuple[int, int], ...]]:
    """A text that does not parse as it is, as the parser may read it instead (same offsets): the device pass's view
    of its conditionals (the ranges it blanks returned: lines the parse leaves out), with the keyword of each
    functional cast to a dependent type blanked too (nothing left out: the cast reads the same without it), and the
    pragmas between a statement's header and its body (hints to the compiler, which change no result)."""
    view, spans = device_view(data) if b"#" in data else (data, ())
    view = _PRAGMA_IN_STATEMENT.sub(lambda m: m.group()[: m.start(1) - m.start()] + _blank_text(m.group(1)), view)
    return _DEPENDENT_CAST.sub(_blank, view), spans


def _errors(node: Node) -> int:
    """How many syntax errors and missing nodes lie under `node` (only subtrees holding one are walked)."""
    if node.is_missing or node.type == "ERROR":
        return 1
    return sum(_errors(child) for child in node.children if child.has_error or child.is_missing)


@functools.lru_cache(maxsize=16)
def _blanked(data: bytes) -> bytes:
    """The text with the attributes tree-sitter-cuda cannot read blanked (kept for the texts of the trees kept: every
    recipe and transform asks for the tree of the text it reads, and blanking a 50,000-line file takes 2 ms)."""
    for pattern in _UNPARSED_ATTRIBUTES:
        data = pattern.sub(_blank, data)
    return data


def _parsed(data: bytes, old: Tree | None) -> Tree:
    """A new tree of `data` (re-using `old`'s unchanged parts); inside `stoppable`, tree-sitter asks its `stop`
    as it goes (a 200,000-line parse takes a second) and fails once it says yes."""
    parser = Parser(LANGUAGE)
    stop = _STOP.get()
    # tree-sitter takes neither None for the old tree nor for the callback: only what is given is passed
    given: dict[str, Any] = {"progress_callback": lambda _offset, _has_error: stop()} if stop is not None else {}
    try:
        return parser.parse(_reader(data), old, **given) if old is not None else parser.parse(_reader(data), **given)
    except ValueError:
        if stop is not None and stop():
            raise ParseStopped("stopped: a newer text replaced this one") from None
        raise


class _RecentTrees:
    """The trees of a few recently parsed texts, and the last text parsed under each key."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._trees: OrderedDict[bytes, Tree] = OrderedDict()  # text → tree, least recent first
        self._last: dict[str, bytes] = {}  # key → the text last parsed under it
        self._lock = threading.Lock()  # guards the two maps; parsing runs outside it

    def parse(self, data: bytes, key: str | None) -> Tree:
        with self._lock:
            tree = self._trees.get(data)
            if tree is None:
                base = self._base(key)
                old = self._edited(data, base, self._trees[base]) if base is not None else None
        if tree is None:
            tree = _parsed(data, old)
        with self._lock:
            tree = self._trees.setdefault(data, tree)  # a text another thread parsed meanwhile keeps its tree
            self._trees.move_to_end(data)
            while len(self._trees) > self._size:
                self._trees.popitem(last=False)
            if key is not None:
                self._last[key] = data
            self._last = {k: v for k, v in self._last.items() if v in self._trees}
            return tree

    def _base(self, key: str | None) -> bytes | None:
        """The text to re-parse from: the key's last text, else the most recently parsed one."""
        last = self._last.get(key) if key is not None else None
        if last is not None and last in self._trees:
            return last
        return next(reversed(self._trees), None)

    @staticmethod
    def _edited(data: bytes, base: bytes, tree: Tree) -> Tree | None:
        """A copy of `base`'s tree edited into `data`'s shape, None when the texts share too little to gain."""
        start, old_end, new_end = changed_range(base, data)
        if 2 * (new_end - start) > len(data):  # mostly new text: nothing worth re-using
            return None
        edited = tree.copy()  # the cached tree is shared: never edit it in place
        edited.edit(
            start_byte=start,
            old_end_byte=old_end,
            new_end_byte=new_end,
            start_point=_point(data, start),
            old_end_point=_point(base, old_end),
            new_end_point=_point(data, new_end),
        )
        return edited


_RECENT = _RecentTrees(16)
_CHUNK = 1 << 14


def _reader(data: bytes) -> Callable[[int, Point], bytes]:
    """The text, read in chunks: tree-sitter holds the GIL while it parses a bytes object (1.3 s for a
    200,000-line file, with the language server's requests waiting); between chunks it lets other threads run."""

    def read(offset: int, _: Point) -> bytes:
        time.sleep(0)  # gives up the GIL
        return data[offset : offset + _CHUNK]

    return read


def changed_range(old: bytes, new: bytes) -> tuple[int, int, int]:
    """(start, old end, new end) of the one region in which two texts differ."""
    n = min(len(old), len(new))
    lo, hi = 0, n  # the common prefix length, by bisection on slices (each compare is a memcmp)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[lo:mid] == new[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    prefix = lo
    lo, hi = 0, n - prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[len(old) - mid : len(old) - lo] == new[len(new) - mid : len(new) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return prefix, len(old) - lo, len(new) - lo


def _point(data: bytes, offset: int) -> Point:
    return Point(data.count(b"\n", 0, offset), offset - (data.rfind(b"\n", 0, offset) + 1))


@functools.cache
def query(source: str) -> Query:
    """A compiled (and cached) tree-sitter query."""
    return Query(LANGUAGE, source)


def captures(source: str, node: Node) -> dict[str, list[Node]]:
    """The captures of a (cached) query under a node, by capture name."""
    return QueryCursor(query(source)).captures(node)


def matches(source: str, node: Node) -> list[dict[str, list[Node]]]:
    """The matches of a (cached) query under a node, each as capture name → nodes."""
    return [m for _, m in QueryCursor(query(source)).matches(node)]


def anchored(root: Node, data: bytes, pattern: re.Pattern[bytes], start: int = 0, end: int | None = None) -> list[Node]:
    """The smallest node around each match of a text pattern (a cheap pre-filter before a tree walk)."""
    stop = len(data) if end is None else end
    found = (root.descendant_for_byte_range(m.start(), m.end()) for m in pattern.finditer(data, start, stop))
    return [n for n in found if n is not None]


def node_text(data: bytes, node: Node) -> str:
    """The source text of a node."""
    return data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


def int_value(literal: str) -> int | None:
    """The value of a C++ integer literal such as `256`, `0x10u`, `1'024`; None for anything else."""
    m = _INT_LITERAL.fullmatch(literal.strip())
    if not m:
        return None
    digits = m.group(1).replace("'", "")
    if digits[:2] in ("0x", "0X"):
        return int(digits[2:], 16) if len(digits) > 2 else None
    if digits[:2] in ("0b", "0B"):
        return int(digits[2:], 2) if len(digits) > 2 else None
    if len(digits) > 1 and digits[0] == "0":
        return int(digits, 8) if all(c in "01234567" for c in digits) else None
    return int(digits)


def declarator_name(node: Node | None) -> Node | None:
    """The identifier a (possibly nested pointer/reference/array/function) declarator declares."""
    while node is not None:
        if node.type in (
            "identifier",
            "field_identifier",
            "type_identifier",
            "operator_name",
            "destructor_name",
        ):
            return node
        if node.type in ("qualified_identifier", "template_function", "template_type"):
            inner = node.child_by_field_name("name")
            if inner is None:
                return node
            node = inner
            continue
        inner = node.child_by_field_name("declarator")
        if inner is None:
            # `int&& x`, `T (*f)()` and friends: fall back to the last named child
            named = [c for c in node.named_children if c.type not in ("type_qualifier", "comment")]
            inner = named[-1] if named else None
        node = inner
    return None


def split_arguments(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """Trimmed byte ranges of the comma-separated arguments of the first `(...)` in data[start:end]."""
    open_paren = data.find(b"(", start, end)
    if open_paren < 0:
        return []
    ranges: list[tuple[int, int]] = []
    depth = 0
    piece = open_paren + 1
    for i in range(open_paren, end):
        c = data[i]
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            depth -= 1
            if depth == 0:
                ranges.append(trim(data, piece, i))
                break
        elif c == 0x2C and depth == 1:  # a top-level comma
            ranges.append(trim(data, piece, i))
            piece = i + 1
    else:  # unterminated: keep what was written
        ranges.append(trim(data, piece, end))
    return [r for r in ranges if r[0] < r[1]]


def trim(data: bytes, start: int, end: int) -> tuple[int, int]:
    """A byte range with surrounding whitespace removed."""
    while start < end and data[start] in b" \t\r\n":
        start += 1
    while end > start and data[end - 1] in b" \t\r\n":
        end -= 1
    return start, end


# statements a `return` or `break` inside of leaves only them, not the function's body (or the loop around them)
_NESTED_SCOPES = (
    "for_statement",
    "for_range_loop",
    "while_statement",
    "do_statement",
    "switch_statement",
    "lambda_expression",
)


def nested_scope(node: Node, body: Node | None = None) -> Node | None:
    """The innermost loop, switch or lambda (_NESTED_SCOPES) around `node` within `body` (the whole tree: None): what a
    `return` or `break` there leaves instead of `body`; None where there is none."""
    parent = node.parent
    while parent is not None and parent != body:
        if parent.type in _NESTED_SCOPES:
            return parent
        parent = parent.parent
    return None


def descendants(node: Node, *node_types: str) -> list[Node]:
    """The nodes of the given types under `node` (itself included), in source order."""
    stack = [node]
    found: list[Node] = []
    while stack:
        current = stack.pop()
        if current.type in node_types:
            found.append(current)
        stack.extend(current.children)
    return sorted(found, key=lambda n: n.start_byte)
