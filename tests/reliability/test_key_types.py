"""No wrong rows for any join key type: every key dtype crossed with every other, on the broadcast
and the shuffle path, joins as pandas.merge joins it or is refused while the join is built.

The joins of one path run as one job (their results, each cut to a common schema, concatenated):
the cross product costs a job per path, not one per pair of dtypes.
"""

from __future__ import annotations

import datetime
import io
import time
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from distributed import get_task_stream

import gpuframe
from gpuframe.errors import JoinError
from gpuframe.exchange.digest import UnhashableKeyError

pytestmark = pytest.mark.filterwarnings("ignore:You are merging on int and float")

SHUFFLE = {"broadcast_bytes": 0, "broadcast_rows": 0, "skew_threshold": None}
BROADCAST = {"broadcast_bytes": 2**40, "broadcast_ratio": None}
PATHS = {"broadcast": BROADCAST, "shuffle": SHUFFLE}
"""Options that make a join take each path. The shuffle's skew split, which costs each join a
count of sampled keys on the client, has a test of its own."""
STRATEGIES = {"broadcast": "broadcast right side", "shuffle": "shuffle: 2 workers"}
"""How explain() names each path's strategy."""


def decimals(values: list[str | None], precision: int, scale: int) -> pd.Series:
    return pd.Series([None if v is None else Decimal(v) for v in values],
                     dtype=pd.ArrowDtype(pa.decimal128(precision, scale)))


def days(*values: str | None) -> list[datetime.date | None]:
    return [None if v is None else datetime.date.fromisoformat(v) for v in values]


KEYS: dict[str, pd.Series] = {
    "int8": pd.Series([1, 2, -3, 1], dtype="int8"),
    "int64": pd.Series([1, 2, 3, 2**40], dtype="int64"),
    "uint8": pd.Series([1, 2, 200, 4], dtype="uint8"),
    "uint64": pd.Series([1, 2, 3, 2**63 + 5], dtype="uint64"),
    "float32": pd.Series([1.0, 2.5, 0.5, None], dtype="float32"),
    "float64": pd.Series([1.0, 2.5, 3.0, None], dtype="float64"),
    "bool": pd.Series([True, False, True, True], dtype=bool),
    "Int64": pd.Series([1, 2, None, 4], dtype="Int64"),
    "boolean": pd.Series([True, None, False, True], dtype="boolean"),
    "str": pd.Series(["1", "a", "b", None], dtype="str"),
    "string[pyarrow]": pd.Series(["1", "a", "c", None], dtype="string[pyarrow]"),
    "object": pd.Series([1, "1", 2.5, Decimal("2"), None, 1.0, Decimal("1.50"), True],
                        dtype=object),
    "datetime64[ns]": pd.Series(pd.to_datetime(["2020-01-01", "2020-01-02", None,
                                                "2021-01-01"])).astype("datetime64[ns]"),
    "datetime64[s]": pd.Series(pd.to_datetime(["2020-01-01", "2020-01-03", None,
                                               "2021-01-01"])).astype("datetime64[s]"),
    "timedelta64[ns]": pd.Series(pd.to_timedelta([1, 2, 3, None], unit="s")),
    "category": pd.Series(pd.Categorical(["1", "a", "b", "a"])),
    "decimal(15,3)": decimals(["1.000", "2.500", "3.125", None], 15, 3),
    "decimal(15,2)": decimals(["1.00", "2.50", "3.12", None], 15, 2),
    "decimal(38,10)": decimals(["1", "2.5", "7", None], 38, 10),
    "date32": pd.Series(days("2020-01-01", None, "2020-01-02", "2020-01-01"),
                        dtype=pd.ArrowDtype(pa.date32())),
}
"""Keys of each dtype, with values that other dtypes' keys equal (1, 2.5, "1", 2020-01-01) and
nulls where the dtype has them; the object key mixes ints, strings, floats, bools and Decimals."""

FAMILIES = {
    "int8": "int", "int64": "int", "Int64": "int", "uint8": "uint", "uint64": "uint64",
    "float32": "float", "float64": "float", "bool": "bool", "boolean": "bool", "str": "string",
    "string[pyarrow]": "string", "object": "object",
    "datetime64[ns]": "datetime", "datetime64[s]": "datetime", "timedelta64[ns]": "timedelta",
    "category": "category", "decimal(15,3)": "decimal", "decimal(15,2)": "decimal",
    "decimal(38,10)": "decimal", "date32": "date",
}
REFUSED_FAMILIES = [
    ({"uint64", "int"}, "no integer type holds both; float64 would merge keys above 2**53"),
    ({"bool", "float"}, "pandas compares them as objects, where True == 1.0"),
    ({"bool", "string"}, "pandas compares them as objects and finds no match"),
]
"""Pairs that pandas joins and gpuframe refuses, and why. So are categoricals with keys other
than strings and objects (pandas compares the categories' values), and Arrow dates with keys
other than dates and objects (pandas matches only their nulls)."""


def refused(left: str, right: str) -> bool:
    """Whether gpuframe refuses a pair of key dtypes that pandas joins."""
    families = {FAMILIES[left], FAMILIES[right]}
    if any(families == pair for pair, _ in REFUSED_FAMILIES):
        return True
    for own in ("category", "date"):
        if own in families and len(families) == 2:
            return not families & ({"string", "object"} if own == "category" else {"object"})
    return False


PAIRS = [(left, right) for left in KEYS for right in KEYS]


ROWS = 8
NUMBERS = {"left": "x", "right": "y"}
"""The column that numbers each side's rows."""


def frame(kind: str, side: str) -> pd.DataFrame:
    """``ROWS`` keys of ``kind`` (repeated, so keys repeat), the right side's in reverse, and
    the rows' numbers."""
    keys = pd.concat([KEYS[kind]] * ROWS, ignore_index=True)[:ROWS]
    if side == "right":
        keys = keys[::-1].reset_index(drop=True)
    return pd.DataFrame({"k": keys, NUMBERS[side]: np.arange(ROWS, dtype="int64")})


def pandas_outcome(left: str, right: str) -> pd.DataFrame | Exception:
    try:
        return frame(left, "left").merge(frame(right, "right"), on="k")
    except (ValueError, TypeError) as error:
        return error


def refused_as_built(left: str, right: str) -> bool:
    """Whether building the join (running nothing) raises a JoinError naming both keys."""
    try:
        gpuframe.from_pandas(frame(left, "left")).merge(
            gpuframe.from_pandas(frame(right, "right")), on="k")
    except JoinError as error:
        return "left column 'k'" in str(error) and "right column 'k'" in str(error)
    return False


def key_text(value: object) -> str:
    """A key's repr; a Decimal's of its value, whatever its scale: of the keys that only the
    right side has, pandas gives a right or outer join's as objects in the left key's scale,
    gpuframe in the scale of the pair's common decimal type (the key columns' dtypes are
    checked apart)."""
    return repr(value.normalize() if isinstance(value, Decimal) else value)


def as_rows(part: pd.DataFrame, pair: int) -> pd.DataFrame:
    """One pair's joined rows in a schema that every pair shares: the rows' left and right
    numbers (NaN where a side is missing), each key as its type and repr (None for a missing
    one), and the partition's key dtype."""
    keys = [None if pd.isna(v) else f"{type(v).__name__}:{key_text(v)}" for v in part["k"]]
    return pd.DataFrame({"pair": np.full(len(part), pair),
                         **{n: part[n].astype("float64").to_numpy() for n in ("x", "y")},
                         "key": pd.Series(keys, dtype=object),
                         "dtype": pd.Series([str(part["k"].dtype)] * len(part), dtype=object)})


ROWS_META = as_rows(pd.DataFrame({"k": [], "x": [], "y": []}), 0)


def comparable(rows: pd.DataFrame) -> list[tuple]:
    """The rows' numbers (-1 for a missing one) and keys, in order."""
    numbered = rows.fillna({"x": -1, "y": -1})
    return sorted(numbered[["x", "y", "key"]].itertuples(index=False, name=None),
                  key=lambda row: row[:2])


def joined_rows(joins: list, path: str) -> tuple[dict[int, pd.DataFrame], str]:
    """The rows of ``joins`` (gpuframe frames), run as one job, by their place in the list;
    and what explain() says of the job's plan."""
    everything = gpuframe.concat([joined.map_partitions(as_rows, i, meta=ROWS_META)
                                  for i, joined in enumerate(joins)])
    rows = everything.to_pandas()
    return dict(list(rows.groupby("pair"))), explained(everything)


@pytest.fixture(scope="module")
def sides(cpu_engine):
    """Per side and dtype, the frame of its keys in two partitions, run and counted once: the
    joins take them as they are, and a broadcast needs no sample of rows counted."""
    frames = {}
    for side in NUMBERS:
        for kind in KEYS:
            frames[side, kind] = gpuframe.from_pandas(frame(kind, side), npartitions=2,
                                                      engine=cpu_engine).persist()
            frames[side, kind].partition_lengths()
    return frames


def join_of(sides: dict, left: str, right: str, options: dict):
    """The join of ``left`` keys with ``right`` keys, each side taken from ``sides``."""
    return sides["left", left].merge(sides["right", right], on="k", **options)


@pytest.fixture(scope="module")
def outcomes():
    """pandas' result (or error) for every pair of key dtypes."""
    return {pair: pandas_outcome(*pair) for pair in PAIRS}


def test_pairs_that_pandas_refuses_are_refused_before_anything_runs(engine, outcomes):
    refusals = [pair for pair, outcome in outcomes.items() if isinstance(outcome, Exception)]
    assert len(refusals) > 100
    started = time.perf_counter()
    with get_task_stream(client=engine.client) as stream:
        assert [pair for pair in refusals if not refused_as_built(*pair)] == []
    assert stream.data == []
    assert time.perf_counter() - started < 10


def test_pairs_that_gpuframe_refuses_are_refused_before_anything_runs(engine, outcomes):
    refusals = [pair for pair, outcome in outcomes.items()
                if not isinstance(outcome, Exception) and refused(*pair)]
    assert len(refusals) > 40
    with get_task_stream(client=engine.client) as stream:
        assert [pair for pair in refusals if not refused_as_built(*pair)] == []
    assert stream.data == []


@pytest.mark.parametrize("path", PATHS)
def test_every_other_pair_joins_like_pandas(engine, sides, outcomes, path):
    """Same rows, same key values and types, and the key dtype pandas gives, in the frame's
    schema and in every partition."""
    joined = {pair: outcome for pair, outcome in outcomes.items()
              if not isinstance(outcome, Exception) and not refused(*pair)}
    assert len(joined) > 150
    started = time.perf_counter()
    frames = {pair: join_of(sides, *pair, PATHS[path]) for pair in joined}
    for pair, result in frames.items():
        assert result.dtypes["k"] == joined[pair].dtypes["k"], pair
    by_pair, explained = joined_rows(list(frames.values()), path)
    seconds = time.perf_counter() - started
    for i, (pair, expected) in enumerate(joined.items()):
        got = by_pair.get(i, ROWS_META)
        assert comparable(got) == comparable(as_rows(expected, i)), pair
        assert set(got["dtype"]) <= {str(expected.dtypes["k"])}, pair
    assert explained.count(STRATEGIES[path]) == len(joined)
    assert seconds < 60  # two workers on two shared cores


MIXED_PAIRS = [("object", "int8"), ("str", "object"), ("bool", "int64"),
               ("decimal(15,2)", "decimal(38,10)"), ("decimal(15,2)", "float64"),
               ("object", "decimal(15,2)")]
"""Pairs joined as objects or cast to a common decimal, whose unmatched rows the left, right
and outer joins keep."""


@pytest.mark.parametrize("path", PATHS)
def test_mixed_keys_join_like_pandas_in_every_join_type(engine, sides, path):
    cases = [(pair, how) for pair in MIXED_PAIRS for how in ("left", "right", "outer")]
    started = time.perf_counter()
    joins = [join_of(sides, *pair, {**PATHS[path], "how": how}) for pair, how in cases]
    by_pair, _ = joined_rows(joins, path)
    assert time.perf_counter() - started < 20
    for i, ((left, right), how) in enumerate(cases):
        expected = frame(left, "left").merge(frame(right, "right"), on="k", how=how)
        assert joins[i].dtypes["k"] == expected.dtypes["k"], (left, right, how)
        got = by_pair.get(i, ROWS_META)
        assert comparable(got) == comparable(as_rows(expected, i)), (left, right, how)


def explained(frame) -> str:
    text = io.StringIO()
    frame.explain(file=text)
    return text.getvalue()


@pytest.mark.parametrize("kind", ["object", "decimal(15,3)"])
def test_heavy_object_and_decimal_keys_split_over_workers_join_like_pandas(engine, kind):
    """A key of most rows on both sides is dealt over both workers: the split finds its rows by
    value, as the hash does."""
    left = pd.concat([frame(kind, "left")] * 50, ignore_index=True)
    right = frame("decimal(15,2)" if kind != "object" else "int8", "right")
    heavy = left.assign(k=left["k"].where(left.index % 4 != 0, KEYS[kind][0]))
    joined = gpuframe.from_pandas(heavy, npartitions=2).merge(
        gpuframe.from_pandas(right, npartitions=2), on="k", broadcast_bytes=0,
        broadcast_rows=0, skew_threshold=0.01)
    got = joined.to_pandas()
    assert "heavy keys split" in explained(joined)
    expected = heavy.merge(right, on="k")
    assert len(got) == len(expected) > 400
    assert comparable(as_rows(got, 0)) == comparable(as_rows(expected, 0))


def test_decimal_keys_of_no_common_decimal128_are_refused_naming_both_columns(engine):
    left = pd.DataFrame({"a": decimals(["1"], 38, 0)})
    right = pd.DataFrame({"b": decimals(["1"], 38, 10)})
    with pytest.raises(JoinError, match=r"left column 'a' .* right column 'b'.*decimal128"):
        gpuframe.from_pandas(left).merge(gpuframe.from_pandas(right), left_on="a", right_on="b")


@pytest.mark.parametrize("path", PATHS)
def test_unhashable_object_keys_are_refused_on_either_path(engine, path):
    """pandas joins list keys in some cases only; gpuframe names the column on every path."""
    left = pd.DataFrame({"k": pd.Series([[1], [2], (1,)], dtype=object), "x": [1, 2, 3]})
    right = pd.DataFrame({"k": pd.Series([[1], (1,)], dtype=object), "y": [1, 2]})
    joined = gpuframe.from_pandas(left, npartitions=2).merge(
        gpuframe.from_pandas(right, npartitions=2), on="k", **PATHS[path])
    with pytest.raises(UnhashableKeyError, match=r"column 'k'.*list"):
        joined.to_pandas()


@pytest.fixture(scope="module")
def decimal_parquet(tmp_path_factory):
    """Two Parquet files whose keys are decimal(15,3) and decimal(15,2), a third of the left
    keys with a third decimal digit."""
    root = tmp_path_factory.mktemp("decimal-keys")
    rng = np.random.default_rng(5)
    cents = rng.integers(0, 20_000, 6_000)
    mills = cents * 10 + np.where(np.arange(6_000) % 3 == 0, 5, 0)
    left = pa.table({"k": pa.array([Decimal(int(v)).scaleb(-3) for v in mills],
                                   pa.decimal128(15, 3)),
                     "x": np.arange(6_000)})
    right = pa.table({"k": pa.array([Decimal(int(v)).scaleb(-2)
                                     for v in rng.integers(0, 20_000, 4_000)],
                                    pa.decimal128(15, 2)),
                      "y": np.arange(4_000),
                      "price": pa.array([Decimal(int(v)).scaleb(-2)
                                         for v in rng.integers(0, 10**6, 4_000)],
                                        pa.decimal128(12, 2))})
    pq.write_table(left, root / "left.parquet", row_group_size=2_000)
    pq.write_table(right, root / "right.parquet", row_group_size=2_000)
    return root


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def either_engine(request):
    """The session's CPU engine, then (where there are GPUs) the module's cuDF one: cuDF's
    decimals take another path to the hash (its meta holds them as objects)."""
    from gpuframe.cluster.engine import set_current

    return set_current(request.getfixturevalue(f"{request.param}_engine"))


@pytest.mark.parametrize("path", PATHS)
def test_parquet_decimal_keys_of_two_scales_join_by_value(either_engine, decimal_parquet,
                                                          path):
    """As pandas and DuckDB join them; the key and the other decimal column stay decimals, in
    the frame, its partitions, and to_dask()'s meta."""
    import duckdb

    left_file, right_file = decimal_parquet / "left.parquet", decimal_parquet / "right.parquet"
    expected = pd.read_parquet(left_file).merge(pd.read_parquet(right_file), on="k")
    counted = duckdb.sql(f"select count(*) from '{left_file}' l join '{right_file}' r "
                         "on l.k = r.k").fetchone()[0]
    assert len(expected) == counted > 500
    started = time.perf_counter()
    joined = gpuframe.read_parquet(str(left_file)).merge(
        gpuframe.read_parquet(str(right_file)), on="k", **PATHS[path])
    got = joined.to_pandas()
    assert time.perf_counter() - started < 10
    assert len(got) == counted
    decimal_columns = {"k": pa.decimal128(15, 3), "price": pa.decimal128(12, 2)}
    for name, kind in decimal_columns.items():
        assert joined.dtypes[name] == got.dtypes[name] == pd.ArrowDtype(kind), name
        assert joined.to_dask()._meta.dtypes[name] == pd.ArrowDtype(kind), name
    pd.testing.assert_frame_equal(got.sort_values(["x", "y"]).reset_index(drop=True),
                                  expected.sort_values(["x", "y"]).reset_index(drop=True),
                                  check_dtype=False)
