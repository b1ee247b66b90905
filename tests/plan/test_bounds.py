"""rows_at_most and values_at_most: bounds that never guess, where the plan knows one."""

from __future__ import annotations

import datetime

import pandas as pd

from gpuframe.config import JoinOptions
from gpuframe.io.formats import format_for
from gpuframe.io.storage.base import storage_options
from gpuframe.plan.aggregate import Aggregation, GroupBy
from gpuframe.plan.bounds import groups_at_most, rows_at_most, unique_on, values_at_most
from gpuframe.plan.concat import Concat
from gpuframe.plan.distinct import Distinct
from gpuframe.plan.explain import unsampled_broadcast
from gpuframe.plan.expr import col
from gpuframe.plan.nodes import (
    Assign,
    Filter,
    FromPandas,
    Join,
    MapPartitions,
    ReadSource,
    Rename,
    Scan,
    Select,
)
from gpuframe.plan.sort import SortKeys
from gpuframe.plan.topk import TopK

META = pd.DataFrame({"k": pd.Series([], dtype="int64"), "amount": pd.Series([], dtype="float64")})
SMALL = FromPandas(pd.DataFrame({"k": range(30), "v": range(30)}))


def orders_read() -> Scan:
    """A read of 1000 rows by its files' metadata."""
    return Scan(ReadSource("data/", format_for("parquet"), storage_options(), None, META,
                           1000, 16000))


def join(left, right, how="inner", **options):
    return Join.of(left, right, "k", None, None, how, ("_x", "_y"), JoinOptions(**options),
                   "pandas")


def test_a_read_is_bounded_by_its_rows_whatever_filters_and_narrow_steps_keep():
    orders = orders_read()
    narrowed = Assign(Select(Filter(orders, col("amount") > 3), ("k", "amount")),
                      (("twice", col("amount") * 2),))
    assert rows_at_most(orders) == rows_at_most(narrowed) == 1000
    assert rows_at_most(GroupBy(narrowed, ("k",), (Aggregation("t", "amount", "sum"),))) == 1000
    assert rows_at_most(GroupBy(narrowed, (), (Aggregation("t", "amount", "sum"),))) == 1
    assert rows_at_most(TopK(orders, 7, SortKeys.of(META, "amount", True, "last", "top-k"))) == 7
    assert rows_at_most(Concat((orders, SMALL), "pandas")) == 1030


def test_joins_are_bounded_by_their_sides_bounds():
    """One side's rows for a semi or anti join; else at most every pair of rows matched, or
    each row of one side once where the other is unique on the keys, plus the unmatched rows
    kept."""
    orders = orders_read()
    assert rows_at_most(join(orders, SMALL, "leftsemi")) == 1000
    assert rows_at_most(join(SMALL, orders, "left_anti")) == 30
    expected = {"inner": 30_000, "left": 31_000, "right": 30_030, "outer": 31_030}
    for how, bound in expected.items():
        assert rows_at_most(join(orders, SMALL, how)) == bound
    assert rows_at_most(Join.of(orders, SMALL, None, None, None, "cross", ("_x", "_y"),
                                JoinOptions(), "pandas")) == 30_000
    totals = GroupBy(orders, ("k",), (Aggregation("t", "amount", "sum"),))  # unique on k
    assert rows_at_most(join(SMALL, totals)) == 30
    assert rows_at_most(join(totals, SMALL, "left")) == 30 + 1000  # matched, unmatched left
    assert rows_at_most(join(orders, MapPartitions(SMALL, lambda frame: frame))) is None
    assert rows_at_most(MapPartitions(SMALL, lambda frame: frame)) is None


def test_a_join_copies_a_bounded_side_it_may_copy_unsampled():
    orders = orders_read()
    assert unsampled_broadcast(join(orders, SMALL)) == "right"
    assert unsampled_broadcast(join(SMALL, orders)) == "left"
    assert unsampled_broadcast(join(orders, SMALL, "left")) == "right"
    # a left join keeps every left row: its left side is never copied
    assert unsampled_broadcast(join(SMALL, orders, "left", broadcast_rows=500)) is None
    assert unsampled_broadcast(join(orders, SMALL, broadcast_rows=29)) is None
    assert unsampled_broadcast(join(orders, SMALL, broadcast_bytes=0)) is None
    assert unsampled_broadcast(Join.of(SMALL, orders, "k", None, None, "inner", ("_x", "_y"),
                                       JoinOptions(), "pandas", validate="1:1")) is None


def test_unique_keys_are_known_from_groupbys_and_distincts_through_narrow_steps_only():
    orders = orders_read()
    total = (Aggregation("t", "amount", "sum"),)
    by_k = GroupBy(orders, ("k",), total)
    assert unique_on(by_k, ["k"]) and unique_on(by_k, ["k", "t"])
    assert unique_on(Select(Filter(by_k, col("t") > 1), ("k", "t")), ["k"])
    assert unique_on(Distinct(orders, ("k",)), ["k", "amount"])
    assert unique_on(GroupBy(orders, (), total), ["t"])  # one row
    assert not unique_on(by_k, ["t"])  # groups may share a total
    assert not unique_on(orders, ["k"])  # a read's keys may repeat
    assert not unique_on(GroupBy(orders, ("k", "amount"), total), ["k"])
    # an assignment may overwrite a key: not known
    assert not unique_on(Assign(by_k, (("k", col("t") * 0),)), ["k"])


def dated_read() -> Scan:
    """A read of 50,000 rows whose files' statistics give an integer key's range, 1-100, and
    a date's, seven years; its string column has none that measures."""
    meta = pd.DataFrame({"k": pd.Series([], dtype="int64"),
                         "day": pd.Series([], dtype="datetime64[ns]"),
                         "name": pd.Series([], dtype="object")})
    ranges = {"k": (1, 100), "day": (datetime.date(1992, 1, 2), datetime.date(1998, 8, 2)),
              "name": ("a", "z")}
    return Scan(ReadSource("data/", format_for("parquet"), storage_options(), None, meta,
                           50_000, 16000, ranges.get))


def test_a_column_holds_at_most_its_range_s_integers_or_its_date_part_s_values():
    dates = dated_read()
    assert values_at_most(dates, "k") == 101  # 1-100, and null
    assert values_at_most(dates, "name") == 50_000  # strings: as many as the rows
    assert values_at_most(dates, "day") == 50_000
    parts = Assign(Filter(dates, col("k") > 3), (("year", col("day").dt.year),
                                                 ("month", col("day").dt.month),
                                                 ("key", col("k")), ("twice", col("k") * 2)))
    assert values_at_most(parts, "year") == 10  # 1991-1999 (a time zone's margin), and null
    assert values_at_most(parts, "month") == 13
    assert values_at_most(parts, "key") == 101
    assert values_at_most(parts, "twice") == 50_000
    renamed = Rename(parts, {"year": "y"})
    assert values_at_most(renamed, "y") == 10
    assert values_at_most(join(SMALL, renamed), "y") == 10  # one side's column
    assert values_at_most(join(orders_read(), dates), "k") == 1000 * 50_000  # both sides' k
    assert values_at_most(GroupBy(parts, ("k",), (Aggregation("n", "year", "size"),)), "k") == 101
    chained = Assign(dates, (("k2", col("k")), ("k3", col("k2"))))
    assert values_at_most(chained, "k2") == 101
    assert values_at_most(chained, "k3") == 50_000  # of a column assigned alongside: not followed


def test_a_groupby_makes_at_most_the_product_of_its_keys_values():
    parts = Assign(dated_read(), (("year", col("day").dt.year),))
    aggregate = (Aggregation("n", "k", "sum"),)
    assert groups_at_most(GroupBy(parts, ("year", "k"), aggregate)) == 10 * 101
    assert groups_at_most(GroupBy(parts, ("year", "name"), aggregate)) == 10 * 50_000
    assert groups_at_most(GroupBy(Assign(SMALL, (("w", col("v") + 1),)), ("w",), aggregate)) == 30
