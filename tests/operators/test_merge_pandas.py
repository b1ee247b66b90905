"""Cases ported from pandas' own merge tests (``pandas/tests/reshape/merge/test_merge.py`` and
``test_multi.py``; the test each case comes from is in its id), run through ``gpuframe.merge`` by
shuffle and by broadcast. Each asserts that (a) the schema the join reports is the dtypes of the
data it gathers, (b) the rows are pandas.merge's, and (c) the dtypes are pandas': where pandas
decides a dtype by the data (an int column stays int64 in a left join whose rows all match and
turns float64 once one does not), the expected dtypes are pandas' for the same join with
unmatched rows, made by dropping a matched key from one side or the other. On GPUs (the gpu
marker) the same cases assert (a) and (b).

pandas' tests join on the index too; gpuframe joins on columns, so such cases join on a column
holding the index's values. Key pairs gpuframe refuses (category with int, bool with float) are
left out: tests/operators/test_join.py covers the refusals. Cases of merge's options (pandas 3's
anti joins, cross, indicator=, sort=, validate=, and object or bool keys with int keys) follow
the cases of keys and types.
"""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import gpuframe
from gpuframe.frame import DistributedFrame
from gpuframe.plan.nodes import Persisted
from gpuframe.runtime.runner import Partitions

PATHS = {"shuffle": {"broadcast_bytes": 0},
         "broadcast": {"broadcast_bytes": 2**40, "broadcast_ratio": None, "broadcast_rows": 0},
         "unsampled broadcast": {}}
HOWS = ("inner", "left", "right", "outer")
ALL_HOWS = (*HOWS, "leftsemi", "leftanti")
FOUND = "__found__"
KEPT_UNMATCHED = {"left": {"left_only"}, "right": {"right_only"},
                  "outer": {"left_only", "right_only"}}
"""Per join type, the sides whose unmatched rows the result keeps."""


def case(name: str, left: pd.DataFrame, right: pd.DataFrame, how: str = "inner",
         **keys: Any) -> Any:
    """One join: ``keys`` are merge's on=, left_on=, right_on= and suffixes=."""
    return pytest.param(left, right, how, keys, id=f"{name}-{how}")


def every_how(name: str, left: pd.DataFrame, right: pd.DataFrame,
              hows: tuple[str, ...] = HOWS, **keys: Any) -> list[Any]:
    return [case(name, left, right, how, **keys) for how in hows]


def frame(**columns: Any) -> pd.DataFrame:
    return pd.DataFrame(columns)


def key_data(ngroups: int = 8, n: int = 50) -> np.ndarray:
    """pandas' get_test_data: ``n`` values of ``ngroups`` groups, shuffled."""
    values = np.tile(np.arange(ngroups), n // ngroups + 1)[:n]
    np.random.default_rng(2).shuffle(values)
    return values


def _fixtures() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(2)
    df = frame(key1=key_data(), key2=key_data(), data1=rng.standard_normal(50),
               data2=rng.standard_normal(50))
    multi_left = frame(
        key1=["bar", "bar", "bar", "foo", "foo", "baz", "baz", "qux", "qux", "snap"],
        key2=["two", "one", "three", "one", "two", "one", "two", "two", "three", "one"],
        data=rng.standard_normal(10))
    return {
        "df": df[df["key2"] > 1],
        "df2": frame(key1=key_data(n=10), key2=key_data(ngroups=4, n=10),
                     value=rng.standard_normal(10)),
        "left": frame(key=["a", "b", "c", "d", "e", "e", "a"], v1=rng.standard_normal(7)),
        "cat_left": frame(X=pd.Categorical(rng.choice(["foo", "bar"], 10),
                                           categories=["foo", "bar"]),
                          Y=rng.choice(["one", "two", "three"], 10)),
        "cat_right": frame(X=pd.Categorical(["foo", "bar"], categories=["foo", "bar"]),
                           Z=[1, 2]),
        "multi_left": multi_left,
        "multi_right": frame(key1=["foo", "foo", "bar", "baz", "qux", "qux", "snap"],
                             key2=["one", "two", "one", "two", "two", "three", "three"],
                             j_one=rng.standard_normal(7), j_two=rng.integers(0, 9, 7)),
    }


F = _fixtures()  # the frames of pandas' fixtures that the cases use
TZ_KEYS = pd.date_range("20151010", periods=2, tz="US/Eastern")
DST = pd.date_range("2017-10-29 01:00", periods=4, freq="h", tz="Europe/Madrid")
EMPTY_DTYPES = {
    "int64": pd.Series([1], dtype="int64"), "Int64": pd.Series([1], dtype="Int64"),
    "float": pd.Series([1.23]), "str": pd.Series(["foo"]), "bool": pd.Series([True]),
    "datetime": pd.Series([pd.Timestamp("2018-01-01")]),
    "tz": pd.Series([pd.Timestamp("2018-01-01", tz="US/Eastern")]),
}
ALL_NA = {"Int64": pd.Series([pd.NA], dtype="Int64"), "float": pd.Series([np.nan]),
          "object": pd.Series([np.nan], dtype="object"), "NaT": pd.Series([pd.NaT])}
UMAX, IMIN = np.iinfo(np.uint64).max, np.iinfo(np.int64).min
DECIMAL = pd.ArrowDtype(pa.decimal128(9, 2))
CATEGORY_DATES = pd.CategoricalDtype([date(2001, 1, 1), date(2001, 1, 2), date(2001, 1, 3)])

CASES = [
    # TestMerge
    *every_how("merge_common", F["df"], F["df2"], ALL_HOWS),
    *every_how("merge_overlap", F["left"], F["left"], ("inner", "outer"), on="key"),
    *every_how("different_column_key_names",
               frame(lkey=["foo", "bar", "baz", "foo"], value=[1, 2, 3, 4]),
               frame(rkey=["foo", "bar", "qux", "foo"], value=[5, 6, 7, 8]), ALL_HOWS,
               left_on="lkey", right_on="rkey"),
    *every_how("intelligently_handle_join_key",
               frame(value=range(5), key=[1, 1, 2, 2, 3]),
               frame(key=[1, 1, 2, 3, 4, 5], rvalue=range(6)), ("left", "right", "outer"),
               on="key"),
    case("join_key_dtype_cast_int", frame(key=[1], v1=[10]), frame(key=[2], v1=[20]),
         "outer"),
    case("join_key_dtype_cast_bool", frame(key=[True], v1=[1]), frame(key=[False], v1=[0]),
         "outer"),
    case("left_merge_empty_dataframe", frame(key=[1], value=[2]),
         frame(key=pd.Series([], dtype="int64")), "left", on="key"),
    case("left_merge_empty_dataframe", frame(key=pd.Series([], dtype="int64")),
         frame(key=[1], value=[2]), "right", on="key"),
    *every_how("merge_left_empty_right_notempty",
               frame(a=pd.Series([], dtype="int64"), b=pd.Series([], dtype="int64"),
                     c=pd.Series([], dtype="float64")),
               frame(x=[1, 4, 7], y=[2, 5, 8], z=[3, 6, 9]), left_on="a", right_on="x"),
    *every_how("merge_left_notempty_right_empty",
               frame(a=[1, 4, 7], b=[2, 5, 8], c=[3, 6, 9]),
               frame(x=pd.Series([], dtype="int64"), y=pd.Series([], dtype="str"),
                     z=pd.Series([], dtype="bool")), left_on="a", right_on="x"),
    *[case(f"merge_empty_frame_{k}_{v}", frame(key=EMPTY_DTYPES[k], value=EMPTY_DTYPES[v])[:0],
           frame(key=EMPTY_DTYPES[k], value=EMPTY_DTYPES[v]), how, on="key")
      for k, v, how in (("int64", "Int64", "inner"), ("float", "str", "inner"),
                        ("str", "bool", "right"), ("datetime", "tz", "outer"),
                        ("tz", "int64", "right"), ("bool", "datetime", "left"))],
    *[case(f"merge_all_na_column_{k}_{v}", frame(key=EMPTY_DTYPES[k], value=ALL_NA[v]),
           frame(key=EMPTY_DTYPES[k], value=ALL_NA[v]), "inner", on="key")
      for k, v in (("int64", "Int64"), ("str", "float"), ("datetime", "NaT"),
                   ("tz", "object"))],
    *every_how("merge_nosort",
               frame(var1=np.random.default_rng(2).integers(0, 10, 10),
                     var3=[datetime(2012, 1, 12), datetime(2011, 2, 4), datetime(2010, 2, 3),
                           datetime(2012, 1, 12), datetime(2011, 2, 4), datetime(2012, 4, 3),
                           datetime(2012, 3, 4), datetime(2008, 5, 1), datetime(2010, 2, 3),
                           datetime(2012, 2, 3)]),
               frame(var3=pd.to_datetime(["2008-05-01", "2010-02-03", "2011-02-04",
                                          "2012-01-12", "2012-02-03", "2013-01-01"]),
                     var8=np.random.default_rng(2).random(6)), ("inner", "left"), on="var3"),
    *every_how("same_order_left_right", frame(a=[1, 0, 1]), frame(a=[1, 0, 1]),
               ("left", "right"), on="a"),
    case("merge_nan_right", frame(i1=[0, 1], i2=[0, 1]), frame(i1=[0], i3=[0]), "left",
         on="i1", suffixes=("", "_")),
    case("merge_nan_right2", frame(i1=[0, 1], i2=[0.5, 1.5]), frame(i1=[0], i3=[0.7]), "left",
         on="i1", suffixes=("", "_")),
    case("join_append_timedeltas2",
         frame(k=["A", "B"], t=pd.to_timedelta([300_000_000] * 2, "ns")),
         frame(k=["A"], t=pd.to_timedelta([300_000_000], "ns")), "left", on="k",
         suffixes=("", "r")),
    *[case(f"other_datetime_unit_{unit}", frame(entity_id=[101, 102]),
           frame(id=[101, 102], days=pd.Series([None, None], dtype=f"datetime64[{unit}]")),
           "inner", left_on="entity_id", right_on="id") for unit in ("s", "ms", "us", "ns")],
    *[case(f"other_timedelta_unit_{unit}", frame(entity_id=[101, 102, 103]),
           frame(id=[101, 102], days=pd.Series([None, None], dtype=f"m8[{unit}]")),
           "left", left_on="entity_id", right_on="id") for unit in ("s", "ns")],
    *every_how("merge_on_datetime64tz", frame(key=TZ_KEYS, value=[1, 2]),
               frame(key=pd.date_range("20151011", periods=3, tz="US/Eastern"),
                     value=[1, 2, 3]), ("outer", "left"), on="key"),
    case("merge_datetime64tz_values",
         frame(key=[1, 2], value=pd.date_range("20151010", periods=2, tz="US/Eastern",
                                               unit="ns")),
         frame(key=[2, 3], value=pd.date_range("20151011", periods=2, tz="US/Eastern",
                                               unit="ns")), "outer", on="key"),
    case("merge_on_datetime64tz_empty",
         frame(date=pd.DatetimeIndex([], dtype="datetime64[ns, UTC]"),
               value=pd.Series([], dtype=float),
               date2=pd.DatetimeIndex([], dtype="datetime64[ns, UTC]")),
         frame(date=pd.DatetimeIndex(["2018"], dtype="datetime64[ns, UTC]"), value=[4.0],
               date2=pd.DatetimeIndex(["2019"], dtype="datetime64[ns, UTC]")),
         "inner", on="date"),
    case("merge_datetime64tz_with_dst_transition", frame(date=DST, value=1),
         frame(date=pd.to_datetime(["2017-10-29 03:00", "2017-10-29 04:00",
                                    "2017-10-29 05:00"]).tz_localize("UTC")
               .tz_convert("Europe/Madrid"), value=2), "outer", on="date"),
    # TestMergeDtypes
    *[case(f"different_{dtype}",
           frame(A=["foo", "bar"], B=pd.Categorical(["foo", "bar"]), C=[1, 2], D=[1.0, 2.0],
                 E=pd.Series([1, 2], dtype="uint64"), F=pd.Series([1, 2], dtype="int32")),
           frame(A=pd.Series(["foo", "bar", "baz"], dtype=dtype)), how, on="A")
      for dtype, how in (("object", "inner"), ("category", "right"), ("object", "outer"))],
    *[case(f"join_multi_dtypes_{d1}_{d2}",
           frame(k1=np.array([0, 1, 2] * 8, dtype=d1), k2=["foo", "bar"] * 12,
                 v=np.arange(24)),
           frame(k1=np.array([2, 1], dtype=d1), k2=["bar", "foo"],
                 v2=np.array([5, 7], dtype=d2)), "left", on=["k1", "k2"])
      for d1, d2 in (("int8", "int64"), ("uint16", "float32"), ("int32", "float64"),
                     ("uint64", "int64"))],
    *[case(f"merge_on_ints_floats_{i}", frame(X=ints), frame(Y=floats), how, left_on="X",
           right_on="Y")
      for i, (ints, floats, how) in enumerate((([1, 2, 3], [1.0, 2.0, 3.0], "inner"),
                                               ([1, 2, 3], [1.0, 3.0], "left"),
                                               ([1, 2], [1.0, 2.0, 3.0], "right")))],
    case("merge_key_dtype_cast", frame(key=[1.0, 2.0], v1=[10, 20]), frame(key=[2], v2=[200]),
         "left", on="key"),
    *[case(f"merge_EA_dtype_{dtype}", pd.DataFrame({"id": [1]}, dtype=dtype),
           pd.DataFrame({"id": [2]}, dtype=dtype), how)
      for dtype, how in (("Int64", "outer"), ("UInt8", "left"), ("Float32", "right"),
                         ("Int16", "inner"))],
    *[case(f"merge_string_dtype_{dtype}", pd.DataFrame({"id": ["a"]}, dtype=dtype),
           pd.DataFrame({"id": ["b"]}, dtype=dtype), how)
      for dtype, how in (("str", "outer"), ("string[python]", "left"),
                         ("string[pyarrow]", "right"))],
    *every_how("merge_bool_dtype", frame(A=[True, False], B=[1, 5]),
               frame(A=[False, True], C=[3, 4])),
    *every_how("merge_empty_left_empty", frame(A=[2, 1], B=[3, 4])[:0],
               pd.DataFrame({"A": [1], "C": [5]}, dtype="int64"), ALL_HOWS),
    *every_how("merge_empty_right_empty", frame(A=[2, 1], B=[3, 4]),
               pd.DataFrame({"A": [1], "C": [5]}, dtype="int64")[:0], ALL_HOWS),
    case("merge_with_uintc_columns", frame(a=["foo", "bar"], b=np.array([1, 2], np.uintc)),
         frame(a=["foo", "baz"], b=np.array([3, 4], np.uintc)), "outer"),
    case("merge_with_intc_columns", frame(a=["foo", "bar"], b=np.array([1, 2], np.intc)),
         frame(a=["foo", "baz"], b=np.array([3, 4], np.intc)), "outer"),
    # TestMergeCategorical
    case("identical", F["cat_left"], F["cat_left"], "inner", on="X"),
    *every_how("basic", F["cat_left"], F["cat_right"], ("inner", "right"), on="X"),
    *[case(f"merge_categorical_{kind}",
           frame(a=["f"] * 5, b=pd.Series(["g"] * 4 + ["a"], dtype=lt)),
           frame(c=["a", "b", "c", "d", "e"], d=pd.Series(["null"] * 5, dtype=rt)), "left",
           left_on="b", right_on="c")
      for kind, lt, rt in (("object_object", "object", "object"),
                           ("object_cat", "object", "category"),
                           ("cat_cat", "category", "category"))],
    case("merge_categorical_unordered_equal",
         frame(Foo=pd.Categorical(["A", "B", "C"]), Left=["A0", "B0", "C0"]),
         frame(Foo=pd.Categorical(["C", "B", "A"], categories=["C", "B", "A"]),
               Right=["C1", "B1", "A1"]), "inner", on="Foo"),
    case("other_columns", F["cat_left"], F["cat_right"].astype({"Z": "category"}), "inner",
         on="X"),
    *[case(f"dtype_on_merged_different_{i}", F["cat_left"],
           frame(X=change(pd.Series(["foo", "bar", "bah"], dtype=object)), Z=[1, 2, 3]), how,
           on="X")
      for i, (change, how) in enumerate((
          (lambda x: x, "left"),
          (lambda x: x.astype(pd.CategoricalDtype(["foo", "bar", "bah"])), "outer"),
          (lambda x: x.astype(pd.CategoricalDtype(ordered=True)), "right")))],
    case("self_join_multiple_categories",
         frame(a=list("abcdefghij") * 2, b=list("twxyz") * 4,
               c=[x for x in "mnupo" for _ in range(4)]).astype("category"),
         frame(a=list("abcdefghij") * 2, b=list("twxyz") * 4,
               c=[x for x in "mnupo" for _ in range(4)]).astype("category"), "inner"),
    *every_how("dtype_on_categorical_dates",
               frame(date=pd.Series([date(2001, 1, 1), date(2001, 1, 2)], dtype=CATEGORY_DATES),
                     num2=[1.1, 1.3]),
               frame(date=pd.Series([date(2001, 1, 1), date(2001, 1, 3)], dtype=CATEGORY_DATES),
                     num4=[1.3, 1.4]), ("outer", "inner"), on="date"),
    *[case(f"merging_with_bool_or_int_categorical_column_{i}",
           frame(id=[1, 2, 3, 4], cat=pd.Categorical(values, categories=categories,
                                                     ordered=ordered)),
           frame(id=[2, 4, 5], num=[1, 9, 0]), how)
      for i, (values, categories, ordered, how) in enumerate((
          ([False, True, True, False], [True, False], False, "inner"),
          ([2, 1, 1, 2], [1, 2], True, "right"),
          (["False", "True", "True", "False"], ["True", "False"], False, "outer")))],
    case("merge_on_int_array", frame(A=pd.Series([1, 2, pd.NA], dtype="Int64"), B=1),
         frame(A=pd.Series([1, 2, pd.NA], dtype="Int64"), B=1), "inner", on="A"),
    # module-level tests of test_merge.py
    *[case(f"merge_suffix_{i}", frame(k=[1, 2, 3], a=[1, 2, 3]), frame(k=[1, 2, 4], a=[4, 5, 6]),
           how, on="k", suffixes=suffixes)
      for i, (suffixes, how) in enumerate(((("", "_dup"), "left"), ((None, "_dup"), "right"),
                                           (("_x", None), "outer"), (("_a", "_b"), "inner")))],
    *every_how("merge_duplicate_suffix", frame(A=[100, 200, 1], B=[60, 70, 80]),
               frame(A=[100, 200, 300], B=[600, 700, 800]), ("right", "outer"), on="A",
               suffixes=("_x", "_x")),
    case("merge_equal_cat_dtypes",
         frame(foo=pd.Categorical(["a", "b", "c"]), left=[1, 2, 3]),
         frame(foo=pd.Categorical(["c", "b", "a"], categories=["a", "b", "c"]),
               right=[3, 2, 1]), "inner", on="foo"),
    case("merge_datetime_upcast_dtype", frame(x=["a", "b", "c"], y=["1", "2", "4"]),
         frame(y=["1", "2", "3"], z=pd.to_datetime(["2000", "2001", "2002"])), "left", on="y"),
    *[case(f"merge_outer_with_NaN_{dtype}_{order}", *sides, "outer", on="key")
      for dtype, item in ((None, np.nan), ("Int64", pd.NA))
      for order, sides in enumerate((
          (pd.DataFrame({"key": [1, 2], "col1": [1, 2]}, dtype=dtype),
           pd.DataFrame({"key": [item, item], "col2": [3, 4]}, dtype=dtype)),
          (pd.DataFrame({"key": [item, item], "col2": [3, 4]}, dtype=dtype),
           pd.DataFrame({"key": [1, 2], "col1": [1, 2]}, dtype=dtype))))],
    *[case(f"merge_ea_{dtype}", pd.DataFrame({"a": [1, 2, 3], "b": 1}, dtype=dtype),
           pd.DataFrame({"a": [1, 2, 4], "c": 2}, dtype=dtype), how)
      for dtype, how in (("Int64", "left"), ("UInt16", "outer"), ("Float64", "right"))],
    *[case(f"merge_ea_and_non_ea_{dtype}", pd.DataFrame({"a": [1, 2, 3], "b": 1}, dtype=dtype),
           pd.DataFrame({"a": [1, 2, 5], "c": 2}, dtype=dtype.lower()), how)
      for dtype, how in (("Int32", "inner"), ("Int64", "outer"), ("Float32", "left"))],
    case("merge_arrow_and_numpy_dtypes", frame(a=pd.Series([1, 2], dtype="int64")),
         frame(a=pd.Series([1, 3], dtype="int64[pyarrow]")), "left"),
    *[case(f"merge_datetime_different_resolution_{tz}_{lu}_{ru}",
           frame(t=pd.Series(pd.date_range("2023-05-12", periods=2, tz=tz)).dt.as_unit(lu),
                 a=[1.0, 2.0]),
           frame(t=pd.Series(pd.date_range("2023-05-13", periods=2, tz=tz)).dt.as_unit(ru),
                 b=[1.0, 2.0]), how, on="t")
      for tz, lu, ru, how in ((None, "ns", "s", "outer"), (None, "us", "ns", "left"),
                              ("America/Chicago", "ns", "s", "right"),
                              ("America/Chicago", "us", "ns", "inner"))],
    *every_how("merge_datetime_different_tz_preserves_dtype",
               frame(t=pd.to_datetime(["2023-05-12 12:00", "2023-05-12 13:00"], utc=True)
                     .tz_convert("US/Eastern"), a=[1.0, 2.0]),
               frame(t=pd.to_datetime(["2023-05-12 12:00", "2023-05-12 14:00"], utc=True)
                     .tz_convert("US/Pacific"), b=[3.0, 4.0]), ("left", "outer"), on="t"),
    *[case(f"merge_empty_frames_column_order_{lempty}_{rempty}",
           pd.DataFrame(1, index=[0], columns=["A", "B"])[:1 - lempty],
           pd.DataFrame(1, index=[0], columns=["A", "C", "D"])[:1 - rempty], "outer", on=["A"])
      for lempty, rempty in ((True, False), (False, True), (True, True))],
    case("merge_on_all_nan_column", frame(x=[1, 2, 3], y=[np.nan] * 3, z=[4, 5, 6]),
         frame(x=[1, 2, 4], y=[np.nan] * 3, zz=[4, 5, 6]), "outer", on=["x", "y"]),
    case("merge_categorical_key_recursion",
         frame(key=pd.Series([1, 2], dtype=pd.CategoricalDtype(np.array([1, 2, 3])))),
         frame(key=pd.Series([1, 3], dtype=pd.CategoricalDtype(np.array([1.0, 2.0, 3.0])))),
         "outer", on="key"),
    # test_multi.py
    *every_how("merge_on_multikey", F["multi_left"], F["multi_right"], ALL_HOWS,
               on=["key1", "key2"]),
    case("left_merge_na_buglet",
         frame(id=list("abcde"), v1=np.arange(5.0), dummy=list("abcde")),
         frame(id=["a", "b", np.nan, np.nan, np.nan], sv3=[1.234, 5.678, np.nan, np.nan, 1.0]),
         "left", on="id"),
    case("merge_na_keys",
         frame(year=[1950, 1950, 1955, 1960, 1970, 1950, 1960, 1965, 1970],
               panel=list("ABBBBCCCC"), data=[1.5, 1.5, 1.5, np.nan, 4.0, 4.0, np.nan, 3.0, 4.0]),
         frame(year=[1960, 1970, 1955, 1965, 1965, 1955], panel=list("AAAABC"),
               data=[np.nan] * 6), "outer"),
    *[case(f"merge_multi_int_keys_sort_{dtype}",
           frame(k1=np.array([3, 1, 3, 2], dtype), k2=np.array([10, 20, 5, 20], dtype),
                 lval=[0, 1, 2, 3]),
           frame(k1=np.array([3, 2, 4], dtype), k2=np.array([5, 20, 1], dtype),
                 rval=[0, 1, 2]), how, on=["k1", "k2"])
      for dtype, how in (("int32", "left"), ("int64", "right"), ("uint8", "outer"))],
    case("merge_multi_int64_extreme_values",
         frame(k1=np.array([IMIN, IMIN + 5, IMIN + 3]), k2=[-1, -2, -1], lval=[0, 1, 2]),
         frame(k1=np.array([IMIN + 5, IMIN]), k2=[-2, -1], rval=[0, 1]), "outer",
         on=["k1", "k2"]),
    case("merge_multi_uint64_extreme_values",
         frame(k1=np.array([UMAX, UMAX - 5, UMAX - 3], np.uint64),
               k2=np.array([1, 2, 3], np.uint64), lval=[0, 1, 2]),
         frame(k1=np.array([UMAX - 5, UMAX], np.uint64), k2=np.array([2, 1], np.uint64),
               rval=[0, 1]), "right", on=["k1", "k2"]),
    case("merge_multi_int_keys_wide_span",
         frame(k1=[0, 2**62, 5], k2=[0, 2**61, 7], lval=[0, 1, 2]),
         frame(k1=[5, 0, 2**62], k2=[7, 0, 2**61], rval=[0, 1, 2]), "inner", on=["k1", "k2"]),
    case("merge_multi_many_keys",
         frame(**{f"k{i}": np.arange(40) % (7 + i) for i in range(6)}, lval=np.arange(40)),
         frame(**{f"k{i}": np.arange(0, 40, 2) % (7 + i) for i in range(6)},
               rval=np.arange(20) * 10), "left", on=[f"k{i}" for i in range(6)]),
    *[case(f"merge_multi_{name}_int_keys", frame(k1=stamps, k2=[1, 2, 1], lval=[0, 1, 2]),
           frame(k1=stamps[:2], k2=[1, 2], rval=[0, 1]), how, on=["k1", "k2"])
      for name, stamps, how in (
          ("datetime", pd.to_datetime(["2020-01-01", "2020-01-02", "2020-01-01"]), "inner"),
          ("datetime_nat", pd.to_datetime(["2020-01-01", "NaT", "2020-01-02"]), "left"),
          ("datetimetz", pd.to_datetime(["2020-01-01", "2020-01-02", "2020-01-01"])
           .tz_localize("US/Pacific"), "right"),
          ("timedelta", pd.to_timedelta([1, 2, 1], unit="D"), "outer"))],
    case("merge_multi_mixed_int_dtypes",
         frame(k1=np.array([1, 2, 3, 2], np.int32), k2=[1, 1, 2, 2], lval=[0, 1, 2, 3]),
         frame(k1=[2, 3], k2=np.array([1, 2], np.int32), rval=[0, 1]), "outer",
         on=["k1", "k2"]),
    case("merge_multi_bool_int_keys",
         frame(k1=[True, False, True, False], k2=[1, 1, 2, 2], lval=[0, 1, 2, 3]),
         frame(k1=[True, False], k2=[2, 1], rval=[0, 1]), "left", on=["k1", "k2"]),
    # Beside pandas' tests: the dtypes unmatched rows change, and those they must not.
    *every_how("values_of_every_kind",
               frame(k=[1, 2, 3, 4], lv=[0.5, 1.5, 2.5, 3.5]),
               frame(k=[3, 4, 5], i8=np.array([1, 2, 3], np.int8),
                     u32=np.array([1, 2, 3], np.uint32), b=[True, False, True],
                     Int=pd.array([1, None, 3], "Int64"), boo=pd.array([True, None, False]),
                     f32=np.array([1, 2, 3], np.float32), s=pd.array(["x", None, "z"], "str"),
                     c=pd.Categorical(["p", "q", "p"]), t=pd.to_datetime(["2020", "2021",
                                                                           "2022"]).as_unit("s"),
                     tz=pd.to_datetime(["2020", "2021", "2022"]).tz_localize("Asia/Tokyo"),
                     td=pd.to_timedelta([1, 2, 3], "ms"), o=[["a"], None, ["b", "c"]]),
               ALL_HOWS, on="k"),
    *every_how("decimals",
               frame(k=[1, 2, 3], price=pd.array([Decimal("1.25"), None, Decimal("-3.50")],
                                                 dtype=DECIMAL)),
               frame(k=[2, 3, 4], cost=[Decimal("0.10"), Decimal(2), None],
                     qty=[1, 2, 3]), ALL_HOWS, on="k"),
]


def key_lists(left: pd.DataFrame, right: pd.DataFrame, keys: dict) -> tuple[list, list]:
    if "left_on" in keys:
        return [[k] if isinstance(k, str) else list(k)
                for k in (keys["left_on"], keys["right_on"])]
    on = keys.get("on") or [c for c in left.columns if c in right.columns]
    return ([on], [on]) if isinstance(on, str) else (list(on), list(on))


def matches(frame: pd.DataFrame, frame_keys: list, other: pd.DataFrame,
            other_keys: list) -> np.ndarray:
    """Which rows of ``frame`` pandas.merge matches with a row of ``other`` (nulls with nulls)."""
    probe = frame[frame_keys].reset_index(drop=True)
    found = other[other_keys].drop_duplicates().set_axis(frame_keys, axis=1).assign(**{FOUND: 1})
    return probe.merge(found, how="left", on=frame_keys)[FOUND].notna().to_numpy()


def pandas_merge(left: pd.DataFrame, right: pd.DataFrame, how: str, keys: dict) -> pd.DataFrame:
    """pandas.merge; for 'leftsemi'/'leftanti', the left rows it matches, or does not."""
    if how not in ("leftsemi", "leftanti"):
        return left.merge(right, how=how, **keys)
    left_keys, right_keys = key_lists(left, right, keys)
    return left[matches(left, left_keys, right, right_keys) == (how == "leftsemi")]


def unmatched_sides(left: pd.DataFrame, right: pd.DataFrame, how: str, keys: dict) -> set[str]:
    """The sides ('left_only', 'right_only') of which the join keeps an unmatched row."""
    left_keys, right_keys = key_lists(left, right, keys)
    sides = {"left_only"} if not matches(left, left_keys, right, right_keys).all() else set()
    if not matches(right, right_keys, left, left_keys).all():
        sides.add("right_only")
    return sides & KEPT_UNMATCHED.get(how, set())


def with_unmatched_rows(left: pd.DataFrame, right: pd.DataFrame, how: str,
                        keys: dict) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The case's sides, or the same less the rows of one matched key on one side or of two on
    both, such that the join keeps unmatched rows of every side it keeps and that has rows;
    where it can, one that keeps matched rows too (pandas types the keys of a join of which no
    row matches as those of a join of an empty side)."""
    left_keys, right_keys = key_lists(left, right, keys)
    wanted = KEPT_UNMATCHED.get(how, set()) & (
        ({"left_only"} if len(left) else set()) | ({"right_only"} if len(right) else set()))
    candidates = [(left, right)]
    hits = left[matches(left, left_keys, right, right_keys)]
    if len(hits):
        first = hits.iloc[[0]]
        others = hits[~matches(hits, left_keys, first, left_keys)]
        second = others.iloc[[-1]] if len(others) else first
        less_first = right[~matches(right, right_keys, first, left_keys)]
        less_second = left[~matches(left, left_keys, second, left_keys)]
        candidates += [(less_second, less_first), (left, less_first), (less_second, right)]
    fitting = [pair for pair in candidates if unmatched_sides(*pair, how, keys) == wanted]
    fitting.sort(key=lambda pair: not matches(pair[0], left_keys, pair[1], right_keys).any())
    return fitting[0] if fitting else None


def canonical_rows(frame: pd.DataFrame) -> Counter:
    """The rows as a multiset of plain values, whatever their dtypes: missing values as None,
    numbers by value (1 == 1.0), decimals by value (1.10 == 1.1), lists as tuples."""
    def plain(value: Any) -> Any:
        if isinstance(value, (list, tuple, np.ndarray)):
            return tuple(plain(v) for v in value)
        if pd.isna(value):
            return None
        if isinstance(value, Decimal):
            return value.normalize()
        if isinstance(value, (pd.Timestamp, datetime, np.datetime64)):
            return pd.Timestamp(value).as_unit("ns")
        if isinstance(value, (pd.Timedelta, timedelta, np.timedelta64)):
            return pd.Timedelta(value).as_unit("ns")
        return value.item() if isinstance(value, np.generic) else value

    return Counter(tuple(plain(v) for v in row) for row in frame.itertuples(index=False))


def distributed(engine, frame: pd.DataFrame) -> DistributedFrame:
    """``frame`` on the engine; one of no rows becomes a frame of no partitions, which the join
    knows to be empty."""
    if frame.empty:
        return DistributedFrame(engine, Persisted(Partitions([], [], frame.head(0))))
    return gpuframe.from_pandas(frame, npartitions=2, engine=engine)


@pytest.mark.filterwarnings("ignore:You are merging on int and float")
@pytest.mark.parametrize("left, right, how, keys", CASES)
def test_ported_case(engine, left, right, how, keys):
    expected = pandas_merge(left, right, how, keys)
    variant = with_unmatched_rows(left, right, how, keys)
    assert variant is not None, "the case has no keys to leave unmatched"
    unmatched_dtypes = list(pandas_merge(*variant, how, keys).dtypes)
    for path, options in PATHS.items():
        result = gpuframe.merge(distributed(engine, left), distributed(engine, right), how=how,
                                **keys, **options)
        got = result.to_pandas()
        assert list(got.columns) == list(expected.columns), path
        assert list(result.dtypes) == list(got.dtypes), f"{path}: schema is not the data's"
        assert canonical_rows(got) == canonical_rows(expected), f"{path}: rows"
        assert list(got.dtypes) == unmatched_dtypes, f"{path}: dtypes are not pandas'"


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:You are merging on int and float")
@pytest.mark.parametrize("left, right, how, keys", [
    pytest.param(*param.values, id=param.id, marks=pytest.mark.xfail(
        strict=True, reason="cuDF holds no categorical of dates: MixedTypeError"))
    if param.id.startswith("dtype_on_categorical_dates") else param
    for param in CASES if not param.id.startswith("merge_duplicate_suffix")
])  # a cuDF frame holds no two columns of one name
def test_ported_case_on_gpus(gpu_engine, left, right, how, keys):
    """On cuDF too the schema is the data's, and the rows pandas'. Its dtypes are pandas' but
    where cuDF holds a type otherwise (Backend.missing_dtype)."""
    expected = pandas_merge(left, right, how, keys)
    for path, options in PATHS.items():
        result = gpuframe.merge(distributed(gpu_engine, left), distributed(gpu_engine, right),
                                how=how, **keys, **options)
        got = result.to_pandas()
        assert list(result.dtypes) == list(got.dtypes), f"{path}: schema is not the data's"
        assert canonical_rows(got) == canonical_rows(expected), f"{path}: rows"


# --- merge's options -------------------------------------------------------------------------
# Ported from pandas' test_merge_antijoin.py, test_merge_cross.py and test_merge.py (the test in
# the id). Every case runs by shuffle and by broadcast and is compared with pandas.merge of the
# same options: columns, dtypes, rows (in pandas' order where sort=True), and a RangeIndex.

def option_case(name: str, left: pd.DataFrame, right: pd.DataFrame, **kwargs: Any) -> Any:
    return pytest.param(left, right, kwargs, id=f"{name}-{kwargs.get('how', 'inner')}")


ANTI_LEFT = frame(A=[1.0, 2.0, 3.0], B=pd.Series(["a", "b", "c"], dtype=object))
ANTI_RIGHT = frame(C=[1.0, 2.0, 4.0], D=pd.Series(["a", "d", "b"], dtype=object))
NONUNIQUE_LEFT = frame(A=[1.0, 2.0, 3.0], B=pd.Series(["a", "b", "b"], dtype=object))
NONUNIQUE_RIGHT = frame(C=[1.0, 2.0, 4.0], D=pd.Series(["b", "d", "d"], dtype=object))
NANS_LEFT = frame(A=[1.0, 2.0, np.nan], C=pd.Series(["a", "b", "c"], dtype=object))
NANS_RIGHT = frame(A=[3.0, 2.0, np.nan], D=pd.Series(["d", "e", "f"], dtype=object))
TZ_LEFT = frame(key=pd.date_range("20151010", periods=2, tz="US/Eastern"), value=[1.0, 2.0])
TZ_RIGHT = frame(key=pd.date_range("20151011", periods=3, tz="US/Eastern"),
                 value=[1.0, 2.0, 3.0])
INDICATOR_LEFT = frame(col1=[0, 1], col_conflict=[1, 2], col_left=["a", "b"])
INDICATOR_RIGHT = frame(col1=[1, 2, 2, 2], col_conflict=[1, 2, 3, 4],
                        col_right=[2, 2, 2, 2])
SORT_LEFT = frame(key=["c", "a", "b", "a", "c", "d"], lv=range(6))
SORT_RIGHT = frame(key=["a", "c", "b", "e", "c"], rv=[10.0, 11.0, 12.0, 13.0, 14.0])

OPTION_CASES = [
    *(option_case(name, left, right, how=how, **keys)
      for how in ("left_anti", "right_anti")
      for name, left, right, keys in (
          ("merge_antijoin_on_different_columns", ANTI_LEFT, ANTI_RIGHT,
           {"left_on": "B", "right_on": "D"}),
          ("merge_antijoin_nonunique_keys", NONUNIQUE_LEFT, NONUNIQUE_RIGHT,
           {"left_on": "B", "right_on": "D"}),
          ("merge_antijoin_nans", NANS_LEFT, NANS_RIGHT, {"on": "A"}),
          ("merge_antijoin_on_datetime64tz", TZ_LEFT, TZ_RIGHT, {"on": "key"}),
          ("merge_antijoin_int_keys", frame(k=np.array([1, 2, 3], dtype="int8"), a=[1, 2, 3]),
           frame(k=[2, 3, 4, 4], b=[5, 6, 7, 8]), {"on": "k"}),
      )),
    option_case("merge_cross", frame(a=[1, 3]), frame(b=[4, 5]), how="cross"),
    option_case("merge_cross_same_column_names", frame(a=[1, 3]), frame(a=[4, 5, 6]),
                how="cross"),
    option_case("merge_cross_more_than_one_column", frame(a=[1, 3], b=[2, 4]),
                frame(c=["x", "y", "z"], d=[5.0, 6.0, 7.0]), how="cross",
                suffixes=("_l", "_r")),
    option_case("merge_cross_mixed_dtypes", frame(A=["a", "b", "c"]), frame(B=[1, 2]),
                how="cross"),
    option_case("merge_cross_indicator", frame(a=[1, 3]), frame(b=[4, 5]), how="cross",
                indicator=True),
    *(option_case("indicator", INDICATOR_LEFT, INDICATOR_RIGHT, how=how, on="col1",
                  indicator=indicator)
      for how, indicator in (("inner", True), ("left", True), ("right", "custom_name"),
                             ("outer", True), ("left_anti", True), ("right_anti", "ind"))),
    option_case("indicator_multi", frame(col1=[1, 2, 3], col2=["a", "b", "a"]),
                frame(col1=[1, 2, 4], col2=["a", "b", "b"], v=[1.0, 2.0, 3.0]),
                how="outer", on=["col1", "col2"], indicator=True),
    *(option_case("merge_sort", SORT_LEFT, SORT_RIGHT, how=how, on="key", sort=True)
      for how in ("inner", "left", "right", "outer")),
    option_case("merge_sort_multi", frame(k1=[2, 1, 2, 1], k2=["b", "b", "a", "a"], v=range(4)),
                frame(k1=[1, 2, 2], k2=["a", "a", "c"], w=[5.0, 6.0, 7.0]), how="outer",
                on=["k1", "k2"], sort=True),
    option_case("merge_sort_left_on_right_on", SORT_LEFT,
                SORT_RIGHT.rename(columns={"key": "rkey"}), how="outer", left_on="key",
                right_on="rkey", sort=True),
    *(option_case("validation", frame(a=["a", "b", "c", "d"], b=["cat", "dog", "weasel",
                                                                "horse"]),
                  frame(a=["a", "b", "c", "d", "e"], c=["meow", "bark", "um", "nay", "chirp"]),
                  how="left", on="a", validate=validate)
      for validate in ("1:1", "one_to_many", "m:1", "many_to_many")),
    *(option_case("merge_incompat_dtypes_are_ok_object_int",
                  frame(k=pd.Series([1, 2, 3], dtype=object), a=[1, 2, 3]),
                  frame(k=[2, 3, 5], b=["x", "y", "z"]), how=how, on="k")
      for how in ("inner", "left", "right", "outer")),
    option_case("merge_incompat_dtypes_are_ok_int_object", frame(k=[2, 3, 5], b=[1, 2, 3]),
                frame(kk=pd.Series([1, 2, None], dtype=object), a=[1.0, 2.0, 3.0]),
                how="outer", left_on="k", right_on="kk"),
    *(option_case("merge_bool_int_keys", frame(k=[True, False, True], a=[1.0, 2.0, 3.0]),
                  frame(k=[1, 0, 2], b=["x", "y", "z"]), how=how, on="k")
      for how in ("inner", "left", "right", "outer")),
    option_case("merge_int_bool_keys_of_other_names", frame(kk=[1, 0, 2], b=[1, 2, 3]),
                frame(k=[True, False, True], a=[1.0, 2.0, 3.0]), how="left", left_on="kk",
                right_on="k"),
]


@pytest.mark.parametrize("left, right, kwargs", OPTION_CASES)
def test_ported_option_case(engine, left, right, kwargs):
    expected = pd.merge(left, right, **kwargs).reset_index(drop=True)
    for path, options in PATHS.items():
        result = gpuframe.merge(distributed(engine, left), distributed(engine, right),
                                **kwargs, **options)
        got = result.to_pandas()
        assert got.index.equals(pd.RangeIndex(len(got))), path
        assert list(got.columns) == list(expected.columns), path
        assert list(result.dtypes) == list(got.dtypes), f"{path}: schema is not the data's"
        assert list(got.dtypes) == list(expected.dtypes), f"{path}: dtypes are not pandas'"
        assert canonical_rows(got) == canonical_rows(expected), f"{path}: rows"
        if kwargs.get("sort"):
            assert [canonical_rows(row.to_frame().T) for _, row in got.iterrows()] == \
                [canonical_rows(row.to_frame().T) for _, row in expected.iterrows()], \
                f"{path}: order"


VALIDATION_LEFT = frame(a=["a", "b", "c", "d", "a"], b=["cat", "dog", "weasel", "horse", "cow"])
VALIDATION_RIGHT = frame(a=["a", "b", "c", "d", "e"], c=["meow", "bark", "um", "nay", "chirp"])


@pytest.mark.parametrize("validate, left, right, side", [
    ("one_to_one", VALIDATION_LEFT, VALIDATION_RIGHT, "left"),
    ("1:m", VALIDATION_LEFT, VALIDATION_RIGHT, "left"),
    ("one_to_one", VALIDATION_RIGHT, VALIDATION_LEFT, "right"),
    ("m:1", VALIDATION_RIGHT, VALIDATION_LEFT, "right"),
    ("1:1", VALIDATION_LEFT, VALIDATION_LEFT, "(either left or right|left|right)"),
], ids=["1:1-left", "1:m-left", "1:1-right", "m:1-right", "1:1-both"])
def test_validation_raises_merge_error_naming_the_side(engine, validate, left, right, side):
    """pandas' test_validation: keys that repeat raise pandas' MergeError, found by the join
    tasks on every path (a side that must be unique is never the copied-to side)."""
    with pytest.raises(pd.errors.MergeError):
        pd.merge(left, right, on="a", validate=validate)
    for options in PATHS.values():
        result = gpuframe.merge(distributed(engine, left), distributed(engine, right), on="a",
                                validate=validate, **options)
        with pytest.raises(pd.errors.MergeError,
                           match=f"Merge keys are not unique in {side} dataset"):
            result.to_pandas()


@pytest.mark.gpu
@pytest.mark.parametrize("left, right, kwargs", OPTION_CASES)
def test_ported_option_case_on_gpus(gpu_engine, left, right, kwargs):
    """On cuDF the schema is the data's and the rows pandas' (cuDF's merge has no indicator:
    Backend.join marks each side's rows instead)."""
    expected = pd.merge(left, right, **kwargs)
    for path, options in PATHS.items():
        result = gpuframe.merge(distributed(gpu_engine, left), distributed(gpu_engine, right),
                                **kwargs, **options)
        got = result.to_pandas()
        assert got.index.equals(pd.RangeIndex(len(got))), path
        assert list(result.dtypes) == list(got.dtypes), f"{path}: schema is not the data's"
        assert canonical_rows(got) == canonical_rows(expected), f"{path}: rows"


@pytest.mark.gpu
def test_validation_raises_merge_error_on_gpus(gpu_engine):
    result = gpuframe.merge(distributed(gpu_engine, VALIDATION_LEFT),
                            distributed(gpu_engine, VALIDATION_RIGHT), on="a", validate="1:1")
    with pytest.raises(pd.errors.MergeError, match="not unique in left dataset"):
        result.to_pandas()
