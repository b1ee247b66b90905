"""Semi and anti joins whose large right side is cut by the left keys before it moves: where the
optimizer cuts it, where it leaves the join alone, and the rows a cut join gives on a cluster."""

import numpy as np
import pandas as pd
import pytest

import gpuframe
from gpuframe.config import JoinOptions
from gpuframe.io.formats import format_for
from gpuframe.io.storage.base import storage_options
from gpuframe.plan.distinct import Distinct
from gpuframe.plan.expr import col
from gpuframe.plan.nodes import Filter, Join, Node, ReadSource, Scan, Select
from gpuframe.plan.optimize import optimize


def scan(rows: int, **dtypes: str) -> Scan:
    meta = pd.DataFrame({name: pd.Series([], dtype=dtype) for name, dtype in dtypes.items()})
    return Scan(ReadSource("data/", format_for("parquet"), storage_options(), None, meta,
                           rows, rows * 8 * len(dtypes)))


def semi(left: Node, right: Node, how: str = "leftsemi", **options) -> Join:
    return Join.of(left, right, None, "k", "fk", how, ("_x", "_y"),
                   JoinOptions(**{"cut_semi_joins": True, **options}), "pandas")


DIMS = dict(k="int64", segment="int16", name="str")
FACTS = dict(fk="int64", qty="float64", day="int32")


def cut_of(plan: Node) -> Join | None:
    """The cut right side of the plan's top join, where the optimizer made one."""
    join = plan.child if isinstance(plan, Select) else plan
    assert isinstance(join, Join)
    cut = join.right
    if isinstance(cut, Join) and isinstance(cut.right, Select) and cut.right.child is join.left:
        return cut
    return None


@pytest.mark.parametrize("how", ["leftsemi", "leftanti"])
def test_a_large_right_side_is_cut_by_the_left_keys_it_would_shuffle(how):
    """A filtered dimension's keys (a third of its table, estimated) against a fact table 100
    times its size: the facts are cut by a semi join with the dimension's keys (the very node
    the join reads as its left side, so it runs once), then joined; the same columns."""
    plan = semi(Filter(scan(10_000, **DIMS), col("segment") < 3), scan(1_000_000, **FACTS), how)
    optimized = optimize(plan, n_workers=2)
    cut = cut_of(optimized)
    assert cut is not None and cut.how == "leftsemi"
    assert (cut.left_keys, cut.right_keys, cut.right.names) == (("fk",), ("k",), ("k",))
    assert cut.left.columns == ["fk"]  # the facts as the join asks for them, keys only
    assert optimized.columns == plan.columns
    assert optimized.meta.dtypes.equals(plan.meta.dtypes)


def test_joins_the_cut_would_not_pay_for_are_left_alone():
    dims, facts = Filter(scan(10_000, **DIMS), col("segment") < 3), scan(1_000_000, **FACTS)
    kept = [
        semi(scan(10_000, **DIMS), facts),  # every key of its table: most facts match
        semi(dims, facts, how="inner"),  # an inner join may copy its left side itself
        semi(dims, Distinct.of(facts, ["fk"], "first", None)),  # facts hashed on fk already
        semi(dims, scan(1_000, **FACTS)),  # the right side no larger than the keys
        semi(dims, facts, broadcast_bytes=10_000),  # keys past half the copy's cap
        semi(dims, facts, cut_semi_joins=False),  # not asked
    ]
    for plan in kept:
        assert cut_of(optimize(plan, n_workers=2)) is None, plan.describe()
    plan = semi(dims, facts)
    assert cut_of(optimize(plan)) is None  # the cluster's size unknown
    assert cut_of(optimize(plan, n_workers=10_000)) is None  # a copy to each of 10,000 workers
    assert cut_of(optimize(plan, n_workers=2)) is not None


@pytest.mark.parametrize("how", ["leftsemi", "leftanti"])
def test_a_cut_join_gives_pandas_rows(tmp_path, engine, how):
    """On a cluster, keys repeated on both sides and wider on the right (int64 against int32),
    the left side a filtered read: the optimizer cuts the right side, and the join gives the
    rows pandas gives."""
    rng = np.random.default_rng(7)
    dims = pd.DataFrame({"k": rng.integers(0, 5_000, 20_000).astype("int32"),
                         "segment": rng.integers(0, 10, 20_000).astype("int16")})
    facts = pd.DataFrame({"fk": rng.integers(0, 8_000, 400_000),
                          "qty": rng.random(400_000)})
    for name, frame in (("dims", dims), ("facts", facts)):
        (tmp_path / name).mkdir()
        step = len(frame) // 3 + 1
        for i in range(3):
            frame[i * step:(i + 1) * step].to_parquet(tmp_path / name / f"part-{i}.parquet")
    left = gpuframe.read_parquet(str(tmp_path / "dims"))
    left = left[left.segment < 3]
    right = gpuframe.read_parquet(str(tmp_path / "facts"))
    result = left.merge(right, left_on="k", right_on="fk", how=how, cut_semi_joins=True)
    assert cut_of(optimize(result._plan, len(engine.workers))) is not None
    got = result.to_pandas().sort_values(["k", "segment"]).reset_index(drop=True)
    chosen = dims[dims.segment < 3]
    matched = chosen.k.isin(facts.fk)
    expected = chosen[matched if how == "leftsemi" else ~matched]
    pd.testing.assert_frame_equal(
        got, expected.sort_values(["k", "segment"]).reset_index(drop=True))
