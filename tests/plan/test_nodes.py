"""Plan nodes' schemas: columns selected by position give what pandas' selection by label gives,
and what filters and assignments find of a schema is found once."""

import pandas as pd
import pyarrow as pa
import pytest

from gpuframe.errors import UnknownColumnError
from gpuframe.plan.nodes import selected


def test_selected_columns_are_pandas_own_selection():
    meta = pd.DataFrame({"a": pd.Series(dtype="int64"), "s": pd.Series(dtype="str"),
                         "d": pd.Series(dtype=pd.ArrowDtype(pa.decimal128(15, 2))),
                         "t": pd.Series(dtype="datetime64[ns, UTC]")})
    for names in (["t", "a"], ["s"], ["a", "s", "d", "t"], []):
        pd.testing.assert_frame_equal(selected(meta, names, "select"), meta[names])
    twice = pd.DataFrame([[1, 2, 3]], columns=["a", "a", "b"])  # pandas keeps both a's
    pd.testing.assert_frame_equal(selected(twice, ["a"], "select"), twice[["a"]])
    with pytest.raises(UnknownColumnError, match=r"select: column\(s\) \['x'\]"):
        selected(meta, ["a", "x"], "select")


def test_a_filter_or_assignment_rebuilt_on_the_same_schema_evaluates_nothing_again(
        monkeypatch):
    """The optimizer rebuilds filters and assignments at each rewrite of their inputs: what
    their expressions give on an input's schema is found once per schema."""
    from gpuframe.errors import ExpressionError
    from gpuframe.plan import nodes
    from gpuframe.plan.expr import col

    evaluated = []
    real_mask, real_assign = nodes.evaluate_mask, nodes.apply_assign
    monkeypatch.setattr(nodes, "evaluate_mask",
                        lambda *args: evaluated.append("mask") or real_mask(*args))
    monkeypatch.setattr(nodes, "apply_assign",
                        lambda *args: evaluated.append("assign") or real_assign(*args))
    frame = pd.DataFrame({"a": [1, 2], "s": ["x", "y"]})
    leaf = nodes.FromPandas(frame)
    # a name and a value no other test's schema or expression has: found here first
    assigned = [(f"b{id(evaluated)}", col("a") * 2.5)]
    for _ in range(3):
        kept = nodes.Filter(leaf, col("a") > float(id(evaluated)))
        made = nodes.Assign(leaf, tuple(assigned))
    assert evaluated == ["mask", "assign"]
    assert list(made.meta.columns) == ["a", "s", assigned[0][0]]
    assert made.meta[assigned[0][0]].dtype == "float64" and kept.meta is leaf.meta
    wider = nodes.FromPandas(frame.astype({"a": "float32"}))
    assert nodes.Assign(wider, tuple(assigned)).meta[assigned[0][0]].dtype == "float32"
    for _ in range(2):  # a failure is found again each time
        with pytest.raises(ExpressionError):
            nodes.Filter(leaf, col("a") + 1)
