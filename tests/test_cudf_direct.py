import numpy as np
import pandas as pd
import pytest

from gpuframe import cudf_direct
from gpuframe.backend import Backend, get_backend
from gpuframe.cudf_direct import _output_names, distinct_functions

NAMES = [
    (["k", "a", "b"], ["k", "b", "c"], ["k"], ["k"]),
    (["k", "a"], ["j", "k", "a"], ["k"], ["j"]),
    (["k1", "k2", "v"], ["k1", "k2", "v"], ["k1", "k2"], ["k1", "k2"]),
    (["k1", "k2", "v"], ["k2", "x", "v"], ["k1", "k2"], ["x", "k2"]),
    (["a_x", "a"], ["k", "a"], ["a"], ["k"]),
]


@pytest.mark.parametrize("how", ["inner", "left"])
@pytest.mark.parametrize(("left", "right", "left_on", "right_on"), NAMES)
def test_output_names_are_pandas_merges_or_none(left, right, left_on, right_on, how):
    """The names pandas' merge gives (keys of one name once, names on both sides suffixed),
    or None where they would clash, which pandas refuses."""
    frames = [pd.DataFrame({name: pd.Series(dtype="int64") for name in names})
              for names in (left, right)]
    try:
        expected = list(frames[0].merge(frames[1], how=how, left_on=left_on,
                                        right_on=right_on, suffixes=("_x", "_y")).columns)
    except pd.errors.MergeError:
        expected = None
    assert _output_names(left, right, how, left_on, right_on, ("_x", "_y")) == expected
    assert _output_names(left, right, "leftsemi", left_on, right_on, ("_x", "_y")) == left


def test_output_names_leave_a_suffix_that_is_not_text_to_cudf():
    """pandas keeps a name whole (its type too) for a None suffix: cuDF's merge decides."""
    assert _output_names(["k", "v"], ["k", "v"], "inner", ["k"], ["k"], ("", None)) is None
    assert _output_names(["k", "v"], ["k", "w"], "inner", ["k"], ["k"], (None, None)) == \
        ["k", "v", "w"]


def test_distinct_functions_keep_each_first_name_and_the_order():
    first, spec = distinct_functions([("a", "x", "sum"), ("b", "y", "max"), ("c", "x", "sum"),
                                      ("d", "x", "count")])
    assert first == {("x", "sum"): "a", ("y", "max"): "b", ("x", "count"): "d"}
    assert spec == {"x": ["sum", "count"], "y": ["max"]}


GROUPED = pd.DataFrame({
    "k": [1, 2, 1, None, 2, 3, 1],
    "s": ["a", "b", "a", "c", None, "b", "a"],
    "i": np.array([1, 2, 3, 4, 5, 6, 2**31 - 1], "int32"),
    "f": np.array([0.5, None, 1.5, 2.0, -1.0, 3.0, 4.0], "float32"),
    "x": [1.0, 2.0, None, 4.0, 5.0, 6.0, 7.0],
})
"""Keys with missing values, int32 values whose sum passes 32 bits, float32 and missing values."""


def test_grouped_names_each_function_once_and_keeps_the_keys_as_columns():
    """Several names asking for one (column, function) get it computed once, each named."""
    got = get_backend("pandas").grouped(
        GROUPED, ["k"], [("a", "x", "sum"), ("b", "x", "sum"), ("n", "x", "count")], True)
    assert list(got.columns[:1]) == ["k"] and set(got.columns[1:]) == {"a", "b", "n"}
    expected = GROUPED.groupby("k").x.agg(["sum", "count"])
    assert sorted(got.a.tolist()) == sorted(expected["sum"].tolist()) == sorted(got.b.tolist())
    assert sorted(got.n.tolist()) == sorted(expected["count"].tolist())


@pytest.mark.gpu
@pytest.mark.parametrize("keys", [["k"], ["s"], ["k", "s"]])
@pytest.mark.parametrize("dropna", [True, False])
@pytest.mark.parametrize("columns", [
    [("a", "i", "sum"), ("b", "f", "sum"), ("c", "x", "mean"), ("n", "x", "count"),
     ("lo", "i", "min"), ("hi", "f", "max"), ("again", "x", "count")],
    [("a", "x", "sum"), ("first", "x", "first"), ("n", "s", "count")],
], ids=["pylibcudf", "through-cudf"])
def test_cudf_grouped_gives_what_cudf_agg_gives(keys, dropna, columns, monkeypatch):
    """The groupby by pylibcudf gives cuDF's own ``agg``'s rows, names and dtypes, counts as
    int64, without calling it; a function it does not take (first) goes through cuDF's."""
    frames = get_backend("cudf")
    device = frames.from_pandas(GROUPED)
    expected = frames.to_pandas(Backend.grouped(frames, device, keys, columns, dropna))
    if not any(function == "first" for _, _, function in columns):
        monkeypatch.setattr(Backend, "grouped", lambda *args: pytest.fail("cuDF's agg ran"))
    got = frames.to_pandas(frames.grouped(device, keys, columns, dropna))
    assert list(got.columns[:len(keys)]) == keys
    assert set(got.columns[len(keys):]) == {name for name, _, _ in columns}
    assert got.n.dtype == np.dtype("int64")
    pd.testing.assert_frame_equal(got.sort_values(keys).reset_index(drop=True),
                                  expected[got.columns].sort_values(keys).reset_index(drop=True))


LEFT = pd.DataFrame({"k": [1, 2, 2, None, 5, 7], "s": ["a", "b", "b", None, "e", "z"],
                     "v": [10, 20, 21, 30, 50, 70], "a": [0.5, 1.5, None, 3.5, 4.5, 5.5]})
RIGHT = pd.DataFrame({"j": [2, 2, None, 5, 9], "s": ["b", "b", None, "x", "y"],
                      "v": [200, 201, 300, 500, 900], "k": [1, 1, 1, 1, 1]})
"""Repeated keys on both sides, missing keys on both (which match, as in pandas), rows of
either side that match none, a value column on both sides and a right column named as a left
key."""


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["inner", "left", "leftsemi", "leftanti"])
@pytest.mark.parametrize(("left_on", "right_on"), [
    (["k"], ["j"]), (["s"], ["s"]), (["k", "s"], ["j", "s"]), (["v"], ["v"])])
@pytest.mark.parametrize("right_rows", [slice(None), slice(0, 0)], ids=["rows", "empty"])
def test_cudf_joined_gives_what_cudf_merge_gives(how, left_on, right_on, right_rows,
                                                 monkeypatch):
    """Rows, names and dtypes of cuDF's merge, without calling it (integers that unmatched
    rows fill may stay integers with nulls, where cuDF's merge makes them floats: a join's
    schema casts them after, :func:`~gpuframe.operators.join_schema.conform`)."""
    import cudf

    frames = get_backend("cudf")
    left, right = frames.from_pandas(LEFT), frames.from_pandas(RIGHT.iloc[right_rows])
    with monkeypatch.context() as patched:
        patched.setattr(cudf_direct, "joined", lambda *args: None)
        expected = frames.to_pandas(frames.join(left, right, how, left_on, right_on,
                                                ("_x", "_y")))
    monkeypatch.setattr(cudf.DataFrame, "merge", lambda *args, **kw: pytest.fail("merged"))
    got = frames.to_pandas(frames.join(left, right, how, left_on, right_on, ("_x", "_y")))
    assert list(got.columns) == list(expected.columns)
    for name in got.columns:
        if got[name].dtype != expected[name].dtype:
            assert pd.api.types.is_integer_dtype(got[name].dtype), name
            assert expected[name].dtype == np.dtype("float64"), name
            got[name] = got[name].astype("float64")
    order = list(got.columns)
    pd.testing.assert_frame_equal(got.sort_values(order).reset_index(drop=True),
                                  expected.sort_values(order).reset_index(drop=True))


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["types", "categories", "indicator", "clash"])
def test_cudf_joins_it_does_not_take_go_to_cudf_merge(case):
    """Keys of two types, categorical keys, an indicator and names that would clash: cuDF's
    merge decides (the first merge is the join's; cuDF's ``map`` merges too)."""
    import cudf

    frames = get_backend("cudf")
    left, right = LEFT.assign(kc=LEFT.s.astype("category")), RIGHT
    on, indicator, suffixes = (["s"], ["s"]), None, ("_x", "_y")
    if case == "types":
        right = right.assign(s=right.j)
        left = left.assign(s=left.k.astype("float32"))
    elif case == "categories":
        right, on = right.assign(kc=right.s.astype("category")), (["kc"], ["kc"])
    elif case == "indicator":
        indicator = "_merge"
    else:
        suffixes = ("", "")
    merged = []
    original = cudf.DataFrame.merge

    def merge(*args, **kw):
        merged.append(kw.get("how"))
        return original(*args, **kw)

    try:
        cudf.DataFrame.merge = merge
        frames.join(frames.from_pandas(left), frames.from_pandas(right), "left", *on, suffixes,
                    indicator)
    except Exception:  # what cuDF's merge makes of a clash is cuDF's to say
        assert case == "clash"
    finally:
        cudf.DataFrame.merge = original
    assert merged[:1] == ["left"]
