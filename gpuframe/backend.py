"""The one seam between cuDF and pandas.

A cluster picks its backend once; every partition on it is a frame of that backend, and the engine
reaches the backend's library only through the :class:`Backend` object named by the cluster. Tasks
carry the backend's *name* and look the object up on the worker, so nothing backend-specific is
pickled and cuDF is imported only where it runs.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from dask.sizeof import sizeof
from pandas.api.types import is_object_dtype

from . import cudf_direct
from .cudf_direct import cudf_frame, distinct_functions, gathered
from .errors import BackendError

MATCH = "__gpuframe_match__"
LEFT_MARK, RIGHT_MARK = "__gpuframe_left__", "__gpuframe_right__"
INDICATOR_CATEGORIES = ("left_only", "right_only", "both")
"""The categories of ``pandas.merge``'s indicator column, in its order."""
ANTI_BASES = {"left_anti": "left", "right_anti": "right"}
"""pandas 3's anti joins: the rows of the join named here that only one side has."""


class Backend:
    """The pandas backend; the cuDF one overrides what differs."""

    name = "pandas"
    library = "pandas"
    on_device = False
    """Whether partitions live in device memory (one worker per GPU, spilling to host)."""
    holds_objects = True
    """Whether a column can hold Python objects (pandas' object dtype)."""
    broadcast_bytes = 64 * 2**20
    """A join's default cap on a side copied to every worker
    (:attr:`~gpuframe.config.JoinOptions.broadcast_bytes`): in host memory, each copy is
    probed by one core, and a shuffle spreads the work."""

    @property
    def module(self) -> Any:
        return importlib.import_module(self.library)

    def from_pandas(self, frame: pd.DataFrame) -> Any:
        return frame

    def import_on_client(self) -> threading.Thread | None:
        """Start importing this backend's library in the client, in the background, where the
        client does not hold it already (pandas it does): the thread that imports, or None."""
        return None

    def held(self, frame: pd.DataFrame) -> pd.DataFrame:
        """A client's pandas frame as this backend's partitions hold it, decided on the whole
        frame so that every partition has one schema."""
        return frame

    def adopt(self, partition: Any) -> Any:
        """A partition of either library (a pandas frame from the client, a cuDF one from a
        dask collection) as a frame of this backend."""
        return partition if isinstance(partition, pd.DataFrame) else partition.to_pandas()

    def to_pandas(self, frame: Any) -> pd.DataFrame:
        return frame

    def from_arrow(self, table: pa.Table) -> Any:
        """Decimals stay Arrow-backed (as in dask.dataframe): pandas' default turns each value
        into a Python ``Decimal`` object, six times slower to read."""
        return table.to_pandas(types_mapper=_arrow_decimals)

    def to_arrow(self, frame: Any) -> pa.Table:
        return pa.Table.from_pandas(frame, preserve_index=False)

    def meta_from_arrow(self, schema: pa.Schema) -> pd.DataFrame:
        """The schema (an empty frame) of data read as Arrow ``schema``, in the dtypes
        :meth:`to_pandas` gives it: what a reader reports, so that it is what the read gathers."""
        return self.to_pandas(self.from_arrow(schema.empty_table()))

    def missing_dtype(self, dtype: Any) -> Any:
        """The dtype a column of ``dtype`` takes once some of its values are missing (a join's
        unmatched rows): pandas holds integers as float64 and bools as objects; other dtypes
        have a missing value of their own and stay."""
        if isinstance(dtype, np.dtype) and dtype.kind in "iu":
            return np.dtype("float64")
        if isinstance(dtype, np.dtype) and dtype.kind == "b":
            return np.dtype(object)
        return dtype

    def astype(self, frame: Any, dtypes: Sequence[Any]) -> Any:
        """``frame`` with its columns, in order, in ``dtypes`` (``frame`` itself where they
        are). By position, as pandas.merge may give two columns one name."""
        casts = {i: dtype for i, (current, dtype) in enumerate(zip(frame.dtypes, dtypes))
                 if current != dtype}
        if not casts:
            return frame
        return frame.set_axis(range(frame.shape[1]), axis=1).astype(casts).set_axis(
            frame.columns, axis=1)

    def concat(self, frames: list[Any]) -> Any:
        """``frames``' rows one after another: the frame itself where there is one, as nothing
        changes a frame in place, and concat copies it (a join's whole partition, on a GPU)."""
        return frames[0] if len(frames) == 1 else self.module.concat(frames)

    def device_lost(self) -> bool:
        """Whether this process's device context is gone; host memory has none to lose."""
        return False

    def nbytes(self, frame: Any) -> int:
        return int(frame.memory_usage(deep=True, index=True).sum())

    def take_rows(self, frame: Any, positions: np.ndarray) -> Any:
        """``frame``'s rows at ``positions`` (distinct and in range, as a sample draws them),
        in that order."""
        return frame.iloc[positions]

    def divide(self, numerator: Any, denominator: Any) -> Any:
        """``numerator / denominator``, as pandas divides them: Series of one index, or one
        Series and a number."""
        return numerator / denominator

    def grouped(self, frame: Any, keys: Sequence[str], columns: Sequence[tuple[str, str, str]],
                dropna: bool) -> Any:
        """``frame`` grouped on ``keys`` in no particular order, each (name, column, function)
        of ``columns`` made, the keys as columns first. By lists of functions per column, the
        form pandas and cuDF both take; a (column, function) pair that several names ask for
        is computed once."""
        first, spec = distinct_functions(columns)
        result = frame.groupby(list(keys), dropna=dropna, sort=False).agg(spec)
        result.columns = [first[(column, function)] for column in spec for function in spec[column]]
        for name, column, function in columns:
            if first[(column, function)] != name:
                result[name] = result[first[(column, function)]]
        return result.reset_index()

    def join(self, left: Any, right: Any, how: str, left_on: list[str], right_on: list[str],
             suffixes: tuple[str, str], indicator: str | None = None) -> Any:
        """A local join with pandas semantics (null keys match null keys); 'leftsemi' and
        'leftanti' keep the left rows that have, or lack, a match, with left columns only;
        'left_anti' and 'right_anti' (pandas 3) one side's rows that lack a match, with both
        sides' columns. ``indicator``: the name of a ``_merge``-style column to add."""
        if how in ("leftsemi", "leftanti"):
            found = _found_keys(left[left_on[0]], right[right_on[0]]) \
                if len(left_on) == 1 else None
            if found is not None:
                return left[found if how == "leftsemi" else ~found]
            keys = right[right_on].drop_duplicates()
            keys.columns = left_on
            marked = left.reset_index(drop=True).merge(keys, how="left", on=left_on,
                                                       indicator=MATCH)
            keep = (marked[MATCH] == "both") == (how == "leftsemi")
            return left[keep.to_numpy()]
        if how == "cross":
            return left.merge(right, how="cross", suffixes=suffixes, indicator=indicator or False)
        marked = left.merge(right, how=ANTI_BASES.get(how, how), left_on=left_on,
                            right_on=right_on, suffixes=suffixes,
                            indicator=indicator or (how in ANTI_BASES and MATCH))
        return _only_unmatched(marked, how, indicator)

    def __repr__(self) -> str:
        return f"<gpuframe backend {self.name}>"


def _found_keys(keys: pd.Series, among: pd.Series) -> np.ndarray | None:
    """Whether each of ``keys`` is among ``among``, as a merge would match them (NaN and NaT
    with their own kind), where both have a NumPy dtype; None where not (merge decides). A
    hash lookup, where merge also builds the joined rows and their indicator at several times
    the cost. (NumPy's sorting ``isin`` is faster for some sizes and hundreds of times slower
    for others.)"""
    if not all(isinstance(series.dtype, np.dtype) and series.dtype.kind in "iufbmM"
               for series in (keys, among)):
        return None
    return keys.isin(among).to_numpy()


class CudfBackend(Backend):
    """Partitions are cuDF DataFrames in device memory."""

    name = "cudf"
    library = "cudf"
    on_device = True
    holds_objects = False
    broadcast_bytes = 2 * 2**30
    """A GPU builds and probes a hash table of a copied side in milliseconds, and the copy
    costs a GPU's link less than a shuffle of both sides does, which also samples them first
    (benchmarks/results/2026-11-28-s31-gpus-h100x2.md). A small share of a datacenter GPU's
    memory per copy; a worker with less copies only what one join task may hold, weighed by
    the sample (:mod:`~gpuframe.operators.join_decision`) or as the copy is gathered
    (:func:`~gpuframe.operators.join_tasks.gather_unsampled`)."""

    def held(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Object columns of integers (and nulls) as nullable int64: cuDF holds no Python
        objects and refuses them, while pandas joins such a column with an integer one. Object
        columns of ``Decimal`` values as Arrow-backed decimals, the type cuDF's decimal columns
        are gathered in (:meth:`to_pandas`)."""
        kinds = {name: pd.api.types.infer_dtype(frame[name], skipna=True)
                 for name, dtype in frame.dtypes.items() if is_object_dtype(dtype) and len(frame)}
        held = {name: "Int64" for name, kind in kinds.items() if kind == "integer"}
        held |= {name: pd.ArrowDtype(pa.array(frame[name], from_pandas=True).type)
                 for name, kind in kinds.items() if kind == "decimal"}
        return frame.astype(held) if held else frame

    def from_pandas(self, frame: pd.DataFrame) -> Any:
        return self.module.from_pandas(frame)

    def import_on_client(self) -> threading.Thread:
        """Dask tells the client each result's type, which the client unpickles: the first
        cuDF frame made imports cuDF there, seconds of a first query
        (benchmarks/results/2026-11-29-s39-gpu-h200.md). In a thread, while the workers start
        (:func:`~gpuframe.cluster.local.start_cluster`) or the user goes on; the thread is
        returned, to wait for."""
        importing = threading.Thread(target=importlib.import_module, args=(self.library,),
                                     name="gpuframe-import-cudf", daemon=True)
        importing.start()
        return importing

    def nbytes(self, frame: Any) -> int:
        return device_frame_bytes(frame)

    def take_rows(self, frame: Any, positions: np.ndarray) -> Any:
        """By pylibcudf's gather, unchecked: cuDF's ``iloc`` first checks the positions'
        bounds by a reduction and a wait for the device, most of a partition's sample on a
        worker whose other threads hold the GIL (benchmarks/results/2026-11-29-s39-gpu-h200.md).
        """
        import pylibcudf as plc

        return cudf_frame(gathered(frame, plc.Column.from_array(
            np.ascontiguousarray(positions, dtype=np.int32))))

    def divide(self, numerator: Any, denominator: Any) -> Any:
        """Numbers by pylibcudf's true division, into the type pandas gives (float64 where
        both are integers): cuDF's ``/`` then looks for infinities to sign with CuPy kernels,
        which CuPy compiles at a process's first division, for seconds on a machine's first
        run, and whose answers cost a wait on every division
        (benchmarks/results/2026-11-29-s39-gpu-h200.md, 2026-11-29-s40-gpu-h200.md). Other
        types (decimals, pandas' nullable numbers) as cuDF divides them."""
        sides = (numerator, denominator)
        kinds = [_number_kind(side) for side in sides]
        if any(kind is None for kind in kinds):
            return numerator / denominator
        import cudf
        import pylibcudf as plc
        from cudf.core.column import ColumnBase

        result = np.result_type(*kinds)
        if result.kind != "f":
            result = np.dtype("float64")
        operands = [side._column.plc_column if isinstance(side, cudf.Series)
                    else plc.Scalar.from_numpy(result.type(side)) for side in sides]
        quotient = plc.binaryop.binary_operation(
            *operands, plc.binaryop.BinaryOperator.TRUE_DIV,
            plc.DataType(plc.TypeId.FLOAT32 if result == np.float32 else plc.TypeId.FLOAT64))
        series = [side for side in sides if isinstance(side, cudf.Series)]
        names = {side.name for side in series}
        return cudf.Series._from_column(ColumnBase.create(quotient, result),
                                        name=names.pop() if len(names) == 1 else None,
                                        index=series[0].index)

    def grouped(self, frame: Any, keys: Sequence[str], columns: Sequence[tuple[str, str, str]],
                dropna: bool) -> Any:
        """By pylibcudf where it takes the functions and types
        (:func:`~gpuframe.cudf_direct.grouped`), else by cuDF's ``agg``, which also names its
        columns through a pandas MultiIndex."""
        made = cudf_direct.grouped(frame, keys, columns, dropna)
        return super().grouped(frame, keys, columns, dropna) if made is None else made

    def adopt(self, partition: Any) -> Any:
        return self.from_pandas(partition) if isinstance(partition, pd.DataFrame) else partition

    def to_pandas(self, frame: Any) -> pd.DataFrame:
        """cuDF's frame as pandas, its decimals Arrow-backed as the pandas backend holds them
        (:meth:`Backend.from_arrow`), where cuDF gives Python ``Decimal`` objects."""
        out = frame.to_pandas()
        decimals = [name for name, dtype in zip(frame.columns, frame.dtypes)
                    if is_cudf_decimal(dtype)]
        for name in decimals:
            kind = pa.decimal128(frame.dtypes[name].precision, frame.dtypes[name].scale)
            values = frame[name].to_arrow().cast(kind)
            out[name] = pd.Series(pd.arrays.ArrowExtensionArray(values), index=out.index)
        return out

    def from_arrow(self, table: pa.Table) -> Any:
        return self.module.DataFrame.from_arrow(table)

    def to_arrow(self, frame: Any) -> pa.Table:
        return frame.to_arrow(preserve_index=False)

    def meta_from_arrow(self, schema: pa.Schema) -> pd.DataFrame:
        """As :meth:`to_pandas` gives a frame read as ``schema``, without cuDF (the client that
        plans a read may have no GPU): strings as ``str``, decimals Arrow-backed, lists and
        structs as Python objects (as pyarrow gives them), and dates as datetime64[s], which
        cuDF reads them as."""
        meta = schema.empty_table().to_pandas(types_mapper=_arrow_decimals)
        dates = {field.name: np.dtype("datetime64[s]") for field in schema
                 if pa.types.is_date(field.type)}
        return meta.astype(dates) if dates else meta

    def missing_dtype(self, dtype: Any) -> Any:
        """cuDF holds missing values in a column of any dtype, but its to_pandas gives a bool
        column as object only where the partition has a missing value, and as bool where it has
        none: only the nullable boolean is the same for every partition. Integers become
        float64 as in pandas (which cuDF's own merge also gives where rows are unmatched)."""
        if isinstance(dtype, np.dtype) and dtype.kind == "b":
            return pd.BooleanDtype()
        return super().missing_dtype(dtype)

    def astype(self, frame: Any, dtypes: Sequence[Any]) -> Any:
        """By name (a cuDF frame holds no two columns of one name). cuDF holds no Python objects:
        a column that ``dtypes`` has as object is cast where it holds strings, and otherwise
        (decimals, lists, structs) left as it is, since to_pandas gives it as objects anyway."""
        import cudf

        casts = {}
        for name, current, dtype in zip(frame.columns, frame.dtypes, dtypes):
            if isinstance(current, cudf.CategoricalDtype):
                current = current.to_pandas()
            if is_cudf_decimal(current) and _same_decimal(current, dtype):
                continue
            if current != dtype and (not is_object_dtype(dtype)
                                     or isinstance(current, pd.StringDtype)):
                casts[name] = dtype
        return cast_columns(frame, casts)

    def device_lost(self) -> bool:
        """Whether this process's CUDA context is gone: after a kernel's illegal address (a
        sticky error) every CUDA call fails until the process ends, and a synchronize says so."""
        from cupy.cuda import runtime

        try:
            runtime.deviceSynchronize()
        except runtime.CUDARuntimeError:
            return True
        return False

    def join(self, left: Any, right: Any, how: str, left_on: list[str], right_on: list[str],
             suffixes: tuple[str, str], indicator: str | None = None) -> Any:
        """By pylibcudf where it takes the join (:func:`~gpuframe.cudf_direct.joined`), else by
        cuDF's merge: cuDF joins match null keys like pandas and do 'leftsemi'/'leftanti'
        natively; cuDF's merge has no indicator, so each side is marked by a column of its own
        and the indicator is made from which marks a row carries."""
        if indicator is None:
            made = cudf_direct.joined(left, right, how, left_on, right_on, suffixes)
            if made is not None:
                return made
        if how in ("leftsemi", "leftanti"):
            return left.merge(right[right_on].rename(columns=dict(zip(right_on, left_on))),
                              how=how, on=left_on)
        if indicator is None and how not in ANTI_BASES:
            if how == "cross":
                return left.merge(right, how="cross", suffixes=suffixes)
            return left.merge(right, how=how, left_on=left_on, right_on=right_on,
                              suffixes=suffixes)
        left = left.assign(**{LEFT_MARK: True})
        right = right.assign(**{RIGHT_MARK: True})
        if how == "cross":
            joined = left.merge(right, how="cross", suffixes=suffixes)
        else:
            joined = left.merge(right, how=ANTI_BASES.get(how, how), left_on=left_on,
                                right_on=right_on, suffixes=suffixes)
        in_left = joined[LEFT_MARK].fillna(False).astype(bool)
        in_right = joined[RIGHT_MARK].fillna(False).astype(bool)
        codes = in_left.astype("int8") + 2 * in_right.astype("int8")
        labels = codes.map({1: "left_only", 2: "right_only", 3: "both"})
        joined = joined.drop(columns=[LEFT_MARK, RIGHT_MARK])
        joined[indicator or MATCH] = labels.astype(
            self.module.CategoricalDtype(categories=list(INDICATOR_CATEGORIES)))
        return _only_unmatched(joined, how, indicator)


BACKENDS: dict[str, Backend] = {b.name: b for b in (Backend(), CudfBackend())}


def _number_kind(side: Any) -> Any:
    """What fixes a division's type for :meth:`CudfBackend.divide`: a cuDF Series' numpy
    dtype of integers or floats, or a number as a Python one (numpy weighs those less than a
    column's type, and pandas a numpy number too: float32 by ``np.float64(2)`` stays
    float32); None for anything else (decimals, booleans, strings)."""
    if isinstance(side, (bool, np.bool_)):
        return None
    if isinstance(side, (int, float, np.integer, np.floating)):
        return side.item() if isinstance(side, np.generic) else side
    dtype = getattr(side, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype.kind in "iuf" and hasattr(side, "_column"):
        return dtype
    return None


def true_divide(left: Any, right: Any) -> Any:
    """``left / right`` of an expression: by :meth:`CudfBackend.divide` where a side is a
    cuDF Series, else by the operator."""
    # cuDF may be half imported here (Backend.import_on_client imports it in a thread), and a
    # cuDF Series exists only once its class does
    series = getattr(sys.modules.get("cudf"), "Series", None)
    if series is not None and (isinstance(left, series) or isinstance(right, series)):
        return BACKENDS["cudf"].divide(left, right)
    return left / right


def device_frame_bytes(frame: Any) -> int:
    """A cuDF frame's bytes, its index's too, summed on the host from each column's buffer
    sizes: ``DataFrame.memory_usage`` sums them in a device series, a kernel and a copy back
    that wait for all the work queued before them, for every task result Dask sizes."""
    return int(sum(frame[name].memory_usage(index=False) for name in frame.columns)
               + frame.index.memory_usage())


@sizeof.register_lazy("cudf")
def _register_cudf_sizeof() -> None:
    """Dask sizes every task result to account, spill and log it. With no rule for cuDF frames
    it takes ``sys.getsizeof`` (about 100 bytes), so device memory went uncounted and every
    bucket's transfer logged ~0 bytes (benchmarks/results/2026-11-22-goals-h200x2.md).
    dask_cudf has a rule, but a worker imports dask_cudf only when dask.dataframe dispatches on
    cuDF."""
    import cudf

    sizeof.register(cudf.DataFrame, device_frame_bytes)

    @sizeof.register(cudf.Series)
    def _series(series: Any) -> int:
        return int(series.memory_usage(index=True))


def _only_unmatched(joined: Any, how: str, indicator: str | None) -> Any:
    """For an anti join, the rows of its base join (:data:`ANTI_BASES`) whose indicator says
    they are one side's only; the column itself stays where the caller asked for one."""
    if how not in ANTI_BASES:
        return joined
    column = indicator or MATCH
    kept = joined[joined[column] == f"{ANTI_BASES[how]}_only"]
    return kept if indicator else kept.drop(columns=[MATCH])


def _arrow_decimals(kind: pa.DataType) -> Any:
    return pd.ArrowDtype(kind) if pa.types.is_decimal(kind) else None


def is_cudf_decimal(dtype: Any) -> bool:
    """Whether ``dtype`` is one of cuDF's decimals (32, 64 or 128 bits wide)."""
    return type(dtype).__name__ in ("Decimal32Dtype", "Decimal64Dtype", "Decimal128Dtype")


def _same_decimal(current: Any, dtype: Any) -> bool:
    """Whether a cuDF decimal ``current`` holds ``dtype`` (an Arrow-backed decimal) as is: the
    same digits and scale, whatever its width."""
    return (isinstance(dtype, pd.ArrowDtype) and pa.types.is_decimal(dtype.pyarrow_dtype)
            and (current.precision, current.scale) == (dtype.pyarrow_dtype.precision,
                                                       dtype.pyarrow_dtype.scale))


def _for_frame(frame: Any, dtype: Any) -> Any:
    """``dtype`` as ``frame``'s library takes it: cuDF casts to its own decimal types, not to
    pandas' Arrow-backed ones."""
    if (not isinstance(frame, pd.DataFrame) and isinstance(dtype, pd.ArrowDtype)
            and pa.types.is_decimal(dtype.pyarrow_dtype)):
        import cudf

        return cudf.Decimal128Dtype(dtype.pyarrow_dtype.precision, dtype.pyarrow_dtype.scale)
    return dtype


def cast_columns(frame: Any, casts: dict[Any, Any]) -> Any:
    """``frame`` (pandas or cuDF) with columns cast by ``casts``, itself where none is. A time
    zone is given by localizing: cuDF keeps zoned times as UTC instants and can hand them back
    without their zone (a join of zoned keys), which ``astype`` refuses to add; a pandas column
    of a zone always has one, so only the cast to another zone or unit applies to it."""
    zoned = {name: dtype for name, dtype in casts.items()
             if isinstance(dtype, pd.DatetimeTZDtype)}
    plain = {name: _for_frame(frame, dtype) for name, dtype in casts.items()
             if name not in zoned}
    frame = frame.astype(plain) if plain else frame
    if zoned:
        frame = frame.copy(deep=False)  # a partition Dask holds is never changed in place
    for name, dtype in zoned.items():
        column = frame[name]
        if getattr(column.dtype, "tz", None) is None:
            column = column.dt.tz_localize("UTC")
        column = column.dt.tz_convert(dtype.tz)
        frame[name] = column if column.dtype == dtype else column.astype(dtype)
    return frame


def get_backend(name: str) -> Backend:
    """The backend called ``name`` ('pandas' or 'cudf')."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise BackendError(
            f"unknown backend {name!r}; choose one of {', '.join(sorted(BACKENDS))}"
        ) from None
