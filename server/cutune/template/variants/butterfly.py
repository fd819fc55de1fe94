"""Reading a warp butterfly: `for (int o = G / 2; o > 0; o >>= 1) x = f(x, __shfl_xor_sync(FULL, x, o[, W]));`,
written in the kernel or as the loop of a `__device__` helper the kernel calls (`x = warp_max(x);`, looked up in
the file and the project headers it includes), as the lanes of each aligned group of G it combines and how each
step combines a lane's own value with its partner's.

After the steps with offsets G/2, ..., 1 every lane of a group holds the combination of the group's values, in the
butterfly's order; `exact` says where any other order gives the same bits (extrema, integer sums and bit
operations), so a thread may first combine values of its own.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cutune.cuda.model import SourceModel
from cutune.template.variants.canonical.loop_macros import reached_headers, split_args

OWN, PARTNER = "@own@", "@partner@"  # the two operands in `Butterfly.combine`
WARP = 32
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_LOOP = re.compile(
    r"for\s*\(\s*(?:const\s+)?(?:(?:unsigned|signed|int|long|short|auto|u?int32_t)\s+)*(?P<o>[A-Za-z_]\w*)\s*="
    r"\s*(?P<start>[^;]+?)\s*;\s*(?P=o)\s*(?:>\s*0|>=\s*1|!=\s*0)\s*;\s*(?P<step>[^)]*?)\s*\)\s*(?P<body>.*)$",
    re.S,
)
_UPDATE = re.compile(r"(?P<x>[A-Za-z_]\w*)\s*(?P<op>[-+*|&^]?=)(?!=)\s*(?P<e>.+?)\s*;", re.S)
_SHFL = re.compile(r"__shfl_xor_sync\s*\(")
_OTHER_SHFL = re.compile(r"__shfl_(?:down_|up_)?sync\s*\(")
_FULL_MASKS = ("0xffffffff", "0xffffffffu", "~0u", "0xffffffffull", "0xfffffffful")
_EXTREMA = ("fmaxf", "fminf", "fmax", "fmin", "max", "min", "__hmax", "__hmin")
_INTEGRAL = re.compile(r"(?:(?:unsigned|signed|int|long|short|char|size_t|u?int(?:8|16|32|64)_t)\s*)+")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
# `x = f(x);` or `x = f<W>(x);`: a value reduced by a helper, which may be a butterfly (helper_butterfly)
REDUCE_CALL = re.compile(r"(?P<x>[A-Za-z_]\w*)\s*=\s*(?P<f>[A-Za-z_]\w*)\s*(?:<(?P<w>[^<>]*)>)?\s*\(\s*(?P=x)\s*\)\s*;")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+\(?(\d+)\)?[ \t]*$", re.M)
_CONSTANT = re.compile(
    r"\b(?:static\s+)?(?:constexpr|const)\s+(?:unsigned\s+)?(?:int|long|size_t)\s+(\w+)\s*=\s*(\d+)\s*;"
)


@dataclass(frozen=True)
class Butterfly:
    """A warp butterfly over aligned groups of `group` lanes, combining a lane's value (OWN) with its partner's
    (PARTNER) as `combine` says at every step."""

    var: str  # the variable it reduces (the helper's parameter, for a helper's loop)
    group: int  # lanes per group: twice the first offset
    combine: str  # an expression over OWN and PARTNER
    mask: str  # the shuffles' (full) mask, as written
    exact: bool  # combining in any order gives the same bits


def read_butterfly(loop: str, names: Mapping[str, int], var_type: str) -> Butterfly | str | None:
    """The butterfly `loop` (a `for` statement's text) is; why it cannot be read as one (a reason); None when it does
    not shuffle. `names` gives the values of the constants its first offset may name; `var_type` is the type of the
    variable it reduces."""
    text = _COMMENT.sub(" ", loop).strip()
    if not _SHFL.search(text):
        if _OTHER_SHFL.search(text):
            return (
                "its shuffles are not an xor butterfly (a down or indexed shuffle leaves the whole in some lanes only)"
            )
        return None
    m = _LOOP.match(text)
    if m is None:
        return "its shuffle loop is not `for (o = G / 2; o > 0; o >>= 1)`"
    o = m.group("o")
    if "".join(m.group("step").split()) not in (f"{o}>>=1", f"{o}/=2", f"{o}={o}/2", f"{o}={o}>>1"):
        return f"its shuffle loop steps `{m.group('step')}`, not halving the offset"
    start = int_value(m.group("start"), names)
    if start is None or start < 1 or start & (start - 1) or 2 * start > WARP:
        return f"its first offset `{m.group('start')}` is not a power of two below {WARP} known at compile time"
    body = m.group("body").strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1].strip()
    update = _UPDATE.fullmatch(body)
    if update is None:
        return "its shuffle loop does more than update one variable"
    x, op, e = update.group("x"), update.group("op"), update.group("e")
    if ";" in e:
        return "its shuffle loop does more than update one variable"
    shuffles = list(_SHFL.finditer(e))
    if len(shuffles) != 1:
        return "its step shuffles more than once"
    close = _closing(e, shuffles[0].end() - 1)
    if close is None:
        return "its shuffle call is not closed"
    args = split_args(e[shuffles[0].end() : close])
    if len(args) not in (3, 4) or args[1] != x or args[2] != o:
        return f"its step does not exchange `{x}` at the offset `{o}`"
    if "".join(args[0].split()).lower() not in _FULL_MASKS:
        return f"its shuffles' mask `{args[0]}` is not the whole warp"
    if len(args) == 4:
        width = int_value(args[3], names)
        if width is None or width < 2 * start or width & (width - 1) or width > WARP:
            return f"its shuffles' width `{args[3]}` is not a power of two covering the group"
    rest = e[: shuffles[0].start()] + PARTNER + e[close + 1 :]
    rest = re.sub(rf"\b{re.escape(x)}\b", OWN, rest)
    combine = rest if op == "=" else f"{OWN} {op[0]} ({rest})"
    others = [n for n in _NAME.findall(combine.replace(OWN, "").replace(PARTNER, "")) if not _called(combine, n)]
    if others:
        return f"its step combines `{x}` with more than its partner's value"
    return Butterfly(x, 2 * start, combine, args[0], _exact(combine, var_type))


def helper_butterfly(
    model: SourceModel, name: str, width: str | None, var_type: str, include_dirs: Sequence[str]
) -> Butterfly | str | None:
    """The butterfly the `__device__` helper `name` (its overload taking `var_type`, template width `width` when the
    call gives one) is; why not; None when no definition of it is found in the file or its project headers."""
    pattern = re.compile(
        r"(?:template\s*<(?P<tparams>[^<>]*)>\s*)?(?P<quals>(?:(?:static|inline|__device__|__forceinline__|__host__)"
        rf"\s+)+)[\w:]+\s+{re.escape(name)}\s*\(\s*(?:const\s+)?(?P<type>[\w:]+)\s+(?P<param>\w+)\s*\)\s*\{{"
    )
    found: list[Butterfly | str] = []
    for text in itertools.chain([model.text], reached_headers(model, include_dirs)):
        matches = [
            m for m in pattern.finditer(text) if "__device__" in m.group("quals") and m.group("type") == var_type
        ]
        if matches:
            names = texts_names(model, include_dirs)
            found = [_helper(text, m, width, names) for m in matches]
            break
    if not found:
        return None
    if len({str(f) for f in found}) > 1:
        return f"{name} is defined more than once for {var_type}"
    return found[0]


def texts_names(model: SourceModel, include_dirs: Sequence[str]) -> dict[str, int]:
    """The integer constants (`#define N 32`, `constexpr int N = 32;`) of the file and its project headers, and
    warpSize."""
    names: dict[str, int] = {"warpSize": WARP}
    for text in (model.text, *reached_headers(model, include_dirs)):
        for pattern in (_DEFINE, _CONSTANT):
            for m in pattern.finditer(text):
                names.setdefault(m.group(1), int(m.group(2)))
    return names


def int_value(text: str, names: Mapping[str, int]) -> int | None:
    """The integer value of a constant expression over literals and `names` (C division), or None."""
    text = re.sub(r"(?<=\d)[uUlL]+\b", "", text)
    try:
        tree = ast.parse(text.strip().replace("/", "//"), mode="eval")
    except SyntaxError:
        return None
    return _evaluated(tree.body, names)


def _evaluated(node: ast.expr, names: Mapping[str, int]) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.BinOp):
        a, b = _evaluated(node.left, names), _evaluated(node.right, names)
        if a is None or b is None:
            return None
        ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
        if type(node.op) in ops:
            return ops[type(node.op)]
        if isinstance(node.op, ast.FloorDiv) and b > 0 and a >= 0:
            return a // b
        if isinstance(node.op, ast.RShift) and 0 <= b < 64:
            return a >> b
    return None


def _helper(text: str, m: re.Match[str], width: str | None, names: dict[str, int]) -> Butterfly | str:
    """The butterfly a helper definition (matched by `m`, its body opening at the match's end) is, or why not."""
    close = _closing(text, m.end() - 1, "{", "}")
    if close is None:
        return "its definition is not closed"
    body = _COMMENT.sub(" ", text[m.end() : close])
    body = re.sub(r"^[ \t]*#[ \t]*pragma[ \t]+unroll[^\n]*$", "", body, flags=re.M).strip()
    if "#" in body:
        return "its body depends on the preprocessor"
    param = m.group("param")
    ret = re.search(rf"\breturn\s+{re.escape(param)}\s*;\s*$", body)
    if ret is None:
        return f"it does not end returning `{param}`"
    local = dict(names)
    for tparam in split_args(m.group("tparams") or ""):
        t = re.fullmatch(r"(?:int|unsigned|unsigned\s+int)\s+(\w+)\s*(?:=\s*(.+))?", tparam.strip())
        if t is None:
            return f"its template parameter `{tparam}` is not an integer width"
        value = int_value(width if width is not None else t.group(2) or "", names)
        if value is None:
            return f"its template parameter {t.group(1)} has no value known at compile time"
        local[t.group(1)] = value
    found = read_butterfly(body[: ret.start()].strip(), local, m.group("type"))
    if found is None:
        return "it does not shuffle"
    return found


def _closing(text: str, at: int, opening: str = "(", closing: str = ")") -> int | None:
    """The index of the bracket closing the one at `at`."""
    depth = 0
    for i in range(at, len(text)):
        depth += 1 if text[i] == opening else -1 if text[i] == closing else 0
        if depth == 0:
            return i
    return None


def _called(text: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\s*\(", text) is not None


def _exact(combine: str, var_type: str) -> bool:
    """Whether combining in another order gives the same bits: extrema, or an integer sum or bit operation."""
    flat = "".join(combine.split())
    pair = {f"{OWN},{PARTNER}", f"{PARTNER},{OWN}"}
    if any(flat in {f"{f}({p})" for p in pair} for f in _EXTREMA):
        return True
    integral = _INTEGRAL.fullmatch(re.sub(r"\bconst\b", "", var_type).strip()) is not None
    ops = re.fullmatch(rf"{OWN}([+|&^])\(?{PARTNER}\)?|\(?{PARTNER}\)?([+|&^]){OWN}", flat)
    return integral and ops is not None
