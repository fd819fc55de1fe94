"""Safe arithmetic expressions for tuning specs: parsed once with `ast`, evaluated many times, never `eval`.

The language is a small subset of Python's expression syntax with C's integer semantics:

- literals: integers, floats, `True`/`False` (also `true`/`false`);
- names, looked up in the mapping given to `Expr.evaluate` (problem sizes, tunable parameters,
  device limits); the constants `sizeof_<dtype>` for every dtype in `cutune.template.dtypes.DTYPES`
  (e.g. `sizeof_bfloat16` is 2) are built in and folded in when the expression is compiled;
- `+ - * / // % **`, unary `-` and `+`, comparisons (chained, as in `0 < x <= 8`), `and`, `or`, `not`
  (these and comparisons give bools and short-circuit), and `a if cond else b`;
- `/` between two integers truncates toward zero as in C (`(n + 255) / 256` is integer division);
  it gives a float when either operand is a float. `//` is floor division. `%` between integers takes
  the sign of the dividend as in C, so `a == (a / b) * b + a % b`; between floats it is C's `fmod`.
  Exponents of `**` are bounded by ±64. Dividing by zero is an error;
- functions: `min(a, b, ...)`, `max(a, b, ...)`, `abs(x)`, `ceil_div(a, b)` (alias `cdiv`),
  `round_up(a, b)` (a rounded up to a multiple of b), `log2(x)` (exact integer for powers of two,
  float otherwise), `is_pow2(x)`, `int(x)` (truncates toward zero) and `float(x)`.
"""

from __future__ import annotations

import ast
import difflib
import functools
import math
import numbers
import re
from collections.abc import Callable, Collection, Mapping

from cutune.errors import ExpressionError
from cutune.template.dtypes import DTYPE_SIZES

Number = int | float | bool
_Fn = Callable[[Mapping[str, Number]], Number]

MAX_LENGTH = 2000
MAX_EXPONENT = 64
_MAX_INT_BITS = 4096  # keeps `**` towers from building huge integers

CONSTANTS: dict[str, Number] = {
    **{f"sizeof_{dtype}": size for dtype, size in DTYPE_SIZES.items()},
    "true": True,
    "false": False,
}


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def _ints(name: str, *args: Number) -> tuple[int, ...]:
    """The arguments of `name`, which must all be integers."""
    for a in args:
        if not isinstance(a, int):
            raise ValueError(f"{name}() takes integers, got {a!r}")
    return tuple(int(a) for a in args)


def _ceil_div(x: Number, y: Number) -> int:
    a, b = _ints("ceil_div", x, y)
    if b == 0:
        raise ZeroDivisionError("ceil_div() by zero")
    return -(-a // b)


def _round_up(x: Number, y: Number) -> int:
    a, b = _ints("round_up", x, y)
    if b == 0:
        raise ZeroDivisionError("round_up() to a multiple of zero")
    return -(-a // b) * b


def _log2(x: Number) -> Number:
    if x <= 0:
        raise ValueError(f"log2() of {x!r}, which is not positive")
    if isinstance(x, int) and x & (x - 1) == 0:
        return x.bit_length() - 1
    return math.log2(x)


def _is_pow2(value: Number) -> bool:
    (x,) = _ints("is_pow2", value)
    return x > 0 and x & (x - 1) == 0


# name → (implementation, fewest arguments, most arguments or None for any number)
FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int | None]] = {
    "min": (min, 2, None),
    "max": (max, 2, None),
    "abs": (abs, 1, 1),
    "ceil_div": (_ceil_div, 2, 2),
    "cdiv": (_ceil_div, 2, 2),
    "round_up": (_round_up, 2, 2),
    "log2": (_log2, 1, 1),
    "is_pow2": (_is_pow2, 1, 1),
    "int": (int, 1, 1),
    "float": (float, 1, 1),
}

_OPERATOR_TEXT = {
    ast.BitXor: "^ (use ** for powers)",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
    ast.Invert: "~",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
}

_NODE_TEXT = {
    ast.Attribute: "attribute access",
    ast.Subscript: "indexing",
    ast.Lambda: "lambda",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a comprehension",
    ast.JoinedStr: "an f-string",
    ast.List: "a list",
    ast.Tuple: "a tuple",
    ast.Dict: "a dict",
    ast.Set: "a set",
    ast.NamedExpr: "assignment (:=)",
    ast.Starred: "unpacking (*)",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Slice: "slicing",
}


class Expr:
    """A compiled expression: `evaluate` it with a mapping of names; `names` are its free variables."""

    __slots__ = ("_columns", "_fn", "names", "text")

    def __init__(self, text: str, fn: _Fn, columns: dict[str, int]) -> None:
        self.text = text
        self.names = frozenset(columns)
        self._fn = fn
        self._columns = columns

    def evaluate(self, names: Mapping[str, Number]) -> Number:
        """The value of the expression with its free names taken from `names`."""
        return self._fn(names)

    def check_names(self, known: Collection[str]) -> None:
        """Raise ExpressionError for the first free name not in `known` (with a suggestion)."""
        for name in sorted(self.names - set(known), key=self._columns.__getitem__):
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise _error(self.text, self._columns[name], f"unknown name {name!r}{hint}")

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"


@functools.lru_cache(maxsize=4096)
def compile_expr(text: str) -> Expr:
    """Parse and check `text` once; raises ExpressionError naming the expression and column."""
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"expression longer than {MAX_LENGTH} characters: {text[:40]!r}...")
    # every whitespace character becomes one space, so columns still count characters of `text`
    flat = re.sub(r"\s", " ", text)
    source = flat.lstrip()
    indent = len(flat) - len(source)
    if not source:
        raise ExpressionError("empty expression")
    try:
        tree = ast.parse(source, mode="eval")
        compiler = _Compiler(text, source, indent)
        fn = compiler.compile(tree.body)
    except SyntaxError as e:
        raise _error(text, (e.offset or 1) + indent, e.msg) from None
    except (RecursionError, MemoryError):
        raise ExpressionError(f"expression {text[:40]!r}... is nested too deeply") from None
    return Expr(text, fn, compiler.columns)


def _error(text: str, column: int, message: str) -> ExpressionError:
    return ExpressionError(f"in expression {text!r} at column {column}: {message}")


class _Compiler:
    """Turns a whitelisted AST into nested closures (much faster to evaluate than re-walking the tree)."""

    def __init__(self, text: str, source: str, indent: int) -> None:
        self.text = text
        self.source = source.encode()
        self.indent = indent
        self.columns: dict[str, int] = {}

    def column(self, node: ast.AST) -> int:
        """The 1-based character column of a node (`ast` counts UTF-8 bytes)."""
        offset: int = getattr(node, "col_offset", 0)
        return len(self.source[:offset].decode(errors="ignore")) + 1 + self.indent

    def operator_column(self, node: ast.BinOp) -> int:
        """The column of a binary operator (`ast` keeps no position for it): after the left operand."""
        offset = node.left.end_col_offset or 0
        while offset < len(self.source) and self.source[offset : offset + 1] in (b" ", b")"):
            offset += 1
        return len(self.source[:offset].decode(errors="ignore")) + 1 + self.indent

    def error(self, node: ast.AST, message: str) -> ExpressionError:
        return _error(self.text, self.column(node), message)

    def compile(self, node: ast.expr) -> _Fn:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            what = _NODE_TEXT.get(type(node), type(node).__name__)
            raise self.error(node, f"{what} is not allowed")
        fn: _Fn = method(node)
        return fn

    def _Constant(self, node: ast.Constant) -> _Fn:
        value = node.value
        if not isinstance(value, int | float):  # bool is an int
            raise self.error(node, f"{type(value).__name__} literal {value!r} is not allowed (numbers only)")
        number: Number = value
        return lambda env: number

    def _Name(self, node: ast.Name) -> _Fn:
        name = node.id
        if name in CONSTANTS:
            value = CONSTANTS[name]
            return lambda env: value
        if name.startswith("__"):
            raise self.error(node, f"name {name!r} is not allowed")
        if name in FUNCTIONS:
            raise self.error(node, f"function {name!r} must be called")
        column = self.columns.setdefault(name, self.column(node))
        text = self.text

        def get(env: Mapping[str, Number]) -> Number:
            try:
                value = env[name]
            except KeyError:
                raise _error(text, column, f"unknown name {name!r}") from None
            if type(value) in (int, float, bool):
                return value
            return _coerce(text, column, name, value)

        return get

    def _UnaryOp(self, node: ast.UnaryOp) -> _Fn:
        operand = self.compile(node.operand)
        if isinstance(node.op, ast.USub):
            return lambda env: -operand(env)
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.Not):
            return lambda env: not operand(env)
        raise self.error(node, f"operator {_OPERATOR_TEXT.get(type(node.op), '?')} is not supported")

    def _BinOp(self, node: ast.BinOp) -> _Fn:
        left, right = self.compile(node.left), self.compile(node.right)
        op = type(node.op)
        if op is ast.Add:
            return lambda env: left(env) + right(env)
        if op is ast.Sub:
            return lambda env: left(env) - right(env)
        if op is ast.Mult:
            return lambda env: left(env) * right(env)
        if op in (ast.Div, ast.FloorDiv, ast.Mod):
            return self._division(node, op, left, right)
        if op is ast.Pow:
            return self._power(node, left, right)
        what = _OPERATOR_TEXT.get(op, op.__name__)
        raise _error(self.text, self.operator_column(node), f"operator {what} is not supported")

    def _division(self, node: ast.BinOp, op: type[ast.operator], left: _Fn, right: _Fn) -> _Fn:
        text, column = self.text, self.column(node.right)

        def divide(env: Mapping[str, Number]) -> Number:
            a, b = left(env), right(env)
            if b == 0:
                raise _error(text, column, "division by zero")
            if op is ast.FloorDiv:
                return a // b
            if not (isinstance(a, int) and isinstance(b, int)):
                return a / b if op is ast.Div else math.fmod(a, b)
            return _c_div(a, b) if op is ast.Div else a - b * _c_div(a, b)

        return divide

    def _power(self, node: ast.BinOp, left: _Fn, right: _Fn) -> _Fn:
        text, column = self.text, self.operator_column(node)

        def power(env: Mapping[str, Number]) -> Number:
            a, b = left(env), right(env)
            if abs(b) > MAX_EXPONENT:
                raise _error(text, column, f"exponent {b!r} is beyond ±{MAX_EXPONENT}")
            if a < 0 and not float(b).is_integer():
                raise _error(text, column, f"{a!r} ** {b!r} is not a real number")
            try:
                result: Number = a**b
            except (ZeroDivisionError, OverflowError) as e:
                raise _error(text, column, f"{a!r} ** {b!r}: {e}") from None
            if isinstance(result, int) and result.bit_length() > _MAX_INT_BITS:
                raise _error(text, column, f"{a!r} ** {b!r} is too large")
            return result

        return power

    def _BoolOp(self, node: ast.BoolOp) -> _Fn:
        parts = tuple(self.compile(v) for v in node.values)
        if isinstance(node.op, ast.And):

            def conj(env: Mapping[str, Number]) -> bool:
                return all(part(env) for part in parts)

            return conj

        def disj(env: Mapping[str, Number]) -> bool:
            return any(part(env) for part in parts)

        return disj

    def _Compare(self, node: ast.Compare) -> _Fn:
        tests: dict[type[ast.cmpop], Callable[[Number, Number], bool]] = {
            ast.Lt: lambda a, b: a < b,
            ast.LtE: lambda a, b: a <= b,
            ast.Gt: lambda a, b: a > b,
            ast.GtE: lambda a, b: a >= b,
            ast.Eq: lambda a, b: a == b,
            ast.NotEq: lambda a, b: a != b,
        }
        for op in node.ops:
            if type(op) not in tests:
                raise self.error(node, f"operator {_OPERATOR_TEXT.get(type(op), '?')} is not supported")
        first = self.compile(node.left)
        pairs = zip(node.ops, node.comparators, strict=True)
        chain = tuple((tests[type(op)], self.compile(c)) for op, c in pairs)

        def compare(env: Mapping[str, Number]) -> bool:
            a = first(env)
            for test, nxt in chain:
                b = nxt(env)
                if not test(a, b):
                    return False
                a = b
            return True

        return compare

    def _IfExp(self, node: ast.IfExp) -> _Fn:
        test, body, orelse = self.compile(node.test), self.compile(node.body), self.compile(node.orelse)
        return lambda env: body(env) if test(env) else orelse(env)

    def _Call(self, node: ast.Call) -> _Fn:
        if not isinstance(node.func, ast.Name):
            raise self.error(node, "only calls of functions by name are allowed")
        name = node.func.id
        if name not in FUNCTIONS:
            close = difflib.get_close_matches(name, list(FUNCTIONS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(FUNCTIONS)}"
            raise self.error(node, f"unknown function {name!r}{hint}")
        if node.keywords:
            raise self.error(node, f"{name}() takes no keyword arguments")
        impl, fewest, most = FUNCTIONS[name]
        if not fewest <= len(node.args) <= (most if most is not None else len(node.args)):
            count = str(fewest) if fewest == most else f"at least {fewest}"
            raise self.error(node, f"{name}() takes {count} argument(s), got {len(node.args)}")
        args = tuple(self.compile(a) for a in node.args)
        text, column = self.text, self.column(node)

        def call(env: Mapping[str, Number]) -> Number:
            values = [a(env) for a in args]
            try:
                return impl(*values)
            except (ValueError, ZeroDivisionError, OverflowError) as e:
                raise _error(text, column, str(e)) from None

        return call


def _coerce(text: str, column: int, name: str, value: object) -> Number:
    # numpy scalars and the like: turn them into plain numbers so C division rules still apply
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise _error(text, column, f"name {name!r} is {value!r}, not a number")
