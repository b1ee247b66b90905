"""``groupby(...).agg(...)`` and ``aggregate(...)`` against pandas on the same input: every
function, each way of finishing (local, tree, shuffle), null and string keys, empty partitions,
the reuse of hash partitioning, and the optimizer's rules through a groupby."""

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dask.utils import key_split
from distributed import get_task_stream

import gpuframe
from gpuframe.errors import OptionError, UnknownColumnError
from gpuframe.groupby import aggregate, groupby
from gpuframe.plan.aggregate import Aggregation, GroupBy
from gpuframe.plan.expr import col
from gpuframe.plan.nodes import Filter, FromPandas, Scan
from gpuframe.plan.optimize import optimize
from gpuframe.runtime.runner import Job

EVERY = dict(total=("x", "sum"), counted=("f", "count"), rows=("f", "size"),
             average=("x", "mean"), low=("s", "min"), high=("f", "max"), spread=("f", "var"),
             deviation=("f", "std"), distinct=("s", "nunique"), opening=("s", "first"),
             closing=("f", "last"), small=("x", "min"))
"""Every function, over integer, float (with NaN) and string (with nulls) columns."""
STRATEGIES = [{"strategy": "tree"}, {"strategy": "shuffle"},
              {"strategy": "tree", "tree_fanin": 2}]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    n = 4000
    f = rng.random(n) * 1000 + 1e9  # a large mean: a variance from sums of squares cancels
    f[rng.random(n) < 0.1] = np.nan
    return pd.DataFrame({
        "k": rng.integers(0, 30, n),
        "s": pd.array(rng.choice(["red", "green", "blue", None], n), dtype="str"),
        "g": np.where(rng.random(n) < 0.2, np.nan, rng.integers(0, 5, n).astype(float)),
        "x": rng.integers(-50, 50, n),
        "f": f,
    })


def by_keys(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame.sort_values(keys).reset_index(drop=True)


def assert_matches(result, expected: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Same rows as pandas', and the schema the plan reported is the data's and pandas'."""
    got = result.to_pandas()
    assert got.dtypes.to_dict() == result.dtypes.to_dict(), "schema is not the data's"
    assert result.dtypes.to_dict() == expected.dtypes.to_dict(), "schema is not pandas'"
    pd.testing.assert_frame_equal(by_keys(got, keys), by_keys(expected, keys),
                                  check_exact=False, rtol=1e-9)
    return got


def explained(frame) -> str:
    out = io.StringIO()
    frame.explain(file=out)
    return out.getvalue()


@pytest.mark.parametrize("options", STRATEGIES, ids=["tree", "shuffle", "tree-fanin2"])
@pytest.mark.parametrize("dropna", [True, False])
@pytest.mark.parametrize("keys", [["k", "s"], ["s"], ["g"]], ids=["int-str", "str", "float"])
def test_every_function_matches_pandas(engine, data, keys, dropna, options):
    frame = gpuframe.from_pandas(data, npartitions=5)
    result = groupby(frame, keys, dropna=dropna, **options).agg(**EVERY)
    expected = data.groupby(keys, as_index=False, dropna=dropna).agg(**EVERY)
    got = assert_matches(result, expected, keys)
    assert got[keys].isna().any(axis=None) == (not dropna)
    assert options["strategy"] in explained(result).splitlines()[0]


def test_on_one_worker_many_groups_make_an_uncounted_tree_placed_on_the_keys(one_worker,
                                                                            data):
    """One worker: a shuffle would hash the partials into its one bucket, which the tree's last
    task takes as they are, so the partials are not counted (no round trip to the client), and
    the result is placed as that shuffle's would be: a join on the keys then moves nothing."""
    frame = gpuframe.from_pandas(data, npartitions=4, engine=one_worker)
    many = groupby(frame, "k", tree_max_rows=10, client_rows=0).agg(total=("x", "sum"))
    with get_task_stream(client=one_worker.client) as stream:
        got = many.to_pandas()
    assert_matches(many, data.groupby("k", as_index=False).agg(total=("x", "sum")), ["k"])
    assert len(got) == data["k"].nunique()
    stages = {key_split(entry["key"]) for entry in stream.data}
    assert not any("count" in stage or "send" in stage for stage in stages), stages
    assert "(one worker, one bucket: uncounted)" in explained(many).splitlines()[0]
    assert many.partitioning.keys == ("k",) and many.partitioning.n == 1
    counts = groupby(frame, "k", client_rows=0).agg(n=("x", "count"))
    joined = many.merge(counts, on="k")
    assert len(joined.to_pandas()) == len(got)
    assert "none: both sides already hash(k) into 1" in explained(joined)
    # a frame placed nowhere is copied whole beside it, not sent into its bucket first
    other = gpuframe.from_pandas(data[["k"]].drop_duplicates(), engine=one_worker)
    beside = many.merge(other, on="k")
    with get_task_stream(client=one_worker.client) as stream:
        assert len(beside.to_pandas()) == len(got)
    assert not any("send" in key_split(entry["key"]) for entry in stream.data)
    assert "broadcast" in explained(beside).splitlines()[0]


def test_keys_of_few_values_by_the_files_statistics_make_a_tree_uncounted(engine, tmp_path):
    """Years of three years of dates, and codes 0-9 (the files' statistics say both ranges):
    at most 6 x 11 groups in each of the read's partials (a year's margin each side, and
    null), under ``tree_max_rows`` though the rows are not; a nunique's partials hold its
    distinct values too, so they are counted."""
    rng = np.random.default_rng(8)
    rows = 20_000
    table = pd.DataFrame({"day": pd.Timestamp("2020-01-01")
                          + pd.to_timedelta(rng.integers(0, 3 * 365, rows), unit="D"),
                          "code": rng.integers(0, 10, rows), "x": rng.random(rows)})
    for i in range(4):
        table.iloc[i::4].to_parquet(tmp_path / f"part-{i}.parquet", index=False)
    frame = gpuframe.read_parquet(str(tmp_path))
    frame = frame.assign(year=frame.day.dt.year)
    device = {"tree_max_rows": 1000, "client_rows": 0}  # the tree on the workers
    summed = groupby(frame, ["year", "code"], **device).agg(total=("x", "sum"))
    distinct = groupby(frame, ["year", "code"], **device).agg(days=("day", "nunique"))
    expected = table.assign(year=table.day.dt.year).groupby(["year", "code"], as_index=False)
    assert_matches(summed, expected.agg(total=("x", "sum")), ["year", "code"])
    assert_matches(distinct, expected.agg(days=("day", "nunique")), ["year", "code"])
    partials = len(frame.persist().futures)
    assert f"(at most {6 * 11 * partials:,} partial rows, uncounted)" in \
        explained(summed).splitlines()[0]
    assert "uncounted" not in explained(distinct).splitlines()[0]


def test_auto_reduces_few_groups_as_a_tree_and_many_by_a_shuffle(engine, data):
    frame = gpuframe.from_pandas(data, npartitions=4)
    # 4,000 input rows at most; the tree on the workers, not the client
    bounded = groupby(frame, "k", client_rows=0).agg(total=("x", "sum"))
    few = groupby(frame, "k", tree_max_rows=1000, client_rows=0).agg(total=("x", "sum"))
    many = groupby(frame, "k", tree_max_rows=10, client_rows=0).agg(total=("x", "sum"))
    expected = data.groupby("k", as_index=False).agg(total=("x", "sum"))
    predicted = explained(few).splitlines()[0]
    assert "est. 400 rows" in predicted  # a tenth of the input's
    assert "strategy: tree up to 1,000 partial rows, else shuffle (predicted)" in predicted
    assert "strategy: tree (at most 4,000 rows, uncounted) (predicted)" in \
        explained(bounded).splitlines()[0]
    for result in (bounded, few, many):
        assert_matches(result, expected, ["k"])
    assert "tree: 4 partials combined 8 at a time (at most 4,000 partial rows, uncounted)" in \
        explained(bounded).splitlines()[0]
    assert "tree: 4 partials combined 8 at a time (120 partial rows)" in \
        explained(few).splitlines()[0]
    assert "shuffle: partials hashed into 2 buckets (120 partial rows)" in \
        explained(many).splitlines()[0]
    assert few.npartitions == 1 and few.partitioning is None
    assert many.npartitions == 2
    assert many.partitioning.keys == ("k",) and many.partitioning.hash_types == ("int64",)
    single = groupby(gpuframe.from_pandas(data, npartitions=1), "k").agg(total=("x", "sum"))
    assert_matches(single, expected, ["k"])
    assert "local: one partition" in explained(single).splitlines()[0]


@pytest.mark.parametrize("strategy", ["tree", "shuffle"])
def test_empty_partitions_and_an_empty_frame(engine, data, strategy):
    ordered = data.sort_values("k").reset_index(drop=True)
    frame = gpuframe.from_pandas(ordered, npartitions=6)
    few = frame[frame.k < 4]  # most partitions keep no row
    result = groupby(few, ["k", "s"], strategy=strategy).agg(**EVERY)
    kept = ordered[ordered.k < 4]
    assert_matches(result, kept.groupby(["k", "s"], as_index=False).agg(**EVERY), ["k", "s"])
    none = groupby(frame[frame.k < -1], "k", strategy=strategy).agg(**EVERY)
    expected = ordered.head(0).groupby("k", as_index=False).agg(**EVERY)
    assert len(none.to_pandas()) == 0
    assert list(none.columns) == list(expected.columns)


def test_whole_frame_aggregate_is_one_row(engine, data):
    check_whole_frame_aggregate(engine, data, with_nunique=True)


@pytest.mark.gpu
@pytest.mark.parametrize("with_nunique", [True, False], ids=["nunique", "no-nunique"])
def test_whole_frame_aggregate_is_one_row_on_gpus(gpu_engine, data, with_nunique):
    check_whole_frame_aggregate(gpu_engine, data, with_nunique)


def check_whole_frame_aggregate(engine, data: pd.DataFrame, with_nunique: bool) -> None:
    named = {name: pair for name, pair in EVERY.items() if pair[1] not in ("first", "last")
             and (with_nunique or pair[1] != "nunique")}
    result = aggregate(gpuframe.from_pandas(data, npartitions=3, engine=engine), **named)
    got = result.to_pandas()
    assert len(got) == 1
    assert got.dtypes.to_dict() == result.dtypes.to_dict()
    for name, (column, function) in named.items():
        expected = len(data) if function == "size" else getattr(data[column], function)()
        if not isinstance(expected, str):
            expected = pytest.approx(expected, rel=1e-9)
        assert got[name].iloc[0] == expected, name
    empty = aggregate(gpuframe.from_pandas(data.head(0), engine=engine), n=("x", "count"),
                      t=("f", "sum"), m=("f", "mean"), low=("x", "min"),
                      s=("s", "max")).to_pandas()
    assert empty["n"].tolist() == [0] and empty["t"].tolist() == [0.0]
    assert empty[["m", "low", "s"]].isna().all(axis=None)


def test_groupby_after_a_join_on_its_keys_moves_nothing(engine, data):
    left = gpuframe.from_pandas(data, npartitions=3)
    right = gpuframe.from_pandas(pd.DataFrame({"k": np.arange(30), "w": np.arange(30) * 2}))
    joined = left.merge(right, on="k", broadcast_bytes=0)
    with get_task_stream(client=engine.client) as stream:
        result = groupby(joined, ["k", "s"], strategy="shuffle").agg(total=("w", "sum"),
                                                                     rows=("x", "size"))
        got = result.to_pandas()
    names = {key_split(entry["key"]) for entry in stream.data}
    assert "gpuframe-partial" not in names and "gpuframe-send-partial" not in names
    assert "gpuframe-aggregate" in names
    assert "local: input already hash(k) into 2" in explained(result).splitlines()[0]
    expected = data.merge(right.to_pandas(), on="k").groupby(["k", "s"], as_index=False).agg(
        total=("w", "sum"), rows=("x", "size"))
    pd.testing.assert_frame_equal(by_keys(got, ["k", "s"]), by_keys(expected, ["k", "s"]))
    assert result.partitioning == joined.partitioning


@pytest.mark.parametrize("broadcast_bytes", [0, None], ids=["shuffled", "broadcast"])
def test_a_whole_frame_aggregate_of_a_join_takes_its_partials_from_the_join_tasks(
        engine, data, broadcast_bytes):
    """A whole-frame aggregate over a filter over a join: the join's own tasks make the
    partials (no partial stage), whichever way the join ran, the client finishes them (no
    aggregate task), and the answer is pandas'."""
    right = pd.DataFrame({"k": np.arange(30), "w": np.arange(30) * 2})
    options = {} if broadcast_bytes is None else {"broadcast_bytes": broadcast_bytes}
    joined = gpuframe.from_pandas(data, npartitions=3).merge(
        gpuframe.from_pandas(right, npartitions=2), on="k", **options)
    named = {name: pair for name, pair in EVERY.items() if pair[1] not in ("first", "last")}
    with get_task_stream(client=engine.client) as stream:
        result = aggregate(joined[joined["w"] > 10], **named, w=("w", "sum"))
        got = result.to_pandas()
    names = {key_split(entry["key"]) for entry in stream.data}
    assert "gpuframe-join" in names and "gpuframe-aggregate" not in names
    assert not [name for name in names if "partial" in name]
    assert "partials, made in the join's tasks, fetched as pandas and finished there" in \
        explained(result)
    both = data.merge(right, on="k")
    both = both[both["w"] > 10]
    for name, (column, function) in {**named, "w": ("w", "sum")}.items():
        expected = len(both) if function == "size" else getattr(both[column], function)()
        if not isinstance(expected, str):
            expected = pytest.approx(expected, rel=1e-9)
        assert got[name].iloc[0] == expected, name


@pytest.mark.parametrize("options", STRATEGIES[:2], ids=["tree", "shuffle"])
@pytest.mark.parametrize("broadcast_bytes", [0, None], ids=["shuffled", "broadcast"])
def test_a_groupby_of_a_join_on_other_keys_takes_its_partials_from_the_join_tasks(
        engine, data, broadcast_bytes, options):
    """A groupby whose keys the join's output cannot be hashed on (not the join's keys, nor
    any below) has the join's own tasks make its partials (no partial stage), whichever way
    the join ran; grouped on the join's key, it finishes each group where it lies instead."""
    right = pd.DataFrame({"k": np.arange(30), "w": np.arange(30) % 4})
    join_options = {} if broadcast_bytes is None else {"broadcast_bytes": broadcast_bytes}
    joined = gpuframe.from_pandas(data, npartitions=3).merge(
        gpuframe.from_pandas(right, npartitions=2), on="k", **join_options)
    named = {name: pair for name, pair in EVERY.items() if pair[1] not in ("first", "last")}
    with get_task_stream(client=engine.client) as stream:
        result = groupby(joined, ["w", "s"], **options).agg(**named)
        expected = data.merge(right, on="k").groupby(["w", "s"], as_index=False).agg(**named)
        assert_matches(result, expected, ["w", "s"])
    names = {key_split(entry["key"]) for entry in stream.data}
    assert "gpuframe-join" in names
    assert not [name for name in names if name.endswith("partial") and "send" not in name]
    assert "partials, made in the join's tasks" in explained(result)
    on_key = groupby(joined, ["k", "w"], **options).agg(total=("x", "sum"))
    assert_matches(on_key, data.merge(right, on="k").groupby(["k", "w"], as_index=False)
                   .agg(total=("x", "sum")), ["k", "w"])
    assert "made in the join's tasks" not in explained(on_key)


@pytest.mark.parametrize("options", STRATEGIES[:2], ids=["tree", "shuffle"])
@pytest.mark.parametrize("keys", [["k", "s"], []], ids=["keys", "whole-frame"])
def test_an_aggregate_of_a_read_takes_its_partials_from_the_read_tasks(engine, tmp_path, data,
                                                                      keys, options):
    """An aggregate over a filter over a Parquet read of several files: the read's own tasks
    make the partials (no partial stage), and the answer is pandas'."""
    for i in range(4):
        pq.write_table(pa.Table.from_pandas(data.iloc[i * 1000:(i + 1) * 1000],
                                            preserve_index=False),
                       tmp_path / f"part-{i}.parquet")
    frame = gpuframe.read_parquet(str(tmp_path), partition_bytes=1)
    kept = frame[frame["x"] > -20]
    named = {"total": ("x", "sum"), "high": ("f", "max"), "rows": ("x", "size")}
    with get_task_stream(client=engine.client) as stream:
        result = (groupby(kept, keys, **options).agg(**named) if keys
                  else aggregate(kept, **named))
        got = result.to_pandas()
    names = {key_split(entry["key"]) for entry in stream.data}
    assert "gpuframe-read-parquet" in names
    assert not [name for name in names
                if name.endswith("partial") and name != "gpuframe-send-partial"], names
    assert "its tasks also make the partials of the aggregate above" in explained(result)
    rows = data[data["x"] > -20]
    if keys:
        expected = rows.groupby(keys, as_index=False, dropna=True).agg(**named)
        pd.testing.assert_frame_equal(by_keys(got, keys), by_keys(expected, keys),
                                      check_exact=False, rtol=1e-9, check_dtype=False)
    else:
        assert got["total"].iloc[0] == rows["x"].sum()
        assert got["high"].iloc[0] == pytest.approx(rows["f"].max())
        assert got["rows"].iloc[0] == len(rows)


def test_a_join_after_a_shuffled_groupby_reuses_its_partitioning(engine, data):
    counts = groupby(gpuframe.from_pandas(data, npartitions=3), "k", strategy="shuffle").agg(
        rows=("x", "size"))
    other = gpuframe.from_pandas(pd.DataFrame({"k": np.arange(30), "w": 1.0}))
    joined = counts.merge(other, on="k", broadcast_bytes=0)
    assert "shuffle right side only: left side already hash(k)" in explained(
        joined.persist()).splitlines()[0]
    assert len(joined) == data.k.nunique()


def test_dict_specs_and_shortcuts(engine, data):
    frame = gpuframe.from_pandas(data[["k", "x", "f"]], npartitions=3)
    grouped = groupby(frame, "k")
    result = grouped.agg({"x": "sum", "f": ["min", "max"]})
    expected = data.groupby("k", as_index=False).agg(x=("x", "sum"), f_min=("f", "min"),
                                                       f_max=("f", "max"))
    assert_matches(result, expected, ["k"])
    for shortcut in ("sum", "count", "mean", "min", "max", "nunique", "var", "std", "first",
                     "last"):
        expected = getattr(data[["k", "x", "f"]].groupby("k", as_index=False), shortcut)()
        assert_matches(getattr(grouped, shortcut)(), expected, ["k"])
    size = data.groupby("k", as_index=False).size()
    assert_matches(grouped.size(), size, ["k"])


def test_unknown_columns_functions_and_options_are_named(engine, data):
    frame = gpuframe.from_pandas(data)
    with pytest.raises(UnknownColumnError, match="'nope'"):
        groupby(frame, "nope")
    with pytest.raises(UnknownColumnError, match="'nope'"):
        groupby(frame, "k").agg(t=("nope", "sum"))
    with pytest.raises(OptionError, match="'median'"):
        groupby(frame, "k").agg(t=("x", "median"))
    with pytest.raises(OptionError, match="sort_values"):
        groupby(frame, "k", sort=True)
    with pytest.raises(OptionError, match="strategy"):
        groupby(frame, "k", strategy="fast").agg(t=("x", "sum"))
    with pytest.raises(OptionError, match="unknown option 'fanin'"):
        groupby(frame, "k", fanin=3)


def test_key_conditions_move_below_and_others_stay_above():
    data = pd.DataFrame({"k": [1, 2], "x": [1.0, 2.0], "y": [3, 4]})
    node = GroupBy(FromPandas(data), ("k",), (Aggregation("t", "x", "sum"),))
    plan = Filter(node, (col("k") > 1) & (col("t") > 0))
    optimized = optimize(plan)
    assert isinstance(optimized, Filter) and repr(optimized.predicate) == repr(col("t") > 0)
    below = optimized.child
    assert isinstance(below, GroupBy) and isinstance(below.child, Filter)
    assert repr(below.child.predicate) == repr(col("k") > 1)
    assert isinstance(below.child.child, FromPandas)
    assert below.child.child.columns == ["k", "x"]  # y is read by no aggregate
    assert optimized.meta.dtypes.equals(plan.meta.dtypes)


def test_projection_reaches_the_parquet_read(engine, tmp_path, data):
    path = tmp_path / "data.parquet"
    pq.write_table(pa.Table.from_pandas(data, preserve_index=False), path)
    frame = gpuframe.read_parquet(str(path))
    result = groupby(frame, "k").agg(total=("x", "sum"), high=("f", "max"))[["k", "total"]]
    result = result[result.k < 10]
    scan = next(n for n in _nodes(optimize(result.plan)) if isinstance(n, Scan))
    assert scan.read_columns == ("k", "x")  # high is not asked for: f is not read
    assert scan.filters == [[("k", "<", 10)]]
    expected = data[data.k < 10].groupby("k", as_index=False).agg(total=("x", "sum"))
    assert_matches(result, expected, ["k"])


def _nodes(plan):
    found = [plan]
    for child in plan.children:
        found += _nodes(child)
    return found


@pytest.mark.gpu
@pytest.mark.parametrize("options", STRATEGIES[:2], ids=["tree", "shuffle"])
@pytest.mark.parametrize("dropna", [True, False])
def test_every_function_matches_pandas_on_gpus(gpu_engine, data, dropna, options):
    frame = gpuframe.from_pandas(data, npartitions=5, engine=gpu_engine)
    result = groupby(frame, ["k", "s"], dropna=dropna, **options).agg(**EVERY)
    expected = data.groupby(["k", "s"], as_index=False, dropna=dropna).agg(**EVERY)
    assert_matches(result, expected, ["k", "s"])


@pytest.mark.parametrize("strategy", ["tree", "shuffle"])
def test_means_of_large_int32_do_not_wrap(engine, strategy):
    data = pd.DataFrame({"k": np.arange(40) % 2, "x": np.full(40, 2_000_000_000, "int32")})
    result = groupby(gpuframe.from_pandas(data, npartitions=3), "k", strategy=strategy).agg(
        m=("x", "mean"), v=("x", "var"))
    expected = data.groupby("k", as_index=False).agg(m=("x", "mean"), v=("x", "var"))
    assert_matches(result, expected, ["k"])


def test_sums_of_small_integers_are_64_bits_wide(engine):
    """pandas keeps uint8 where every sum fits it and gives uint64 where one does not; the
    schema cannot know which, so it is always the wide type, which holds both."""
    data = pd.DataFrame({"k": np.arange(600) % 2, "u": np.full(600, 200, "uint8"),
                         "b": np.arange(600) % 3 == 0, "o": pd.Series(["p", "q"] * 300,
                                                                        dtype=object)})
    result = groupby(gpuframe.from_pandas(data, npartitions=3), ["k", "o"]).agg(
        u=("u", "sum"), b=("b", "sum"))
    expected = data.groupby(["k", "o"], as_index=False).agg(u=("u", "sum"), b=("b", "sum"))
    assert expected.u.dtype == "uint64"
    assert_matches(result, expected, ["k", "o"])


@pytest.mark.parametrize("strategy", ["tree", "shuffle"])
def test_object_keys_of_mixed_types_keep_their_values(engine, strategy):
    """pandas types a key of objects as text only where every value is text: 1 and "1" are two
    groups, labelled 1 and "1", not two groups both labelled "1"."""
    data = pd.DataFrame({"k": pd.Series([1, "1", 2, "x", None] * 12, dtype=object),
                         "v": np.arange(60)})
    result = groupby(gpuframe.from_pandas(data, npartitions=3), "k", strategy=strategy).agg(
        s=("v", "sum")).to_pandas()
    expected = data.groupby("k", as_index=False).agg(s=("v", "sum"))
    assert result.k.dtype == expected.k.dtype == object

    def labelled(frame: pd.DataFrame) -> list:
        return sorted((type(k).__name__, str(k), s) for k, s in zip(frame.k, frame.s))

    assert labelled(result) == labelled(expected)


@pytest.mark.parametrize("keys", [["t"], ["c"], ["b"]], ids=["time", "categorical", "bool"])
@pytest.mark.parametrize("strategy", ["tree", "shuffle"])
def test_time_categorical_and_bool_keys(engine, keys, strategy):
    rng = np.random.default_rng(11)
    n = 1000
    times = pd.Series(pd.to_datetime(rng.integers(0, 5, n), unit="D"))
    times[rng.random(n) < 0.1] = pd.NaT
    data = pd.DataFrame({"t": times, "c": pd.Categorical(rng.choice(["u", "v", "w"], n)),
                         "b": rng.random(n) < 0.5, "x": rng.random(n)})
    named = {"mean": ("x", "mean"), "n": ("x", "size"), "first_t": ("t", "first"),
             "last_c": ("c", "last")}
    named = {name: pair for name, pair in named.items() if pair[0] not in keys}
    result = groupby(gpuframe.from_pandas(data, npartitions=3), keys, dropna=False,
                     strategy=strategy).agg(**named)
    expected = data.groupby(keys, as_index=False, dropna=False, observed=True).agg(**named)
    assert_matches(result, expected, keys)


def test_the_frame_methods_group_and_aggregate_as_pandas(engine, data):
    """``frame.groupby(...).agg(...)`` and ``frame.agg(...)``, the spelling queries use."""
    frame = gpuframe.from_pandas(data, npartitions=3)
    expected = data.groupby(["k", "g"], as_index=False, dropna=False).agg(
        total=("x", "sum"), high=("f", "max"))
    assert_matches(frame.groupby(["k", "g"], dropna=False).agg(total=("x", "sum"),
                                                                high=("f", "max")),
                   expected, ["k", "g"])
    whole = frame[frame.x > 0].agg(total=("x", "sum"), n=("x", "size")).to_pandas()
    assert whole.to_dict("records") == [{"total": data.x[data.x > 0].sum(),
                                         "n": int((data.x > 0).sum())}]


@pytest.mark.parametrize("groups, again", [(100, False), (60_000, True)])
def test_a_tree_the_estimates_choose_counts_no_partials_and_checks_them_as_it_runs(
        engine, speculating, groups, again):
    """The plan bounds the input at 60,000 rows, past ``tree_max_rows`` (10,000), but estimates
    it at a ninth of that (two filters): the tree is chosen without counting the partials, no
    count tasks and one job. Where its tasks take more than twice ``tree_max_rows`` partial
    rows (each row a group of its own), the job fails, and the action runs again, counting
    them, and shuffles. Either way the rows are pandas'."""
    data = pd.DataFrame({"k": np.arange(60_000) % groups, "x": np.arange(60_000.0)})
    frame = gpuframe.from_pandas(data, npartitions=4)
    kept = frame[(frame.x >= 0) & (frame.k >= 0)]
    result = groupby(kept, "k", tree_max_rows=10_000, client_rows=0).agg(total=("x", "sum"))
    assert "strategy: tree (about 6,667 rows estimated, uncounted) (predicted)" in \
        explained(result).splitlines()[0]
    with get_task_stream(client=engine.client) as stream:
        assert_matches(result, data.groupby("k", as_index=False).agg(total=("x", "sum")), ["k"])
    decided = explained(result).splitlines()[0]
    names = {key_split(entry["key"]) for entry in stream.data}
    if again:
        assert speculating == [True, False]
        assert "shuffle: partials hashed into 2 buckets (60,000 partial rows)" in decided
    else:
        assert speculating == [True]
        assert "gpuframe-count-partial" not in names
        assert "tree: 4 partials combined 8 at a time (about 6,667 input rows estimated, " \
               "uncounted)" in decided


def test_groupbys_under_a_join_count_their_partials_before_either_waits(engine, data,
                                                                        monkeypatch):
    """Every groupby whose choice waits for its partials' count is begun before the lowering
    waits for any: both sides' counts are submitted before the client waits for the first,
    so the two waits overlap."""
    counts_at_first_wait: list[int] = []
    gather = Job.gather

    def gathering(self: Job, futures):
        futures = list(futures)
        if not counts_at_first_wait and \
                any(self._info[f.key].stage == "count-partial" for f in futures):
            counts_at_first_wait.append(
                sum(info.stage == "count-partial" for info in self._info.values()))
        return gather(self, futures)

    monkeypatch.setattr(Job, "gather", gathering)
    frame = gpuframe.from_pandas(data, npartitions=3)
    totals = groupby(frame, "k", tree_max_rows=10).agg(total=("x", "sum"))
    sizes = groupby(frame[frame.x > 0], "k", tree_max_rows=10).agg(rows=("x", "size"))
    got = totals.merge(sizes, on="k").to_pandas()
    expected = data.groupby("k", as_index=False).agg(total=("x", "sum")).merge(
        data[data.x > 0].groupby("k", as_index=False).agg(rows=("x", "size")), on="k")
    pd.testing.assert_frame_equal(by_keys(got, ["k"]), by_keys(expected, ["k"]))
    assert counts_at_first_wait == [6]  # 3 partitions a side


def test_a_shuffle_sends_each_component_of_the_partials_without_picking_it_out(engine, data):
    """The exchange's send tasks take the partials themselves (the main frame and a nunique's
    distinct pairs), with no task per partition and component to pick one out."""
    frame = gpuframe.from_pandas(data, npartitions=3)
    with get_task_stream(client=engine.client) as stream:
        result = groupby(frame, "k", strategy="shuffle").agg(
            total=("x", "sum"), distinct=("s", "nunique"))
        got = result.to_pandas()
    names = {key_split(entry["key"]) for entry in stream.data}
    assert {"gpuframe-send-partial", "gpuframe-send-distincta"} <= names, names
    assert "gpuframe-component" not in names
    expected = data.groupby("k", as_index=False).agg(total=("x", "sum"),
                                                     distinct=("s", "nunique"))
    pd.testing.assert_frame_equal(by_keys(got, ["k"]), by_keys(expected, ["k"]))




def test_an_action_fetching_few_groups_has_the_client_finish_them(engine, data):
    """The plan bounds each partial at the input's 4,000 rows, within ``client_rows``: the
    partials come to the client as pandas and are merged there, the nodes above run there too
    (an assignment, a filter, a sort), and no aggregate, sort or conversion task runs; the
    rows, their order and the schema are pandas'. With ``client_rows=0`` the workers finish."""
    check_finished_on_the_client(engine, data)


@pytest.mark.gpu
def test_an_action_fetching_few_groups_has_the_client_finish_them_on_gpus(gpu_engine, data):
    check_finished_on_the_client(gpu_engine, data)


def check_finished_on_the_client(engine, data: pd.DataFrame) -> None:
    frame = gpuframe.from_pandas(data, npartitions=4, engine=engine)
    named = {name: pair for name, pair in EVERY.items() if name != "distinct"}

    def query(**options):
        grouped = groupby(frame, ["k", "s"], dropna=False, **options).agg(**named)
        grouped = grouped.assign(twice=grouped.total * 2)
        return grouped[grouped.rows > 20].sort_values(["total", "k", "s"],
                                                      ascending=[False, True, True])

    expected = data.groupby(["k", "s"], dropna=False, as_index=False).agg(**named)
    expected = expected.assign(twice=expected.total * 2)
    expected = expected[expected.rows > 20].sort_values(
        ["total", "k", "s"], ascending=[False, True, True], na_position="last",
        ignore_index=True)
    for options, on_client in (({}, True), ({"client_rows": 0}, False)):
        result = query(**options)
        with get_task_stream(client=engine.client) as stream:
            got = result.to_pandas()
        names = {key_split(entry["key"]) for entry in stream.data}
        assert ("gpuframe-aggregate" not in names) == on_client, names
        assert ("gpuframe-gather" not in names) == on_client, names
        assert got.dtypes.to_dict() == result.dtypes.to_dict()
        pd.testing.assert_frame_equal(got, expected, check_exact=False, rtol=1e-9)
        plan = explained(result)
        assert ("on the client: 4 partials fetched as pandas and finished there" in plan) \
            == on_client
        assert "where the aggregate finishes (its last task, or the client): one partition, " \
               "ordered" in plan


def test_counted_partials_within_client_rows_are_finished_on_the_client(engine, data,
                                                                        monkeypatch):
    """Bounded at 4,000 rows past ``tree_max_rows`` and estimated at 400, both past
    ``client_rows`` (300): the partials are counted, 30 groups each and a nunique's distinct
    pairs (under 300 in all), and then finished on the client, which the count's own gather
    brought them to: the client gathers nothing else."""
    gathered: list[str] = []
    gather = Job.gather

    def gathering(self: Job, futures):
        futures = list(futures)
        gathered.extend(self._info[f.key].stage for f in futures)
        return gather(self, futures)

    monkeypatch.setattr(Job, "gather", gathering)
    frame = gpuframe.from_pandas(data, npartitions=4)
    result = groupby(frame, "k", tree_max_rows=1000, client_rows=300).agg(
        total=("x", "sum"), distinct=("s", "nunique"))
    expected = data.groupby("k", as_index=False).agg(total=("x", "sum"),
                                                     distinct=("s", "nunique"))
    got = result.to_pandas()
    assert gathered == ["count-partial"] * 4
    pd.testing.assert_frame_equal(by_keys(got, ["k"]), by_keys(expected, ["k"]))
    decided = explained(result).splitlines()[0]
    assert "on the client: 4 partials fetched as pandas and finished there (" in decided
    assert decided.endswith(" partial rows)")


@pytest.mark.parametrize("mixed", [False, True], ids=["few-groups", "some-past"])
def test_partials_of_a_tree_the_estimates_choose_go_to_the_client_where_few(
        engine, speculating, mixed):
    """The plan estimates the input at 6,667 rows (two filters) and bounds it at 60,000, past
    ``client_rows`` (1,000): each partial of at most 1,000 rows comes to the client as pandas,
    and where all do the client finishes them; where two partitions hold 15,000 groups each,
    those stay on their workers, and the workers' tree (chosen by the estimate, as without the
    client) finishes them all, the others' made device frames again. One job either way, and
    the rows are pandas'."""
    check_estimated_tree_on_the_client(engine, speculating, mixed)


@pytest.mark.gpu
@pytest.mark.parametrize("mixed", [False, True], ids=["few-groups", "some-past"])
def test_partials_of_a_tree_the_estimates_choose_go_to_the_client_where_few_on_gpus(
        gpu_engine, speculating, mixed):
    check_estimated_tree_on_the_client(gpu_engine, speculating, mixed)


def check_estimated_tree_on_the_client(engine, speculating: list[bool], mixed: bool) -> None:
    i = np.arange(60_000)
    data = pd.DataFrame({"k": np.where(i < 30_000, i % 10, i) if mixed else i % 10,
                         "x": i.astype(float)})
    frame = gpuframe.from_pandas(data, npartitions=4, engine=engine)
    kept = frame[(frame.x >= 0) & (frame.k >= 0)]
    result = groupby(kept, "k", tree_max_rows=20_000, client_rows=1000).agg(total=("x", "sum"))
    with get_task_stream(client=engine.client) as stream:
        assert_matches(result, data.groupby("k", as_index=False).agg(total=("x", "sum")), ["k"])
    names = {key_split(entry["key"]) for entry in stream.data}
    decided = explained(result).splitlines()[0]
    assert speculating == [True]
    assert ("gpuframe-aggregate" in names) == mixed
    # one worker's one bucket takes every partial as the tree's last task would
    reason = ("one worker, one bucket: uncounted" if len(engine.workers) == 1
              else "about 6,667 input rows estimated, uncounted")
    assert (f"tree: 4 partials combined 8 at a time ({reason}); some past client_rows"
            in decided) == mixed
    assert ("on the client: 4 partials fetched as pandas and finished there" in decided) \
        == (not mixed)


def test_map_partitions_over_the_aggregate_keeps_it_on_the_workers(engine, data):
    """A function for the workers' frames is not run on the client's pandas."""
    frame = gpuframe.from_pandas(data, npartitions=4)
    grouped = groupby(frame, "k").agg(total=("x", "sum"))
    mapped = grouped.map_partitions(lambda part: part.assign(total=part.total + 1))
    got = mapped.to_pandas()
    expected = data.groupby("k", as_index=False).agg(total=("x", "sum"))
    pd.testing.assert_frame_equal(by_keys(got, ["k"]),
                                  by_keys(expected.assign(total=expected.total + 1), ["k"]))
    assert "on the client" not in explained(mapped)
    assert "tree: 4 partials combined 8 at a time" in explained(mapped)
