"""The optimizer on plans built by hand: filters and projections land as low as they can, and
every rewritten plan keeps its columns, order and dtypes."""

import numpy as np
import pandas as pd
import pytest

from gpuframe.config import JoinOptions
from gpuframe.io.formats import format_for
from gpuframe.io.storage.base import storage_options
from gpuframe.plan.expr import col
from gpuframe.plan.nodes import (
    Assign,
    AsType,
    Filter,
    FromPandas,
    Join,
    MapPartitions,
    Node,
    ReadSource,
    Rename,
    Scan,
    Select,
)
from gpuframe.plan.optimize import optimize


def scan(**dtypes) -> Scan:
    meta = pd.DataFrame({name: pd.Series([], dtype=dtype) for name, dtype in dtypes.items()})
    return Scan(ReadSource("data/", format_for("parquet"), storage_options(), None, meta,
                           1000, 8000))


def nodes(plan: Node) -> list[Node]:
    found = [plan]
    for child in plan.children:
        found += nodes(child)
    return found


def scans(plan: Node) -> list[Scan]:
    return [n for n in nodes(plan) if isinstance(n, Scan)]


def join(left, right, on="k", how="inner", **kwargs):
    return Join.of(left, right, on, None, None, how, ("_x", "_y"), JoinOptions(**kwargs),
                   "pandas")


ORDERS = dict(k="int64", amount="float64", day="int32", note="str")
CUSTOMERS = dict(k="int64", name="str", segment="int16", note="str")


def test_a_filter_after_a_join_lands_in_the_read_of_its_side():
    plan = join(scan(**ORDERS), scan(**CUSTOMERS))
    plan = Filter(plan, (col("amount") > 10) & (col("segment") == 3))
    optimized = optimize(plan)
    orders, customers = scans(optimized)
    assert orders.filters == [[("amount", ">", 10)]]
    assert customers.filters == [[("segment", "==", 3)]]
    assert not any(isinstance(n, Filter) for n in nodes(optimized))
    assert optimized.columns == plan.columns
    assert optimized.meta.dtypes.equals(plan.meta.dtypes)


def test_filters_stay_above_an_outer_join_and_the_side_a_join_may_fill():
    for how, pushed in (("outer", (False, False)), ("left", (True, False)),
                        ("right", (False, True)), ("leftsemi", (True, False))):
        plan = join(scan(**ORDERS), scan(**CUSTOMERS), how=how)
        condition = col("amount") > 1
        if how != "leftsemi":
            condition = condition & (col("segment") == 2)
        optimized = optimize(Filter(plan, condition))
        landed = tuple(s.filters is not None for s in scans(optimized))
        assert landed == pushed, how
        assert optimized.columns == plan.columns


def test_suffixed_columns_are_traced_to_their_side():
    plan = Filter(join(scan(**ORDERS), scan(**CUSTOMERS)), col("note_y") == "vip")
    orders, customers = scans(optimize(plan))
    assert orders.filters is None and customers.filters == [[("note", "==", "vip")]]


def test_conditions_a_reader_cannot_apply_stay_as_a_filter_above_it():
    plan = Filter(scan(**ORDERS), (col("amount") > 1) & (col("note").str.startswith("x"))
                  & (col("day") != 3))
    optimized = optimize(plan)
    (only,) = scans(optimized)
    assert only.filters == [[("amount", ">", 1)]]
    remaining = [n for n in nodes(optimized) if isinstance(n, Filter)]
    assert len(remaining) == 1
    assert remaining[0].predicate.columns() == {"note", "day"}


def test_filters_cross_renames_selects_and_assignments_they_do_not_read():
    base = scan(**ORDERS)
    plan = Rename(Select(base, ("k", "amount", "day")), {"amount": "value"})
    plan = Assign(plan, (("double", col("value") * 2),))
    plan = Filter(plan, (col("value") > 5) & (col("double") < 100))
    optimized = optimize(plan)
    (only,) = scans(optimized)
    assert only.filters == [[("amount", ">", 5)]]
    assert [n.predicate.columns() for n in nodes(optimized) if isinstance(n, Filter)] == \
        [{"double"}]
    assert optimized.columns == plan.columns


def test_a_cast_column_is_not_filtered_before_its_cast():
    plan = Filter(AsType(scan(**ORDERS), {"amount": "int64"}), col("amount") > 5)
    optimized = optimize(plan)
    assert scans(optimized)[0].filters is None
    assert isinstance(optimized, Filter) or any(isinstance(n, Filter) for n in nodes(optimized))


def test_filters_combine_with_the_readers_own_as_alternatives():
    base = Scan(scan(**ORDERS).read, None, [[("day", "==", 1)], [("day", "==", 2)]])
    optimized = optimize(Filter(base, col("amount") > 3))
    assert scans(optimized)[0].filters == [[("day", "==", 1), ("amount", ">", 3)],
                                          [("day", "==", 2), ("amount", ">", 3)]]


def test_only_the_columns_used_are_read():
    plan = join(scan(**ORDERS), scan(**CUSTOMERS))
    plan = Select(Filter(plan, col("day") > 3), ("k", "amount", "name"))
    optimized = optimize(plan)
    orders, customers = scans(optimized)
    assert orders.read_columns == ("k", "amount")  # the reader reads "day" for its filter
    assert orders.filters == [[("day", ">", 3)]]
    assert customers.read_columns == ("k", "name")
    assert optimized.columns == ["k", "amount", "name"]


def test_clashing_names_keep_their_suffixes():
    plan = Select(join(scan(**ORDERS), scan(**CUSTOMERS)), ("k", "note_y"))
    optimized = optimize(plan)
    orders, customers = scans(optimized)
    assert "note" in orders.read_columns and "note" in customers.read_columns
    assert optimized.columns == ["k", "note_y"]


def test_semi_joins_read_only_the_keys_of_the_right_side():
    plan = join(scan(**ORDERS), scan(**CUSTOMERS), how="leftanti")
    optimized = optimize(Select(plan, ("amount",)))
    orders, customers = scans(optimized)
    assert customers.read_columns == ("k",)
    assert orders.read_columns == ("k", "amount")


def test_assignments_nobody_reads_are_dropped_and_chains_are_followed():
    plan = Assign(scan(**ORDERS), (("a2", col("amount") * 2), ("a4", col("a2") * 2),
                                   ("unused", col("note").str.len())))
    optimized = optimize(Select(plan, ("a4",)))
    assigns = [n for n in nodes(optimized) if isinstance(n, Assign)]
    assert [name for name, _ in assigns[0].items] == ["a2", "a4"]
    assert scans(optimized)[0].read_columns == ("amount",)


def test_a_read_of_no_needed_column_still_reads_one():
    optimized = optimize(Select(Assign(scan(**ORDERS), (("one", col("k") * 0 + 1),)),
                                ("one",)))
    assert scans(optimized)[0].read_columns == ("k",)


def test_pandas_leaves_are_sliced_and_opaque_functions_get_every_column():
    data = pd.DataFrame({"a": np.arange(4), "b": np.arange(4.0), "c": list("wxyz")})
    optimized = optimize(Select(FromPandas(data), ("c",)))
    (leaf,) = [n for n in nodes(optimized) if isinstance(n, FromPandas)]
    assert list(leaf.data.columns) == ["c"]
    mapped = MapPartitions(FromPandas(data), lambda frame: frame.assign(d=frame.a + 1))
    optimized = optimize(Filter(Select(mapped, ("d",)), col("d") > 1))
    (leaf,) = [n for n in nodes(optimized) if isinstance(n, FromPandas)]
    assert list(leaf.data.columns) == ["a", "b", "c"]
    assert optimized.columns == ["d"]


@pytest.mark.parametrize("how", ["inner", "left", "right", "outer", "leftsemi", "leftanti"])
def test_every_rewrite_keeps_the_schema(how):
    plan = join(Filter(scan(**ORDERS), col("amount") > 0), Rename(scan(**CUSTOMERS),
                                                                  {"name": "who"}), how=how)
    top = Filter(plan, col("k") > 10)
    optimized = optimize(top)
    assert optimized.columns == top.columns
    assert optimized.meta.dtypes.equals(top.meta.dtypes)


def test_a_groupby_two_parents_read_is_rewritten_once_with_every_column():
    """Sums compared with their own maximum must be the same sums: the groupby that both the
    maximum and the comparison read runs once (a GPU adds floats in no fixed order), though
    one parent wants fewer columns and the other pushes a condition towards it."""
    from gpuframe.plan.aggregate import Aggregation, GroupBy

    sums = GroupBy(scan(**ORDERS), ("k",), (Aggregation("total", "amount", "sum"),
                                            Aggregation("days", "day", "max")))
    top = GroupBy(Select(sums, ("total",)), (), (Aggregation("most", "total", "max"),))
    crossed = Join.of(sums, top, None, None, None, "cross", ("_x", "_y"), JoinOptions(),
                      "pandas")
    plan = Filter(Filter(crossed, col("total") == col("most")), col("k") > 3)
    optimized = optimize(plan)
    groupbys = {id(n): n for n in nodes(optimized) if isinstance(n, GroupBy) and n.keys}
    assert len(groupbys) == 1
    [shared] = groupbys.values()
    assert shared.columns == ["k", "total", "days"]
    assert not any(isinstance(n, Filter) for n in nodes(shared))


def test_a_read_two_parents_read_is_still_pruned_per_parent():
    orders = scan(**ORDERS)
    left = Select(Filter(orders, col("amount") > 10), ("k", "amount"))
    right = Select(orders, ("k", "note"))
    optimized = optimize(join(left, right))
    assert sorted(s.columns for s in scans(optimized)) == [["k", "amount"], ["k", "note"]]


def test_a_shared_join_computes_the_columns_its_parents_ask_for_together():
    """q2's shape: a join that an aggregate and a join above both read runs once, with the
    columns either asks for and no others: its reads skip the notes no one reads."""
    from gpuframe.plan.aggregate import Aggregation, GroupBy

    offers = join(scan(**ORDERS), scan(**CUSTOMERS))
    cheapest = GroupBy(Select(offers, ("k", "amount")), ("k",),
                       (Aggregation("least", "amount", "min"),))
    best = join(offers, cheapest)
    plan = Select(Filter(best, col("amount") == col("least")), ("name", "day"))
    optimized = optimize(plan)
    assert optimized.columns == ["name", "day"]
    joins = {id(n): n for n in nodes(optimized) if isinstance(n, Join)
             and not isinstance(n.right, GroupBy)}
    assert len(joins) == 1  # the shared one, rewritten once
    reads = {id(s): s.columns for s in scans(optimized)}  # the shared join's, once
    assert sorted(reads.values()) == [["k", "amount", "day"], ["k", "name"]]


def test_a_join_under_a_shared_assignment_runs_once():
    """q11's shape: a joined frame with a column assigned, aggregated twice (by key, and in
    total): the join under the assignment is reached by two paths, and runs once, with the
    columns both aggregates ask for, where pruning each path alone would give two joins."""
    from gpuframe.plan.aggregate import Aggregation, GroupBy

    stock = Assign(join(scan(**ORDERS), scan(**CUSTOMERS)),
                   (("value", col("amount") * col("segment")),))
    by_key = GroupBy(stock, ("k",), (Aggregation("value", "value", "sum"),))
    total = GroupBy(stock, (), (Aggregation("total", "value", "sum"),))
    crossed = Join.of(by_key, total, None, None, None, "cross", ("_x", "_y"), JoinOptions(),
                      "pandas")
    optimized = optimize(Filter(crossed, col("value") > col("total") * 0.01))
    joins = {id(n): n for n in nodes(optimized) if isinstance(n, Join) and n.how == "inner"}
    assert len(joins) == 1
    [shared] = joins.values()
    assert sorted(shared.columns) == ["amount", "k", "segment"]


def test_a_long_chain_of_shared_joins_reads_only_the_columns_used():
    """Each shared join's columns settle a rewrite after those of the shared join above it: a
    chain of eight under a shared assignment still reads no note, where a fixed number of
    rewrites would stop short and read every column."""
    from gpuframe.plan.aggregate import Aggregation, GroupBy

    frame = scan(k="int64", a0="float64", note0="str")
    for i in range(1, 8):
        frame = join(frame, scan(k="int64", **{f"a{i}": "float64", f"note{i}": "str"}))
    stock = Assign(frame, (("value", col("a0") * col("a7")),))
    by_key = GroupBy(stock, ("k",), (Aggregation("value", "value", "sum"),))
    total = GroupBy(stock, (), (Aggregation("total", "value", "sum"),))
    optimized = optimize(Join.of(by_key, total, None, None, None, "cross", ("_x", "_y"),
                                 JoinOptions(), "pandas"))
    assert len({id(n) for n in nodes(optimized) if isinstance(n, Join) and n.how == "inner"}) == 7
    assert sorted({tuple(s.columns) for s in scans(optimized)}) == [
        ("k",), ("k", "a0"), ("k", "a7")]

