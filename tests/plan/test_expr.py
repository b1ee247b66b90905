"""Column expressions: evaluated per partition exactly as pandas evaluates the same code."""

import pandas as pd
import pytest

from gpuframe.errors import ExpressionError, UnknownColumnError
from gpuframe.plan.expr import col, evaluate_mask

CASES = [
    (lambda a, b: a > 5, lambda d: d.a > 5),
    (lambda a, b: (a >= 2) & (b < 0.5), lambda d: (d.a >= 2) & (d.b < 0.5)),
    (lambda a, b: (a == 3) | ~(b <= 0.2), lambda d: (d.a == 3) | ~(d.b <= 0.2)),
    (lambda a, b: a != 4, lambda d: d.a != 4),
    (lambda a, b: 5 < a, lambda d: 5 < d.a),
]


@pytest.mark.parametrize("build, reference", CASES)
def test_comparisons_and_logic_match_pandas(data, build, reference):
    got = evaluate_mask(build(col("a"), col("b")), data)
    pd.testing.assert_series_equal(got, reference(data), check_names=False)


@pytest.mark.parametrize("expr, reference", [
    (col("a") * 2 + col("b") / 4 - 1, lambda d: d.a * 2 + d.b / 4 - 1),
    (col("a") // 3 % 2, lambda d: d.a // 3 % 2),
    (-col("a") ** 2, lambda d: -(d.a ** 2)),
    (1 - col("b"), lambda d: 1 - d.b),
    (abs(col("a")), lambda d: d.a.abs()),
    (col("f").fillna(0.0), lambda d: d.f.fillna(0.0)),
    (col("a").astype("float32"), lambda d: d.a.astype("float32")),
    (col("s").str.upper(), lambda d: d.s.str.upper()),
    (col("s").str.len(), lambda d: d.s.str.len()),
    (col("t").dt.year, lambda d: d.t.dt.year),
    (col("t").dt.day_of_week, lambda d: d.t.dt.day_of_week),
    (col("t").dt.quarter, lambda d: d.t.dt.quarter),
    (col("s").str.slice(0, 2), lambda d: d.s.str.slice(0, 2)),
    (col("s").str.slice(2), lambda d: d.s.str.slice(2)),
    (col("b").where(col("a") > 5, 0), lambda d: d.b.where(d.a > 5, 0)),
    (col("a").where(col("s").str.startswith("b"), col("a") * 10),
     lambda d: d.a.where(d.s.str.startswith("b").fillna(False).astype(bool), d.a * 10)),
    (col("f").where(col("m") == 2, -1.0),
     lambda d: d.f.where((d.m == 2).fillna(False).astype(bool), -1.0)),
])
def test_arithmetic_strings_and_dates_match_pandas(data, expr, reference):
    pd.testing.assert_series_equal(expr.evaluate(data), reference(data), check_names=False)


@pytest.mark.parametrize("expr, reference", [
    (col("a").isin([1, 2, 3]), lambda d: d.a.isin([1, 2, 3])),
    (col("b").between(0.2, 0.4), lambda d: d.b.between(0.2, 0.4)),
    (col("a").between(0, 5, inclusive="neither"), lambda d: d.a.between(0, 5, "neither")),
    (col("f").isna(), lambda d: d.f.isna()),
    (col("m").notna(), lambda d: d.m.notna()),
    (col("s").str.startswith("ba"), lambda d: d.s.str.startswith("ba").fillna(False)),
    (col("s").str.contains("rr", regex=False),
     lambda d: d.s.str.contains("rr", regex=False).fillna(False)),
    (col("s").str.endswith("e"), lambda d: d.s.str.endswith("e").fillna(False)),
    (col("m") == 2, lambda d: (d.m == 2).fillna(False)),
])
def test_masks_keep_no_row_where_the_condition_is_missing(data, expr, reference):
    mask = evaluate_mask(expr, data)
    assert mask.dtype == bool
    pd.testing.assert_series_equal(mask, reference(data).astype(bool), check_names=False)


def test_columns_rename_and_structure():
    expr = (col("a") > 1) & col("s").str.startswith("x") | col("b").isin([1.5])
    assert expr.columns() == {"a", "s", "b"}
    renamed = expr.rename({"a": "x", "s": "y"})
    assert renamed.columns() == {"x", "y", "b"}
    assert renamed.key() != expr.key()
    assert renamed.rename({"x": "a", "y": "s"}).key() == expr.key()
    assert repr(col("a") > 1) == "(a > 1)"
    case = col("a").where(col("s") == "x", col("b"))
    assert case.columns() == {"a", "s", "b"}
    assert case.rename({"s": "t"}).columns() == {"a", "t", "b"}
    assert case.key() != col("a").where(col("s") == "y", col("b")).key()
    assert repr(col("s").str.slice(0, 2)) == "s.str.slice(0, 2)"


def test_misuse_is_refused_with_a_clear_error(data):
    with pytest.raises(ExpressionError, match="combine conditions with &"):
        bool(col("a") > 1)
    with pytest.raises(ExpressionError, match="not booleans"):
        evaluate_mask(col("a") + 1, data)
    with pytest.raises(UnknownColumnError, match="'nope' is not among"):
        col("nope").evaluate(data)
    with pytest.raises(ExpressionError, match="isin takes a collection"):
        col("s").isin("abc")
    with pytest.raises(AttributeError, match="no date part 'century'"):
        col("t").dt.century  # noqa: B018
    with pytest.raises(ExpressionError, match="inclusive="):
        col("a").between(1, 2, inclusive="both ends")
    with pytest.raises(ExpressionError, match="integer bounds"):
        col("s").str.slice("1")
    with pytest.raises(ExpressionError, match="not booleans"):
        col("a").where(col("b"), 0).evaluate(data)
