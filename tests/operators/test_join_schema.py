"""The schema functions of a join, without a cluster: pandas.merge on small frames is the oracle."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from gpuframe.backend import get_backend
from gpuframe.errors import JoinError
from gpuframe.operators.join_schema import (
    conform,
    hash_type,
    join_keys,
    key_types,
    result_meta,
)

PANDAS, CUDF = get_backend("pandas"), get_backend("cudf")


def values(keys: list[int]) -> pd.DataFrame:
    """One column of each kind beside key ``k``, a row per key."""
    n = len(keys)
    return pd.DataFrame({
        "k": keys, "i8": np.arange(n, dtype="int8"), "u64": np.arange(n, dtype="uint64"),
        "b": np.arange(n) % 2 == 0, "f32": np.arange(n, dtype="float32"),
        "I": pd.array(range(n), dtype="Int64"), "s": pd.array(["x"] * n, dtype="str"),
        "o": [Decimal(i) for i in range(n)], "c": pd.Categorical(["p"] * n),
        "t": pd.date_range("2024", periods=n, unit="s"),
        "tz": pd.date_range("2024", periods=n, tz="Asia/Tokyo"),
        "d": pd.array([Decimal(i) for i in range(n)], dtype=pd.ArrowDtype(pa.decimal128(5, 0))),
    })


LEFT, RIGHT = values([1, 2, 3]), values([2, 3, 4])  # each with a key the other lacks


def meta_of(left: pd.DataFrame, right: pd.DataFrame, how: str, backend=PANDAS,
            suffixes=("_x", "_y"), empty=frozenset(), **on) -> pd.DataFrame:
    left_keys, right_keys = join_keys(left, right, on.get("on"), on.get("left_on"),
                                      on.get("right_on"))
    types = key_types(left, right, left_keys, right_keys, how, suffixes, backend, empty)
    return result_meta(left.head(0), right.head(0), how, left_keys, right_keys, suffixes, types,
                       backend, empty)


@pytest.mark.parametrize("how", ["inner", "left", "right", "outer"])
def test_the_schema_is_pandas_for_rows_of_which_some_are_unmatched(how):
    meta = meta_of(LEFT, RIGHT, how, on="k")
    expected = LEFT.merge(RIGHT, on="k", how=how)
    assert list(meta.columns) == list(expected.columns)
    assert list(meta.dtypes) == list(expected.dtypes)


@pytest.mark.parametrize("how", ["left", "right", "outer"])
def test_rows_that_all_match_get_the_same_schema(how):
    """pandas keeps int64 where no row is unmatched; every partition takes the dtype of a join
    with unmatched rows instead, so that they all have one."""
    meta = meta_of(LEFT, LEFT, how, on="k")
    assert list(meta.dtypes) == list(LEFT.merge(RIGHT, on="k", how=how).dtypes)
    assert list(meta.dtypes) != list(LEFT.merge(LEFT, on="k", how=how).dtypes)


@pytest.mark.parametrize("how", ["left", "right", "outer"])
@pytest.mark.parametrize("empty_side", ["left", "right"])
def test_a_side_of_no_partitions_leaves_none_unmatched(how, empty_side):
    sides = {"left": LEFT, "right": RIGHT}
    sides[empty_side] = sides[empty_side].head(0)
    meta = meta_of(sides["left"], sides["right"], how, empty=frozenset({empty_side}), on="k")
    assert list(meta.dtypes) == list(sides["left"].merge(sides["right"], on="k", how=how).dtypes)


@pytest.mark.parametrize("how", ["left", "right", "outer"])
def test_keys_of_other_names_are_filled_like_other_columns(how):
    """And pandas coerces only the left key of a pair of two names: a str right key joined with
    an object left key stays str."""
    left = pd.DataFrame({"a": np.array([1, 2], "int8"), "b": pd.Series(["x", "u"], dtype=object)})
    right = pd.DataFrame({"c": [2, 3], "d": pd.array(["u", "v"], "str")})
    for on in ({"left_on": "a", "right_on": "c"}, {"left_on": "b", "right_on": "d"}):
        meta = meta_of(left, right, how, **on)
        assert list(meta.dtypes) == list(left.merge(right, how=how, **on).dtypes), on


def test_colliding_names_are_typed_by_position():
    left = pd.DataFrame({"k": [1, 2], "v": [1, 2]})
    right = pd.DataFrame({"k": [2, 3], "v": [3, 4]})
    meta = meta_of(left, right, "right", suffixes=("_x", "_x"), on="k")
    expected = left.merge(right, on="k", how="right", suffixes=("_x", "_x"))
    assert list(meta.columns) == ["k", "v_x", "v_x"]
    assert list(meta.dtypes) == list(expected.dtypes)


@pytest.mark.parametrize("how", ["leftsemi", "leftanti"])
def test_semi_and_anti_joins_keep_the_left_schema(how):
    assert list(meta_of(LEFT, RIGHT, how, on="k").dtypes) == list(LEFT.dtypes)


def test_on_the_gpu_missing_bools_are_nullable_and_ints_float():
    """cuDF's to_pandas gives a bool column with a missing value as object and one without as
    bool; the nullable boolean is what all partitions can share."""
    meta = meta_of(LEFT, RIGHT, "left", backend=CUDF, on="k")
    assert meta["b_y"].dtype == pd.BooleanDtype()
    assert meta["b_x"].dtype == np.dtype(bool)
    assert meta["i8_y"].dtype == meta["u64_y"].dtype == np.dtype("float64")
    assert meta["I_y"].dtype == pd.Int64Dtype()


@pytest.mark.parametrize("how", ["left", "right", "outer"])
def test_partitions_with_and_without_unmatched_rows_conform_alike(how):
    """One partition whose rows all match and one with unmatched rows: as pandas joins them
    their dtypes differ; conformed, both have those of the whole join."""
    meta = meta_of(LEFT, RIGHT, how, on="k")
    matched = conform(LEFT[1:].merge(RIGHT[:2], on="k", how=how), meta, PANDAS)
    unmatched = conform(LEFT.merge(RIGHT, on="k", how=how), meta, PANDAS)
    expected = LEFT.merge(RIGHT, on="k", how=how)
    assert list(matched.dtypes) == list(unmatched.dtypes) == list(expected.dtypes)
    pd.testing.assert_frame_equal(unmatched, expected)
    pd.testing.assert_frame_equal(matched, LEFT[1:].merge(RIGHT[:2], on="k", how=how),
                                  check_dtype=False)


def test_conform_leaves_a_partition_of_the_schema_as_it_is():
    joined = LEFT.merge(RIGHT, on="k", how="outer")
    assert conform(joined, joined.head(0), PANDAS) is joined


def test_conform_puts_the_columns_in_the_schemas_order():
    """cuDF's right join can give the columns in another order than pandas' (the key first,
    where pandas keeps the left's columns first): conformed, each column is cast as its own
    name's, not as the one in its place."""
    left = LEFT[[*LEFT.columns[1:], "k"]]  # the key last, as the ported case has it
    meta = meta_of(left, RIGHT, "right", on="k")
    joined = left.merge(RIGHT, on="k", how="right")
    reordered = joined[joined.columns[::-1]]
    got = conform(reordered, meta, PANDAS)
    assert list(got.columns) == list(meta.columns)
    assert list(got.dtypes) == list(meta.dtypes)
    pd.testing.assert_frame_equal(got, conform(joined, meta, PANDAS))
    assert list(conform(joined, meta, PANDAS).columns) == list(joined.columns)


@pytest.mark.parametrize("how", ["inner", "left", "right", "outer"])
def test_on_the_gpu_a_key_of_integers_against_objects_or_bools_keeps_its_hash_type(how):
    """pandas gives such a key as objects, which cuDF cannot hold: there it stays in the
    pair's hash type, a nullable integer, and the other columns are as pandas gives them."""
    ints = pd.DataFrame({"k": [2, 3, 5], "b": ["x", "y", "z"]})
    objects = pd.DataFrame({"k": pd.Series([1, 2, 3], dtype=object), "a": [1, 2, 3]})
    bools = pd.DataFrame({"kk": [True, False, True], "a": [1.0, 2.0, 3.0]})
    assert meta_of(objects, ints, how, on="k")["k"].dtype == np.dtype(object)
    assert meta_of(objects, ints, how, backend=CUDF, on="k")["k"].dtype == pd.Int64Dtype()
    on_pandas = meta_of(ints, bools, how, left_on="k", right_on="kk")
    meta = meta_of(ints, bools, how, backend=CUDF, left_on="k", right_on="kk")
    assert on_pandas["k"].dtype == np.dtype(object) and meta["k"].dtype == pd.Int64Dtype()
    assert meta.drop(columns="k").dtypes.equals(on_pandas.drop(columns="k").dtypes) or \
        how in ("left", "outer")  # where the bool side may be unmatched, cuDF's is nullable
    assert list(meta.columns) == list(on_pandas.columns)


def decimal(precision: int, scale: int) -> pd.ArrowDtype:
    return pd.ArrowDtype(pa.decimal128(precision, scale))


@pytest.mark.parametrize("left, right, common", [
    ((15, 3), (15, 2), (16, 3)), ((15, 2), (15, 3), (16, 3)), ((38, 10), (5, 0), (38, 10)),
    ((10, 0), (10, 10), (20, 10)), ((12, 2), (12, 2), (12, 2)), ((38, 0), (38, 10), None),
])
def test_decimal_keys_hash_as_the_narrowest_decimal128_that_holds_both(left, right, common):
    for backend in (PANDAS, CUDF):
        found = hash_type(decimal(*left), decimal(*right), backend)
        assert found == (None if common is None else decimal(*common))


def test_decimal_keys_keep_their_own_type_as_pandas_gives_it():
    """Where rows are unmatched (the rule for every partition), pandas gives objects for a key
    that may come from either side."""
    left = pd.DataFrame({"k": pd.Series([Decimal("1.500"), Decimal("2")], dtype=decimal(15, 3))})
    right = pd.DataFrame({"k": pd.Series([Decimal("1.50"), Decimal("3")], dtype=decimal(15, 2)),
                          "v": [1, 2]})
    for how in ("inner", "left", "right", "outer"):
        meta = meta_of(left, right, how, on="k")
        assert list(meta.dtypes) == list(left.merge(right, on="k", how=how).dtypes), how


def test_decimal_keys_of_no_common_decimal128_are_refused_naming_both():
    left = pd.DataFrame({"a": pd.Series([], dtype=decimal(38, 0))})
    right = pd.DataFrame({"b": pd.Series([], dtype=decimal(38, 10))})
    with pytest.raises(JoinError, match=r"'a' \(decimal128\(38, 0\).*'b' .*no decimal128"):
        meta_of(left, right, "inner", left_on="a", right_on="b")


OBJECT = np.dtype(object)


@pytest.mark.parametrize("other", ["int64", "uint64", "float32", "bool", "boolean", "str",
                                   "object", pd.CategoricalDtype(["a", "b"]), "Int8"])
def test_object_keys_hash_as_objects_where_the_backend_holds_them(other):
    """As pandas compares them, by value and type; cuDF holds no objects: there an object key
    holds strings or integers, and hashes as such."""
    other = pd.api.types.pandas_dtype(other)
    assert hash_type(OBJECT, other, PANDAS) == OBJECT
    assert hash_type(other, OBJECT, PANDAS) == OBJECT
    on_gpu = hash_type(OBJECT, other, CUDF)
    assert on_gpu is None or on_gpu == "str" or pd.api.types.is_integer_dtype(on_gpu)


@pytest.mark.parametrize("left, right", [
    ("bool", "int8"), ("boolean", "Int64"), (decimal(10, 2), "int64"),
    (decimal(10, 2), "float64"), (decimal(10, 2), "bool")])
def test_pairs_that_pandas_compares_as_objects_hash_as_objects(left, right):
    left, right = (pd.api.types.pandas_dtype(t) for t in (left, right))
    assert hash_type(left, right, PANDAS) == hash_type(right, left, PANDAS) == OBJECT


@pytest.mark.parametrize("other", ["datetime64[ns]", "datetime64[us, UTC]", "timedelta64[s]"])
def test_object_keys_with_times_are_refused_as_pandas_refuses_them(other):
    assert hash_type(OBJECT, pd.api.types.pandas_dtype(other), PANDAS) is None
