"""Groupbys that a join cuts to its other side's keys, made of those keys' rows only: where the
rewrite applies, where it must not, and every join type's rows against pandas on a real cluster."""

import numpy as np
import pandas as pd
import pytest

import gpuframe
from gpuframe.config import JoinOptions
from gpuframe.plan.aggregate import Aggregation, GroupBy
from gpuframe.plan.expr import col
from gpuframe.plan.group_prefilter import CUT_SIDES, prefilter_groups
from gpuframe.plan.nodes import (
    Assign,
    AsType,
    Filter,
    FromPandas,
    Join,
    Node,
    Rename,
    every_node,
)

ROWS = 4_000


@pytest.fixture(scope="module")
def facts() -> pd.DataFrame:
    """Sales by part and supplier, part keys missing in some rows (as SQL's NULL)."""
    rng = np.random.default_rng(44)
    part = rng.integers(0, 400, ROWS).astype(float)
    part[rng.random(ROWS) < 0.02] = np.nan
    return pd.DataFrame({"part": part, "supplier": rng.integers(0, 20, ROWS),
                         "quantity": rng.integers(1, 50, ROWS)})


@pytest.fixture(scope="module")
def parts() -> pd.DataFrame:
    """Every part once, a few with a missing key (each "forest"), and some keys that no sale
    has."""
    keys = np.arange(0, 420).astype(float)
    keys[::97] = np.nan
    wanted = (keys % 7 == 0) | np.isnan(keys)
    return pd.DataFrame({"key": keys, "name": np.where(wanted, "forest", "other"),
                         "stock": np.arange(420)})


def groupby(child: Node, keys=("part",), dropna=True) -> GroupBy:
    return GroupBy(child, tuple(keys), (Aggregation("total", "quantity", "sum"),), dropna)


def join(left: Node, right: Node, how="inner", left_on=("key",), right_on=("part",),
         **options) -> Join:
    return Join(left, right, how, tuple(left_on), tuple(right_on), ("_x", "_y"),
                JoinOptions(**options), "pandas")


def semi_joins_under(plan: Node) -> list[Join]:
    """The semi joins the rewrite put under a groupby."""
    return [child for node in every_node(plan) if isinstance(node, GroupBy)
            for child in node.children if isinstance(child, Join) and child.how == "leftsemi"]


def forest(parts: pd.DataFrame) -> Node:
    return Filter(FromPandas(parts), col("name") == "forest")


@pytest.mark.parametrize("how", CUT_SIDES["right"])
def test_a_groupby_on_the_right_is_made_of_the_filtered_left_sides_keys(facts, parts, how):
    plan = join(forest(parts), groupby(FromPandas(facts)), how)
    rewritten = prefilter_groups(plan)
    (semi,) = semi_joins_under(rewritten)
    assert (semi.left_keys, semi.right_keys) == (("part",), ("key",))
    assert rewritten.left is semi.right.children[0]  # the filtered side: one node, computed once
    assert list(rewritten.meta.columns) == list(plan.meta.columns)


@pytest.mark.parametrize("how", CUT_SIDES["left"])
def test_a_groupby_on_the_left_is_made_of_the_right_sides_keys(facts, parts, how):
    plan = join(groupby(FromPandas(facts)), forest(parts), how, left_on=("part",),
                right_on=("key",))
    (semi,) = semi_joins_under(prefilter_groups(plan))
    assert (semi.left_keys, semi.right_keys) == (("part",), ("key",))


@pytest.mark.parametrize("how, side", [("outer", "right"), ("right", "right"),
                                       ("right_anti", "right"), ("left", "left"),
                                       ("leftanti", "left"), ("cross", "right")])
def test_join_types_that_show_a_groupbys_unmatched_groups_keep_them_all(facts, parts, how,
                                                                         side):
    groups = groupby(FromPandas(facts))
    if how == "cross":
        plan = Join(forest(parts), groups, how, (), (), ("_x", "_y"), JoinOptions(), "pandas")
    elif side == "right":
        plan = join(forest(parts), groups, how)
    else:
        plan = join(groups, forest(parts), how, left_on=("part",), right_on=("key",))
    assert prefilter_groups(plan) is plan


def test_nothing_is_cut_where_the_other_side_holds_every_key_or_is_no_smaller(facts, parts):
    every_part = join(FromPandas(parts), groupby(FromPandas(facts)))
    assert prefilter_groups(every_part) is every_part
    few_facts = FromPandas(facts.head(10))
    no_smaller = join(forest(parts), groupby(few_facts))
    assert prefilter_groups(no_smaller) is no_smaller


def test_nothing_is_cut_past_broadcast_bytes_under_validate_or_turned_off(facts, parts):
    for options in ({"broadcast_bytes": 100}, {"prefilter_groups": False}):
        plan = join(forest(parts), groupby(FromPandas(facts)), **options)
        assert prefilter_groups(plan) is plan
    validated = Join(forest(parts), groupby(FromPandas(facts)), "inner", ("key",), ("part",),
                     ("_x", "_y"), JoinOptions(), "pandas", validate="one_to_one")
    assert prefilter_groups(validated) is validated


def test_a_groupby_another_node_reads_too_keeps_every_group(facts, parts):
    groups = groupby(FromPandas(facts))
    plan = join(join(forest(parts), groups), groups, left_on=("part",), right_on=("part",))
    assert not semi_joins_under(prefilter_groups(plan))


def test_a_join_on_an_aggregate_not_a_key_cuts_nothing(facts, parts):
    plan = join(forest(parts), groupby(FromPandas(facts)), left_on=("stock",),
                right_on=("total",))
    assert prefilter_groups(plan) is plan


def test_keys_are_followed_through_renames_filters_assignments_and_casts(facts, parts):
    groups = groupby(FromPandas(facts), ("part", "supplier"))
    groups = Assign(Filter(groups, col("total") > 30), (("half", col("total") / 2),))
    groups = Rename(AsType(groups, {"total": "float64"}), {"part": "p", "supplier": "s"})
    plan = join(forest(parts), groups, left_on=("key", "stock"), right_on=("p", "s"))
    (semi,) = semi_joins_under(prefilter_groups(plan))
    assert (semi.left_keys, semi.right_keys) == (("part", "supplier"), ("key", "stock"))


@pytest.mark.parametrize("between", ["assign", "astype"])
def test_a_key_assigned_or_cast_between_keeps_every_group(facts, parts, between):
    groups = groupby(FromPandas(facts))
    groups = Assign(groups, (("part", col("part") + 1),)) if between == "assign" \
        else AsType(groups, {"part": "int64"})
    plan = join(forest(parts), groups)
    assert prefilter_groups(plan) is plan


# --- the rows, on a cluster --------------------------------------------------------------------

def frames(engine, facts, parts):
    sales = gpuframe.from_pandas(facts, npartitions=4, engine=engine)
    catalog = gpuframe.from_pandas(parts, npartitions=2, engine=engine)
    return sales, catalog[catalog.name == "forest"]


def pandas_groups(facts: pd.DataFrame, dropna: bool) -> pd.DataFrame:
    return facts.groupby("part", as_index=False, dropna=dropna).agg(total=("quantity", "sum"))


def same_rows(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    def ordered(frame):
        frame = frame[sorted(frame.columns)]
        return frame.sort_values(list(frame.columns)).reset_index(drop=True)
    pd.testing.assert_frame_equal(ordered(got), ordered(expected), check_dtype=False)


def pandas_join(left, right, how, left_on, right_on):
    if how in ("leftsemi", "leftanti"):  # as pandas' merge, a missing key matches one
        found = left[left_on].isin(right[right_on].tolist())
        return left[found if how == "leftsemi" else ~found]
    return left.merge(right, left_on=left_on, right_on=right_on, how=how)


@pytest.mark.parametrize("dropna", [True, False], ids=["dropna", "missing-keys-kept"])
@pytest.mark.parametrize("how", CUT_SIDES["right"])
def test_every_join_type_cutting_the_right_gives_pandas_rows(engine, facts, parts, how, dropna):
    sales, wanted = frames(engine, facts, parts)
    groups = sales.groupby("part", dropna=dropna).agg(total=("quantity", "sum"))
    got = wanted.merge(groups, left_on="key", right_on="part", how=how).to_pandas()
    expected = pandas_join(parts[parts.name == "forest"], pandas_groups(facts, dropna), how,
                           "key", "part")
    same_rows(got, expected)


@pytest.mark.parametrize("how", CUT_SIDES["left"])
def test_every_join_type_cutting_the_left_gives_pandas_rows(engine, facts, parts, how):
    sales, wanted = frames(engine, facts, parts)
    groups = sales.groupby("part", dropna=False).agg(total=("quantity", "sum"))
    got = groups.merge(wanted, left_on="part", right_on="key", how=how).to_pandas()
    expected = pandas_join(pandas_groups(facts, False), parts[parts.name == "forest"], how,
                           "part", "key")
    same_rows(got, expected)
