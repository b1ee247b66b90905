"""A dataset a plan reads in several places is read once where the estimates say that reads
less: each parent keeps its own rows and columns of the one read, and the answers are pandas'."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from test_optimize import ORDERS, join, nodes, scan

import gpuframe
from gpuframe.plan.aggregate import Aggregation, GroupBy
from gpuframe.plan.expr import col
from gpuframe.plan.nodes import Filter, Scan, Select
from gpuframe.plan.optimize import optimize


def distinct_scans(plan) -> list[Scan]:
    return list({id(n): n for n in nodes(plan) if isinstance(n, Scan)}.values())


def test_a_table_read_in_two_places_for_other_columns_is_read_once():
    orders = scan(**ORDERS)
    totals = GroupBy(Select(orders, ("k", "amount")), ("k",),
                     (Aggregation("total", "amount", "sum"),))
    plan = join(Select(orders, ("k", "note")), totals)
    optimized = optimize(plan)
    [read] = distinct_scans(optimized)
    assert read.columns == ["k", "amount", "note"]
    assert read.filters is None
    assert not any(isinstance(n, Filter) for n in nodes(optimized))
    assert optimized.columns == plan.columns
    assert optimized.meta.dtypes.equals(plan.meta.dtypes)


def test_a_read_of_every_row_serves_one_that_filters_its_own_rows_from_it():
    orders = scan(**ORDERS)
    positive = Select(Filter(orders, col("amount") > 10), ("k", "amount"))
    optimized = optimize(join(positive, Select(orders, ("k", "amount", "note")), on="k"))
    [read] = distinct_scans(optimized)
    assert read.filters is None
    assert read.columns == ["k", "amount", "note"]
    [kept] = [n for n in nodes(optimized) if isinstance(n, Filter)]
    assert kept.predicate.text() == "(amount > 10)"
    assert kept.child is read


def test_reads_filtered_alike_share_one_read_with_their_filters():
    orders = scan(**ORDERS)
    recent = Filter(orders, col("day") >= 20)
    plan = join(Select(recent, ("k", "amount")), Select(recent, ("k", "note")))
    optimized = optimize(plan)
    [read] = distinct_scans(optimized)
    assert read.filters == [[("day", ">=", 20)]]
    assert not any(isinstance(n, Filter) for n in nodes(optimized))


def test_reads_that_skip_rows_otherwise_are_read_apart():
    """Neither read keeps every row: one read of both would fetch the row groups each skips."""
    orders = scan(**ORDERS)
    first = Select(Filter(orders, col("day") == 1), ("k", "amount"))
    second = Select(Filter(orders, col("day") == 2), ("k", "amount"))
    reads = distinct_scans(optimize(join(first, second)))
    assert sorted(s.filters for s in reads) == [[[("day", "==", 1)]], [[("day", "==", 2)]]]


def test_a_read_of_every_row_is_not_widened_to_the_columns_of_another():
    orders = scan(**ORDERS)
    positive = Select(Filter(orders, col("amount") > 10), ("k", "amount", "note"))
    reads = distinct_scans(optimize(join(positive, Select(orders, ("k", "day")), on="k")))
    assert sorted(s.columns for s in reads) == [["k", "amount", "note"], ["k", "day"]]


def test_a_selective_read_of_many_columns_is_not_widened_to_every_row():
    orders = scan(**ORDERS)
    few = Filter(orders, col("day") == 3)  # every column, a tenth of the rows
    plan = join(few, Select(orders, ("k",)), on="k")
    reads = distinct_scans(optimize(plan))
    assert sorted((s.columns, s.filters) for s in reads) == [
        (["k"], None), (["k", "amount", "day", "note"], [[("day", "==", 3)]])]


def test_a_read_whose_filters_no_condition_keeps_alike_is_left_alone():
    """A reader's ``!=`` drops null rows that pandas' keeps: no filter above a read of every
    row could give that read's rows, so it reads on its own."""
    orders = scan(**ORDERS)
    unlike = Scan(orders.read, ("k", "note"), [[("note", "!=", "x")]])
    plan = join(unlike, Select(orders, ("k", "amount", "note")))
    reads = distinct_scans(optimize(plan))
    assert len(reads) == 2


def test_a_query_that_reads_a_table_twice_reads_it_once_and_answers_as_pandas(engine,
                                                                               tmp_path):
    rng = np.random.default_rng(3)
    n = 4000
    customers = pd.DataFrame({
        "key": np.arange(n),
        "phone": pd.array([f"{c:02d}-{i:06d}" for c, i in zip(rng.integers(10, 40, n),
                                                                  range(n))], dtype="str"),
        "balance": rng.normal(10, 50, n),
        "segment": rng.integers(0, 5, n),
    })
    pq.write_table(pa.Table.from_pandas(customers, preserve_index=False),
                   tmp_path / "customers.parquet", row_group_size=500)
    frame = gpuframe.read_parquet(str(tmp_path / "customers.parquet"))
    coded = frame.assign(code=frame.phone.str.slice(0, 2))
    coded = coded[coded.code.isin(["13", "31", "23"])]
    average = coded[coded.balance > 0.0].agg(mean=("balance", "mean"))
    rich = coded.merge(average, how="cross")
    rich = rich[rich.balance > rich["mean"]]
    result = rich.groupby("segment", as_index=False).agg(n=("key", "size"),
                                                         total=("balance", "sum"))
    got = result.to_pandas().sort_values("segment").reset_index(drop=True)

    expected_coded = customers.assign(code=customers.phone.str.slice(0, 2))
    expected_coded = expected_coded[expected_coded.code.isin(["13", "31", "23"])]
    mean = expected_coded[expected_coded.balance > 0.0].balance.mean()
    expected = (expected_coded[expected_coded.balance > mean]
                .groupby("segment", as_index=False).agg(n=("key", "size"),
                                                        total=("balance", "sum")))
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    reads = distinct_scans(optimize(result._plan))
    assert len(reads) == 1
    assert reads[0].columns == ["key", "phone", "balance", "segment"]
