"""The safe expression evaluator: C arithmetic, functions, names, and the errors it must give."""

from __future__ import annotations

import numpy as np
import pytest

from cutune.errors import ExpressionError
from cutune.template.expr import compile_expr


def ev(text: str, **names: int | float | bool) -> int | float | bool:
    return compile_expr(text).evaluate(names)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("2 ** 3 ** 2", 512),
        ("-2 ** 2", -4),
        ("(1000 + 255) / 256", 4),
        ("-7 / 2", -3),  # C truncates toward zero
        ("7 / -2", -3),
        ("-7 // 2", -4),  # floor division stays available
        ("-7 % 2", -1),  # C: sign of the dividend
        ("7 % -2", 1),
        ("7.0 / 2", 3.5),
        ("7 / 2.0", 3.5),
        ("7.5 % 2", 1.5),
        ("2 ** -1", 0.5),
        ("1 < 2 <= 2 < 3", True),
        ("1 < 3 < 2", False),
        ("3 == 3 != 4", True),
        ("not 0", True),
        ("1 and 0", False),
        ("0 or 5", True),
        ("10 if 1 > 2 else 20", 20),
        ("true + true", 2),
        ("1e-3 * 1000", 1.0),
        ("sizeof_bfloat16 * 8", 16),
        ("16 / sizeof_float32", 4),
        ("min(3, 1, 2) + max(4, 5)", 6),
        ("abs(-3)", 3),
        ("ceil_div(1000, 256)", 4),
        ("cdiv(1024, 256)", 4),
        ("round_up(1000, 256)", 1024),
        ("log2(1024)", 10),
        ("log2(8.0)", 3.0),
        ("is_pow2(64) and not is_pow2(96) and not is_pow2(0)", True),
        ("int(-3.7)", -3),
        ("float(3) / 2", 1.5),
    ],
)
def test_values(text: str, value: object) -> None:
    result = ev(text)
    assert result == value and type(result) is type(value), (text, result)


def test_names_are_free_variables_and_evaluate_many_times() -> None:
    expr = compile_expr("ceil_div(num_tokens * num_heads * (head_size / (16 / sizeof_bfloat16)), NUM_THREADS)")
    assert expr.names == {"num_tokens", "num_heads", "head_size", "NUM_THREADS"}
    base = {"num_tokens": 512, "num_heads": 32, "head_size": 128}
    assert [expr.evaluate({**base, "NUM_THREADS": t}) for t in (64, 128, 256)] == [4096, 2048, 1024]
    assert compile_expr("min(d, BLOCK)") is compile_expr("min(d, BLOCK)")  # parsed once
    assert ev("n / 4", n=np.int64(10)) == 2  # numpy scalars keep C integer division


def test_short_circuit_avoids_division_by_zero() -> None:
    assert ev("n == 0 or 10 / n > 1", n=0) is True
    assert ev("n != 0 and 10 / n > 1", n=0) is False
    assert ev("1 if n == 0 else 10 / n", n=0) == 1


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("x.__class__", "column 1: attribute access is not allowed"),
        ("(lambda: 1)()", "only calls of functions by name are allowed"),
        ("lambda: 1", "lambda is not allowed"),
        ("[i for i in range(3)]", "a comprehension is not allowed"),
        ("sum(i for i in x)", "unknown function 'sum'"),
        ("__import__('os')", "unknown function '__import__'"),
        ("__builtins__", "name '__builtins__' is not allowed"),
        ("x[0]", "indexing is not allowed"),
        ("'abc'", "str literal 'abc' is not allowed"),
        ("(1, 2)", "a tuple is not allowed"),
        ("(y := 3)", "assignment (:=) is not allowed"),
        ("f'{x}'", "an f-string is not allowed"),
        ("None", "NoneType literal None is not allowed"),
        ("2 ^ 3", "column 3: operator ^ (use ** for powers) is not supported"),
        ("x << 2", "column 3: operator << is not supported"),
        ("~x", "operator ~ is not supported"),
        ("x in 3", "operator in is not supported"),
        ("n +* 2", "in expression 'n +* 2' at column 4: invalid syntax"),
        ("", "empty expression"),
        ("mni(1, 2)", "unknown function 'mni'; did you mean 'min'?"),
        ("min(1)", "min() takes at least 2 argument(s), got 1"),
        ("ceil_div(1, 2, 3)", "ceil_div() takes 2 argument(s), got 3"),
        ("max(a=1, b=2)", "max() takes no keyword arguments"),
        ("min", "function 'min' must be called"),
        ("1" + "+1" * 3000, "longer than 2000 characters"),
    ],
)
def test_rejected_at_compile(text: str, fragment: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expr(text)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("text", "names", "fragment"),
    [
        ("n / 0", {"n": 1}, "in expression 'n / 0' at column 5: division by zero"),
        ("n // (m - m)", {"n": 1, "m": 2}, "at column 7: division by zero"),
        ("n % 0", {"n": 1}, "division by zero"),
        ("1.0 / 0.0", {}, "division by zero"),
        ("ceil_div(n, 0)", {"n": 1}, "ceil_div() by zero"),
        ("round_up(n, 0)", {"n": 1}, "round_up() to a multiple of zero"),
        ("ceil_div(1.5, 2)", {}, "ceil_div() takes integers, got 1.5"),
        ("log2(0)", {}, "log2() of 0, which is not positive"),
        ("2 ** n", {"n": 65}, "exponent 65 is beyond ±64"),
        ("(-8) ** 0.5", {}, "is not a real number"),
        ("0 ** -1", {}, "0 ** -1"),
        ("((2 ** 64) ** 64) ** 2", {}, "is too large"),
        ("a + missing", {"a": 1}, "in expression 'a + missing' at column 5: unknown name 'missing'"),
        ("a * 2", {"a": "wide"}, "name 'a' is 'wide', not a number"),
        ("int(x)", {"x": float("inf")}, "in expression 'int(x)' at column 1"),
    ],
)
def test_rejected_at_evaluation(text: str, names: dict[str, object], fragment: str) -> None:
    expr = compile_expr(text)
    with pytest.raises(ExpressionError) as caught:
        expr.evaluate(names)  # type: ignore[arg-type]
    assert fragment in str(caught.value)


def test_check_names_reports_first_unknown_with_suggestion() -> None:
    expr = compile_expr("min(num_tokens, BLOK) + other")
    expr.check_names({"num_tokens", "BLOK", "other"})
    with pytest.raises(ExpressionError, match=r"at column 17: unknown name 'BLOK'; did you mean 'BLOCK'\?"):
        expr.check_names({"num_tokens", "BLOCK"})


def test_columns_count_characters_of_the_original_text() -> None:
    with pytest.raises(ExpressionError, match="at column 7: unknown name 'q'"):
        compile_expr("  é + q").evaluate({"é": 1})
    with pytest.raises(ExpressionError, match="at column 10: division by zero"):
        compile_expr("(1 +\n 0)/0").evaluate({})
