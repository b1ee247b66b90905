"""What a groupby's tasks run: partials made, merged and finished on plain frames."""

import pandas as pd

from gpuframe.operators import groupby_tasks as operator
from gpuframe.plan.aggregate import Aggregation, GroupBy
from gpuframe.plan.nodes import FromPandas


def test_a_bucket_of_every_component_makes_no_empty_partials(monkeypatch):
    """A shuffle task makes the partials of no rows (a groupby of an empty frame, a device's
    fixed cost on a GPU) only for a component that got no rows."""
    data = pd.DataFrame({"k": [1, 2, 1, 3, 2, 1], "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                         "v": [7, 7, 8, 9, 9, 9]})
    aggregations = (Aggregation("total", "x", "sum"), Aggregation("kinds", "v", "nunique"))
    meta = GroupBy(FromPandas(data), ("k",), aggregations).meta
    partial = operator.Partial(("k",), {}, aggregations, True, False, data.head(0), meta,
                               "pandas")
    halves = [operator.partial_aggregate(half, partial) for half in (data[:3], data[3:])]
    expected = data.groupby("k", as_index=False).agg(total=("x", "sum"), kinds=("v", "nunique"))
    made = []
    real = operator.empty_partials
    monkeypatch.setattr(operator, "empty_partials", lambda p: made.append(p) or real(p))

    whole = operator.finish_bucket([[h[c] for h in halves] for c in range(2)], partial)
    pd.testing.assert_frame_equal(whole.sort_values("k", ignore_index=True), expected,
                                  check_dtype=False)
    assert made == []
    nothing = operator.finish_bucket([[], []], partial)
    assert len(made) == 1
    assert len(nothing) == 0 and list(nothing.columns) == ["k", "total", "kinds"]
