import sys
import time
import types
from datetime import date
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from gpuframe.backend import CudfBackend, get_backend, true_divide
from gpuframe.errors import BackendError
from gpuframe.plan.expr import col

FRAME = pd.DataFrame({"k": [1, 2, None], "s": ["a", None, "c"],
                      "t": pd.to_datetime(["2024-01-01", None, "2024-01-03"])})


def test_pandas_backend_round_trips_through_arrow():
    backend = get_backend("pandas")
    table = backend.to_arrow(backend.from_pandas(FRAME))
    assert isinstance(table, pa.Table)
    pd.testing.assert_frame_equal(backend.to_pandas(backend.from_arrow(table)), FRAME,
                                  check_dtype=False)


def test_pandas_backend_keeps_decimals_arrow_backed():
    table = pa.table({"price": pa.array([Decimal("1.25"), None, Decimal("-3.50")],
                                        pa.decimal128(10, 2)), "n": [1, 2, 3]})
    frame = get_backend("pandas").from_arrow(table)
    assert frame["price"].dtype == pd.ArrowDtype(pa.decimal128(10, 2))
    assert frame["price"].tolist()[::2] == [Decimal("1.25"), Decimal("-3.50")]
    assert frame["price"].isna().tolist() == [False, True, False]
    assert frame["n"].dtype == "int64"


def test_concat_and_nbytes():
    backend = get_backend("pandas")
    both = backend.concat([FRAME, FRAME])
    assert len(both) == 6
    assert backend.concat([FRAME]) is FRAME  # not copied: nothing changes a frame in place
    numbers = pd.DataFrame({"a": range(1000)}, dtype="int64")
    assert 8000 <= backend.nbytes(numbers) < 8200


def test_unknown_backend_is_named():
    with pytest.raises(BackendError, match="'polars'.*cudf, pandas"):
        get_backend("polars")


@pytest.mark.gpu
def test_cudf_backend_round_trips():
    backend = get_backend("cudf")
    gpu_frame = backend.from_pandas(FRAME)
    assert type(gpu_frame).__module__.startswith("cudf")
    pd.testing.assert_frame_equal(backend.to_pandas(gpu_frame), FRAME, check_dtype=False)
    assert backend.to_arrow(gpu_frame).num_rows == 3


@pytest.mark.gpu
def test_dask_sizes_cudf_frames_by_their_device_bytes():
    from dask.sizeof import sizeof

    gpu_frame = get_backend("cudf").from_pandas(pd.DataFrame({"k": range(100_000)}))
    assert 800_000 <= sizeof(gpu_frame) < 1_000_000
    assert 800_000 <= sizeof(gpu_frame["k"]) < 1_000_000


@pytest.mark.gpu
def test_a_cudf_frame_is_sized_on_the_host_as_cudf_sums_its_columns_and_index():
    from dask.sizeof import sizeof

    backend = get_backend("cudf")
    frame = backend.from_pandas(pd.DataFrame({"k": [1, None, 3], "s": ["a", "bb", None]},
                                             index=[5, 6, 7]))
    summed = int(frame.memory_usage(index=True, deep=True).sum())
    assert backend.nbytes(frame) == summed == sizeof(frame) > 0


MISSING = ["int8", "uint64", "bool", "float32", "Int64", "boolean", "str", "category",
           "datetime64[s]", "datetime64[ns, UTC]", "timedelta64[ms]", "object"]


TAKEN = pd.DataFrame({
    "i": pd.array([1, None, 3, 4, 5, None], dtype="Int64"), "f": [0.5, 1.5, None, 3.5, 4.5, 5.5],
    "s": ["a", None, "ccc", "", "e", "f"], "b": pd.array([True, None, False, True, False, True],
                                                          dtype="boolean"),
    "t": pd.date_range("2026-01-01", periods=6, freq="h", tz="UTC"),
    "c": pd.Categorical(["x", "y", "x", None, "y", "x"]),
}, index=[10, 11, 12, 13, 14, 15])


@pytest.mark.parametrize("backend", ["pandas", pytest.param("cudf", marks=pytest.mark.gpu)])
def test_take_rows_gives_the_rows_at_the_positions_in_their_dtypes(backend):
    """As ``iloc`` gives them: nullable, zoned and categorical dtypes kept (the index aside)."""
    frames = get_backend(backend)
    frame = frames.from_pandas(TAKEN)
    positions = np.array([0, 2, 3, 5])
    taken = frames.to_pandas(frames.take_rows(frame, positions)).reset_index(drop=True)
    pd.testing.assert_frame_equal(
        taken, frames.to_pandas(frame.iloc[positions]).reset_index(drop=True))
    assert taken["i"].tolist()[:2] == [1, 3] and taken["s"].tolist()[1] == "ccc"


@pytest.mark.gpu
@pytest.mark.parametrize(("numerator", "denominator"), [
    ([1.0, -2.0, 0.0, 5.0, None, 7.5], [2, 0, 0, None, 4, 3]),
    ([7, 3, -3, 0], [2, 0, 0, 5]),
    ([1.5, 2.5], [0.5, -0.0]),
    (np.array([1.5, -2.5, 0.0], "float32"), np.array([2, 0, 0], "int8")),
    (np.array([1.5, -2.5, 0.0], "float32"), np.array([2, 0, 0], "int64")),
], ids=["floats-by-nullable-ints", "ints", "floats", "float32-by-int8", "float32-by-int64"])
def test_cudf_divide_gives_what_pandas_gives(numerator, denominator):
    """Infinities signed, 0 / 0 and missing values as NaN, integers divided into floats, each
    result of the type pandas gives."""
    frames = get_backend("cudf")
    frame = pd.DataFrame({"a": numerator, "b": denominator})
    device = frames.from_pandas(frame)
    got = frames.to_pandas(frames.divide(device["a"], device["b"]).to_frame("q"))["q"]
    pd.testing.assert_series_equal(got, frame["a"] / frame["b"], check_names=False)


@pytest.mark.gpu
@pytest.mark.parametrize("number", [2, 0, -0.0, 2.5, np.float64(0.5), np.int8(3), 2**70])
@pytest.mark.parametrize("dtype", ["int32", "float32", "int64"])
def test_cudf_divide_by_a_number_gives_what_pandas_gives(dtype, number):
    """A column by a number and a number by a column, of pandas' type and values."""
    frames = get_backend("cudf")
    column = pd.Series([4, -1, 0, 7], dtype=dtype, name="c")
    device = frames.from_pandas(column.to_frame())["c"]
    for got, expected in ((frames.divide(device, number), column / number),
                          (frames.divide(number, device), number / column)):
        pd.testing.assert_series_equal(frames.to_pandas(got.to_frame("c"))["c"], expected)


def test_expression_division_of_cudf_columns_is_the_cudf_backends(monkeypatch):
    """``/`` in an expression hands a cuDF column, on either side, to
    :meth:`CudfBackend.divide`; pandas columns keep pandas' own division."""
    class Series(pd.Series):  # stands in for cuDF's where no GPU is
        pass

    monkeypatch.setitem(sys.modules, "cudf", types.SimpleNamespace(Series=Series))
    divided = []
    monkeypatch.setattr(CudfBackend, "divide",
                        lambda self, a, b: divided.append((type(a), type(b))) or "cudf")
    class Frame(dict):
        @property
        def columns(self):
            return list(self)

    device = Frame(a=Series([1, -2]), b=Series([2, 0]))
    assert (col("a") / col("b")).evaluate(device) == "cudf"
    assert (1 / col("b")).evaluate(device) == "cudf"
    assert divided == [(Series, Series), (int, Series)]
    host = pd.DataFrame({"a": [1, -2, 0], "b": [2, 0, 0]})
    pd.testing.assert_series_equal((col("a") / col("b")).evaluate(host), host["a"] / host["b"])
    assert len(divided) == 2


def test_cudf_backend_imports_its_library_on_the_client_in_the_background(tmp_path,
                                                                         monkeypatch):
    """The import runs beside the caller, who does not wait for it, and completes."""
    (tmp_path / "gpuframe_slow_library.py").write_text(
        "import time\ntime.sleep(0.5)\nimported = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "gpuframe_slow_library", raising=False)
    backend = CudfBackend()
    backend.library = "gpuframe_slow_library"
    start = time.perf_counter()
    importing = backend.import_on_client()
    assert time.perf_counter() - start < 0.4
    assert importing is not None
    importing.join(timeout=30)
    assert getattr(sys.modules.get("gpuframe_slow_library"), "imported", False)
    assert get_backend("pandas").import_on_client() is None  # pandas is imported already


def test_a_division_beside_a_half_imported_cudf_is_the_operators(monkeypatch):
    """The client imports cuDF in a thread while the user plans: a module without its classes
    yet is no cuDF Series to divide by pylibcudf."""
    monkeypatch.setitem(sys.modules, "cudf", types.ModuleType("cudf"))
    pd.testing.assert_series_equal(true_divide(pd.Series([1, 3]), 2), pd.Series([0.5, 1.5]))


@pytest.mark.parametrize("dtype", MISSING)
def test_pandas_backend_holds_missing_values_as_pandas_does(dtype):
    """A row that reindexing adds is missing, as a join's unmatched row is."""
    column = pd.Series([1, 0]).astype(dtype)
    assert get_backend("pandas").missing_dtype(column.dtype) == column.reindex([0, 2]).dtype


def test_cudf_backend_holds_missing_bools_as_nullable_booleans():
    cudf = get_backend("cudf")
    assert cudf.missing_dtype(np.dtype(bool)) == pd.BooleanDtype()
    assert cudf.missing_dtype(np.dtype("int32")) == np.dtype("float64")
    assert cudf.missing_dtype(pd.Int64Dtype()) == pd.Int64Dtype()


def test_pandas_astype_casts_by_position_and_keeps_a_frame_already_cast():
    frame = pd.DataFrame([[1, 2]], columns=["v", "v"])
    cast = get_backend("pandas").astype(frame, [np.dtype("float64"), np.dtype("int64")])
    assert list(cast.columns) == ["v", "v"]
    assert list(cast.dtypes) == [np.dtype("float64"), np.dtype("int64")]
    assert get_backend("pandas").astype(frame, list(frame.dtypes)) is frame


SCHEMA = pa.schema([("n", pa.int32()), ("price", pa.decimal128(10, 2)), ("s", pa.string()),
                    ("day", pa.date32()), ("at", pa.timestamp("ms", "Europe/Paris")),
                    ("tags", pa.list_(pa.int64())), ("ok", pa.bool_())])
TABLE = pa.table([pa.array([1, 2], pa.int32()), pa.array([Decimal("1.25"), None]),
                  pa.array(["a", None]), pa.array([date(2024, 1, 2), None]),
                  pa.array([1, None], pa.timestamp("ms", "Europe/Paris")),
                  pa.array([[1], None]), pa.array([True, False])], schema=SCHEMA)


def test_pandas_meta_from_arrow_is_what_a_read_gathers():
    backend = get_backend("pandas")
    meta = backend.meta_from_arrow(SCHEMA)
    assert len(meta) == 0
    assert meta.dtypes.to_dict() == backend.to_pandas(backend.from_arrow(TABLE)).dtypes.to_dict()
    assert meta["price"].dtype == pd.ArrowDtype(pa.decimal128(10, 2))


def test_cudf_meta_from_arrow_needs_no_cudf():
    meta = get_backend("cudf").meta_from_arrow(SCHEMA)
    assert meta["price"].dtype == pd.ArrowDtype(pa.decimal128(10, 2))
    assert meta["day"].dtype == np.dtype("datetime64[s]")


@pytest.mark.gpu
def test_cudf_meta_from_arrow_is_what_a_read_gathers():
    backend = get_backend("cudf")
    read = backend.to_pandas(backend.from_arrow(TABLE))
    assert backend.meta_from_arrow(SCHEMA).dtypes.to_dict() == read.dtypes.to_dict()


@pytest.mark.gpu
def test_cudf_astype_gives_the_pandas_dtypes_asked_for():
    """A missing bool is held as a nullable boolean, a str column cast to object where the
    schema says so, and a decimal, which cuDF holds in a type of its own, gathered Arrow-backed
    as the pandas backend holds it."""
    backend = get_backend("cudf")
    frame = backend.from_arrow(pa.table({
        "b": pa.array([True, False]), "i": pa.array([1, 2]), "s": pa.array(["x", "y"]),
        "d": pa.array([Decimal("1.25"), Decimal("2.50")]),
        "c": pa.array(["p", "q"]).dictionary_encode()}))
    categories = backend.to_pandas(frame)["c"].dtype
    dtypes = [pd.BooleanDtype(), np.dtype("float64"), np.dtype(object),
              pd.ArrowDtype(pa.decimal128(3, 2)), categories]
    assert list(backend.to_pandas(backend.astype(frame, dtypes)).dtypes) == dtypes


def test_cast_columns_gives_zones_and_leaves_its_input_as_it_was():
    from gpuframe.backend import cast_columns

    frame = pd.DataFrame({"t": pd.to_datetime(["2020-01-01 12:00"]).tz_localize("UTC")
                          .as_unit("ns"), "i": [1]})
    zone = pd.DatetimeTZDtype("ns", "America/Chicago")
    cast = cast_columns(frame, {"t": zone, "i": "float64"})
    assert cast.dtypes.tolist() == [zone, np.dtype("float64")]
    assert cast["t"].iloc[0] == frame["t"].iloc[0]  # the same instant, in another zone
    assert frame.dtypes.tolist() == [pd.DatetimeTZDtype("ns", "UTC"), np.dtype("int64")]
    assert cast_columns(frame, {}) is frame


def test_cudf_backend_holds_an_object_column_of_integers_as_nullable_int64():
    """cuDF refuses Python objects: a client frame's object column of integers is loaded as
    Int64, and one of Decimals as the decimal type cuDF's columns are gathered in, decided on
    the whole frame; other object columns stay."""
    frame = pd.DataFrame({"k": pd.Series([1, None, 3], dtype=object),
                          "s": pd.Series(["a", "b", None], dtype=object),
                          "m": pd.Series([1, "b", 2.5], dtype=object),
                          "d": pd.Series([Decimal("0.10"), Decimal(2), None], dtype=object)})
    held = get_backend("cudf").held(frame)
    assert list(held.dtypes) == [pd.Int64Dtype(), np.dtype(object), np.dtype(object),
                                 pd.ArrowDtype(pa.decimal128(3, 2))]
    assert held["k"].tolist() == [1, pd.NA, 3]
    assert held["d"].tolist() == [Decimal("0.10"), Decimal("2.00"), pd.NA]
    assert get_backend("pandas").held(frame) is frame


@pytest.mark.parametrize("how", ["leftsemi", "leftanti"])
@pytest.mark.parametrize("left, right", [
    (pd.Series([1.0, np.nan, 3.0, 1.0]), pd.Series([np.nan, 1])),
    (pd.Series([1, 2, 3, 3], dtype="int32"), pd.Series([3, 5, 3], dtype="int64")),
    (pd.Series([2**53 + 1, 2**53, 5], dtype="uint64"), pd.Series([2**53, 5], dtype="int64")),
    (pd.Series([True, False]), pd.Series([1, 7], dtype="int8")),
    (pd.Series(pd.to_datetime(["2020-01-01", None, "2020-01-02"])),
     pd.Series(pd.to_datetime([None, "2020-01-02"]))),
    (pd.Series([1, 2, None, np.nan, "a"], dtype=object), pd.Series([None, "a"], dtype=object)),
    (pd.Series([1, None, 3], dtype="Int64"), pd.Series([1.0, np.nan])),
])
def test_pandas_semi_and_anti_joins_keep_the_rows_merge_matches(left, right, how):
    """A key of NumPy dtype takes a lookup (NaN and NaT matching their own; integers past
    float's precision told apart), others a merge: the left rows pandas' merge with an
    indicator finds matched (or not), in their order."""
    frame = pd.DataFrame({"k": left, "v": range(len(left))}, index=range(10, 10 + len(left)))
    other = pd.DataFrame({"j": right})
    got = get_backend("pandas").join(frame, other, how, ["k"], ["j"], ("_x", "_y"))
    marked = frame.merge(other.drop_duplicates().rename(columns={"j": "k"}), how="left",
                         on="k", indicator=True)
    kept = (marked["_merge"] == "both").to_numpy() == (how == "leftsemi")
    pd.testing.assert_frame_equal(got, frame[kept])
