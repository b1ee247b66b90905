"""Pack a partition's rows into buckets, one per destination, ready to send.

:func:`hash_pack` hashes the key columns with gpuframe's native core (one hash definition,
compiled for the CPU and the GPU, so a key reaches the same destination on either backend);
:func:`pack_by_destinations` takes one destination per row from the caller, such as those
:func:`range_destinations` finds by bisecting sorted boundary rows (a sort's exchange). Either
packs every destination's rows of all columns into one contiguous byte range of one buffer, in
input order (the packing is stable). A pyarrow Table, or a pandas DataFrame through pyarrow, is
packed on the CPU into a NumPy buffer; a cuDF DataFrame on its GPU into a CuPy buffer, on CuPy's
current stream. :meth:`PackedBuckets.destination` cuts one destination's share out of the
buffer (a view), and :func:`unpack` turns such a share back into a table whose columns point into
the buffer (no copy, except that booleans and dictionaries, packed as bytes and values, are cast
back on the CPU). :func:`hash_split`, :func:`split_by_destinations` and :func:`range_split` give
the destinations as frames of the input's own library, or ``sealed``: a destination whose rows
the buffer holds whole as a :class:`Parcel`, which travels as that one buffer (a frame would
travel as a buffer per column) and opens into the same frame where it arrives.

Keys are hashed as stored: cast the join keys of both sides to one common type first (the
exchange does). Rows whose keys are null all go to one destination, as do -0.0 and 0.0, and all
NaNs. cuDF and CuPy are imported only when a cuDF frame is given.

This module holds the entry points and the CPU packer; the GPU packer, which only runs for cuDF
frames, is :mod:`~gpuframe.exchange.pack_device`, and the layout, errors and argument checks
both share are :mod:`~gpuframe.exchange.pack_layout`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pandas import ArrowDtype

from .digest import digest_keys, holds_objects
from .pack_device import (
    _device_arg,
    _device_columns,
    _device_destinations,
    _device_unpackable,
    _pack_device,
    _take_carried_device,
    _unpack_device,
)
from .pack_layout import (
    ALIGNMENT,
    FIXED,
    FLOATING,
    STRING,
    BoundariesError,
    ColumnSpec,
    DestinationsError,
    PackedBucket,
    PackedBuckets,
    UnsupportedColumnTypeError,
    _check_count,
    _check_threads,
    _checked_destinations,
    _key_indices,
    _key_list,
    _orders,
)


def hash_pack(table: Any, on: Sequence[str], n: int, *, threads: int | None = None
                   ) -> PackedBuckets:
    """Pack ``table``'s rows into ``n`` buckets by the hash of the key columns ``on``.

    ``table`` is a ``pyarrow.Table`` or a ``pandas.DataFrame`` (its index is dropped), packed on
    the CPU with ``threads`` threads (None: one per core), or a ``cudf.DataFrame``, packed on the
    GPU on CuPy's current stream (the buffer is ready once that stream gets there; the frame's
    memory is read until then, so a frame freed on another stream must wait for it).
    """
    n = _check_count(n)
    if _is_cudf(table):
        return _pack_device(table, n, on=on)
    return _pack_host(_as_arrow(table), n, _check_threads(threads), on=on)


def pack_by_destinations(table: Any, destinations: Any, n: int, *,
                              threads: int | None = None) -> PackedBuckets:
    """``table``'s rows packed as :func:`hash_pack` packs them, row r going to
    ``destinations[r]``: a 1-D integer array (any width, signed or not) of one destination in
    ``[0, n)`` per row, NumPy for a pyarrow Table or pandas DataFrame, CuPy for a cuDF
    DataFrame (which the GPU reads on CuPy's current stream). The CPU and the GPU write the same
    bytes. Raises :class:`DestinationsError` naming the first row out of range, or what is wrong
    with the array."""
    from .. import _core

    n = _check_count(n)
    try:
        if _is_cudf(table):
            return _pack_device(
                table, n, destinations=_device_destinations(destinations, len(table)))
        table = _as_arrow(table)
        return _pack_host(table, n, _check_threads(threads),
                               destinations=_host_destinations(destinations, table.num_rows))
    except _core.DestinationError as error:
        raise DestinationsError(str(error)) from None


def range_destinations(table: Any, on: Sequence[Any], boundaries: Any,
                       ascending: bool | Sequence[bool] = True, nulls_last: bool = True, *,
                       threads: int | None = None) -> Any:
    """Each row's destination in a range split of ``table`` on the key columns ``on``: the number
    of ``boundaries`` rows that sort at or before the row (bisect right), as a uint32 NumPy array
    (a CuPy one for a cuDF DataFrame, computed on CuPy's current stream).

    ``boundaries`` holds k rows over the ``on`` columns (a pyarrow Table, or a pandas or cuDF
    DataFrame: a few rows, read on the host), sorted in the order asked for, which is
    ``DataFrame.sort_values(on, ascending=ascending, na_position=...)``'s: ``ascending`` one bool
    or one per column; nulls, and NaNs with them, after every value if ``nulls_last``, else
    before; strings compared as bytes. So there are k + 1 destinations, each with keys smaller
    than the next one's, and equal keys land together. The boundary columns are cast to the
    table's key types first. Raises :class:`BoundariesError` for boundaries that are not sorted,
    lack a key column or cannot be cast."""
    keys = _key_list(on)
    orders = _orders(keys, ascending, nulls_last)
    if _is_cudf(table):
        return _range_device(table, keys, boundaries, orders)
    table = _as_arrow(table)
    return _range_host(table, keys, boundaries, orders, _check_threads(threads))


def unpack(part: PackedBucket) -> Any:
    """``part``'s rows as a table over its bytes: a pyarrow Table, or a cuDF DataFrame for a
    share packed on the GPU."""
    return _unpack_device(part) if part.on_gpu else _unpack_host(part)


def hash_split(frame: Any, on: Sequence[str], n: int, sealed: bool = False) -> list[Any]:
    """``frame``'s rows split into ``n`` frames of its own library (pandas, cuDF or pyarrow) by
    the hash of ``on``: what the exchange sends to each worker. ``sealed``: :class:`Parcel`
    objects where they can be (see :func:`_split`).

    Columns that are not keys and that the packer cannot pack (decimals, lists, structs) are
    carried: the rest is packed with each row's number, by which every destination then takes
    its rows of them, in the same order. A dataset read with such columns is joined like any
    other, not refused. Keys the packer cannot hash as stored (Python objects, decimals) are
    hashed by their digests (:mod:`~gpuframe.exchange.digest`) and carried."""
    digested, keys, digests = digest_keys(frame, _key_list(on))
    parts = _split(digested, keys, n, lambda packable: hash_pack(packable, keys, n),
                   sealed and not digests)
    if not digests:
        return parts
    if isinstance(frame, pa.Table):
        return [part.drop_columns(digests) for part in parts]
    return [part.drop(columns=digests) for part in parts]


def split_by_destinations(frame: Any, destinations: Any, n: int, sealed: bool = False
                          ) -> list[Any]:
    """``frame``'s rows split into ``n`` frames of its own library, row r into frame
    ``destinations[r]`` (see :func:`pack_by_destinations`), in order; columns the packer
    cannot pack are carried, and ``sealed`` taken, as :func:`hash_split` does."""
    return _split(frame, [], n,
                  lambda packable: pack_by_destinations(packable, destinations, n), sealed)


def range_split(frame: Any, on: Sequence[Any], boundaries: Any,
                ascending: bool | Sequence[bool] = True, nulls_last: bool = True,
                sealed: bool = False) -> list[Any]:
    """``frame``'s rows split into ``len(boundaries) + 1`` frames of its own library by the
    ranges of ``on`` that the sorted ``boundaries`` rows cut (see :func:`range_destinations`):
    frame i holds keys that sort before frame i + 1's. Columns the packer cannot pack are
    carried, and ``sealed`` taken, as :func:`hash_split` does."""
    keys = _key_list(on)
    n = _check_count(len(boundaries) + 1)

    def pack(packable: Any) -> PackedBuckets:
        destinations = range_destinations(packable, keys, boundaries, ascending, nulls_last)
        return pack_by_destinations(packable, destinations, n)

    return _split(frame, keys, n, pack, sealed)


def _split(frame: Any, keys: list[Any], n: int, pack: Callable[[Any], PackedBuckets],
           sealed: bool = False) -> list[Any]:
    """``frame`` split into ``n`` frames of its own library by ``pack``, which packs a table of
    the frame's rows: the frame itself, or (with columns the packer cannot pack, other than
    ``keys``) the packable columns and each row's number, by which every destination then takes
    its rows of the carried columns. Where the packed table is the frame itself and ``sealed``,
    each destination's share comes as a :class:`Parcel`, unopened. A pandas frame's object
    columns other than ``keys`` are carried as they are, never converted to Arrow: they may hold
    values of several types, which Arrow refuses, and those it takes would come back as other
    objects (Decimals as strings, in a column of strings). A frame of no rows is not packed:
    each destination gets it as it is (a cuDF strings column of no rows has no offsets to
    pack)."""
    if len(frame) == 0:
        return [frame] * n
    if _is_cudf(frame):
        carried = [name for name in _device_unpackable(frame) if name not in keys]
        if not carried:
            packed = pack(frame)
            shares = [packed.destination(d) for d in range(packed.n_destinations)]
            return [Parcel(share) if sealed else unpack(share) for share in shares]
        import cupy

        row = _unused_name(frame.columns)
        numbered = frame.drop(columns=carried)
        numbered[row] = cupy.arange(len(frame), dtype=cupy.int64)
        packed = pack(numbered)
        return [_take_carried_device(unpack(packed.destination(d)), frame, carried, row)
                for d in range(packed.n_destinations)]
    arrow = isinstance(frame, pa.Table)
    objects = [] if arrow else [name for name, dtype in frame.dtypes.items()
                                if holds_objects(dtype) and name not in keys]
    # The Arrow schema's pandas metadata travels through the packing, so to_pandas gives back
    # the frame's own dtypes (nullable integers, strings, time zones).
    table = frame if arrow else _as_arrow(frame.drop(columns=objects) if objects else frame)
    carried = [field.name for field in table.schema
               if field.name not in keys and not _host_packable(field.type)]
    if not carried and not objects:
        packed = pack(table)
        pandas = None if arrow else _arrow_backed(frame)
        parcels = [Parcel(packed.destination(d), pandas) for d in range(packed.n_destinations)]
        return parcels if sealed else [parcel.open() for parcel in parcels]
    row = _unused_name(list(frame.columns) if not arrow else table.schema.names)
    numbered = table.drop_columns(carried).append_column(
        row, pa.array(np.arange(len(frame), dtype=np.int64)))
    packed = pack(numbered)
    parts = []
    for d in range(packed.n_destinations):
        part = unpack(packed.destination(d))
        rows = part.column(row).to_numpy()
        part = _take_carried_host(part, table, carried, row)
        parts.append(part if arrow else _with_objects(
            _to_pandas(part, _arrow_backed(frame)), frame, objects, rows))
    return parts


@dataclass(frozen=True)
class Parcel:
    """One destination's rows still packed, as the exchange sends them: one buffer, where a
    frame travels as a buffer per column, and the comm layer's cost is per buffer
    (benchmarks/exchange_latency.py). :meth:`open` gives the frame :func:`hash_split` would
    have: cuDF or pyarrow as packed, or, where ``pandas`` is given, pandas with those Arrow types
    kept Arrow-backed."""

    bucket: PackedBucket
    pandas: frozenset[pa.DataType] | None = None

    def __len__(self) -> int:
        return self.bucket.rows

    def open(self) -> Any:
        part = unpack(self.bucket)
        return part if self.pandas is None else _to_pandas(part, self.pandas)


def _arrow_backed(frame: Any) -> frozenset[pa.DataType]:
    """The Arrow types of ``frame``'s Arrow-backed pandas columns that pandas' metadata alone
    would not give back (decimals and dates would come as Python objects); strings are left to
    the metadata, which tells pandas' string dtypes apart."""
    return frozenset(dtype.pyarrow_dtype for dtype in frame.dtypes
                     if isinstance(dtype, ArrowDtype) and not _is_string(dtype.pyarrow_dtype))


def _to_pandas(part: pa.Table, kept: frozenset[pa.DataType]) -> Any:
    """A destination's rows as pandas, the Arrow types ``kept`` (:func:`_arrow_backed`)
    Arrow-backed."""
    if not kept:
        return part.to_pandas()
    return part.to_pandas(types_mapper=lambda kind: ArrowDtype(kind) if kind in kept else None)


def _with_objects(part: Any, frame: Any, objects: list[Any], rows: np.ndarray) -> Any:
    """A destination's rows ``part`` (pandas) with its ``rows`` of ``frame``'s object columns
    ``objects``, in ``frame``'s column order."""
    if not objects:
        return part
    for name in objects:
        part[name] = frame[name].to_numpy()[rows]
    return part[list(frame.columns)]


def _unused_name(names: Sequence[Any]) -> str:
    """A column name that is none of ``names``: where the row numbers travel."""
    name = "__gpuframe_row__"
    while name in set(names):
        name += "_"
    return name


# --- the CPU side -------------------------------------------------------------------------------

def _as_arrow(table: Any) -> pa.Table:
    if isinstance(table, pa.Table):
        return table
    if not _is_pandas(table):
        raise UnsupportedColumnTypeError(
            f"cannot pack a {type(table).__name__}: pass a pyarrow Table, a pandas "
            f"DataFrame or a cuDF DataFrame")
    return pa.Table.from_pandas(table, preserve_index=False)


def _pack_host(table: pa.Table, n: int, threads: int, *, on: Sequence[str] = (),
                    destinations: np.ndarray | None = None) -> PackedBuckets:
    """``table`` packed by the hash of ``on``, or to ``destinations`` (checked) where given."""
    from .. import _core

    keys = [] if destinations is not None else _key_indices(table.schema.names, on)
    specs, args = [], []
    for field, column in zip(table.schema, table.columns):
        spec, arg = _host_column(field, column)
        specs.append(spec)
        args.append(arg)
    if destinations is None:
        core = _core.HostPartition(args, keys, table.num_rows, n, threads)
    else:
        core = _core.HostPartition.by_destinations(args, destinations, table.num_rows, n, threads)
    buffer = _aligned_empty(core.total_bytes)
    core.scatter(buffer)
    return PackedBuckets(tuple(specs), buffer, core.rows, core.byte_offsets, core.pieces,
                            core.chars, table.schema.metadata)


def _host_destinations(destinations: Any, rows: int) -> np.ndarray:
    """The caller's destinations for a host table, as a contiguous NumPy integer array."""
    if hasattr(destinations, "__cuda_array_interface__"):
        raise DestinationsError("the destinations are in device memory: give a NumPy array for "
                                "a pyarrow Table or pandas DataFrame")
    return np.ascontiguousarray(_checked_destinations(np.asarray(destinations), rows))


def _range_host(table: pa.Table, keys: list[Any], boundaries: Any,
                orders: list[tuple[bool, bool]], threads: int) -> np.ndarray:
    """:func:`range_destinations` of a host table: boundaries cast, checked and bisected by the
    core."""
    from .. import _core

    indices = _key_indices(table.schema.names, keys)
    fields = [table.schema.field(i) for i in indices]
    key_args = [_range_key(field, table.column(i)) for field, i in zip(fields, indices)]
    bounds = _boundary_table(boundaries, keys, [field.type for field in fields])
    out = np.empty(table.num_rows, np.uint32)
    try:
        _core.range_destinations(key_args, table.num_rows, _boundary_args(bounds, keys),
                                 bounds.num_rows, _key_orders(bounds, orders), out, threads)
    except _core.BoundaryOrderError as error:
        raise BoundariesError(str(error)) from None
    return out


def _range_key(field: pa.Field, column: pa.ChunkedArray) -> tuple:
    """The core's argument for a host key column of a range split."""
    if pa.types.is_dictionary(field.type):
        raise UnsupportedColumnTypeError(
            f"key column {field.name!r} is a dictionary (categorical), which pandas sorts by its "
            f"categories' order: cast it to its values to split by their ranges")
    return _host_column(field, column)[1]


def _boundary_table(boundaries: Any, keys: list[Any], types: list[pa.DataType]) -> pa.Table:
    """``boundaries``' key columns, in key order, cast to ``types`` (the table's), on the host."""
    if isinstance(boundaries, pa.Table):
        names = boundaries.schema.names
    elif _is_cudf(boundaries) or _is_pandas(boundaries):
        names = list(boundaries.columns)
    else:
        raise BoundariesError(f"boundaries of type {type(boundaries).__name__}: give a pyarrow "
                              f"Table, or a pandas or cuDF DataFrame")
    missing = [key for key in keys if key not in names]
    if missing:
        raise BoundariesError(f"the boundaries lack the key column(s) {missing}: they hold "
                              f"{list(names)}")
    if isinstance(boundaries, pa.Table):
        table = boundaries.select(keys)
    elif _is_cudf(boundaries):
        table = boundaries[keys].to_arrow(preserve_index=False)
    else:
        table = pa.Table.from_pandas(boundaries[keys], preserve_index=False)
    columns = []
    for key, column, wanted in zip(keys, table.columns, types):
        try:
            columns.append(column if column.type == wanted else column.cast(wanted))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
            raise BoundariesError(f"boundary column {key!r} of type {column.type} cannot be cast "
                                  f"to the table's {wanted}: {error}") from None
    return pa.Table.from_arrays(columns, names=[str(key) for key in keys])


def _boundary_args(bounds: pa.Table, keys: list[Any]) -> list[tuple]:
    """The core's arguments for the host boundary columns."""
    return [_range_key(pa.field(str(key), column.type), column)
            for key, column in zip(keys, bounds.columns)]


def _key_orders(bounds: pa.Table, orders: list[tuple[bool, bool]]) -> list[tuple[bool, bool, bool]]:
    """The core's key orders: whether each column's fixed-width values are signed (integers
    and temporal types; not booleans, packed as bytes), then ``orders``' (ascending,
    nulls_last)."""
    return [(pa.types.is_signed_integer(kind) or pa.types.is_temporal(kind), *order)
            for kind, order in zip(bounds.schema.types, orders)]


def _is_pandas(frame: Any) -> bool:
    import pandas as pd

    return isinstance(frame, pd.DataFrame)


def _host_packed_type(kind: pa.DataType) -> pa.DataType:
    """The type an Arrow column of ``kind`` is packed as: dictionaries decoded, booleans as
    bytes, string and binary views as large strings and binaries."""
    if pa.types.is_dictionary(kind):
        return _host_packed_type(kind.value_type)
    if pa.types.is_boolean(kind):
        return pa.uint8()
    if pa.types.is_string_view(kind):
        return pa.large_string()
    if pa.types.is_binary_view(kind):
        return pa.large_binary()
    return kind


def _host_kind(packed: pa.DataType) -> int | None:
    """The core's kind of a packed Arrow type; None where the core cannot pack it."""
    if _is_string(packed):
        return STRING
    if pa.types.is_floating(packed) and not pa.types.is_float16(packed):
        return FLOATING
    if (pa.types.is_integer(packed) or pa.types.is_temporal(packed)) and \
            packed.bit_width in (8, 16, 32, 64):
        return FIXED
    return None


def _host_packable(kind: pa.DataType) -> bool:
    return _host_kind(_host_packed_type(kind)) is not None


def _take_carried_host(part: pa.Table, table: pa.Table, carried: list[str],
                       row: str) -> pa.Table:
    """One destination's packed columns with its rows of ``table``'s ``carried`` columns (by
    the row numbers in ``row``), in ``table``'s column order and schema."""
    rows = part.column(row)
    columns = {name: part.column(name) for name in part.schema.names if name != row}
    columns.update((name, table.column(name).take(rows)) for name in carried)
    return pa.Table.from_arrays([columns[name] for name in table.schema.names],
                                schema=table.schema)


def _host_column(field: pa.Field, column: pa.ChunkedArray) -> tuple[ColumnSpec, tuple]:
    """The spec of one Arrow column and its argument for the core (buffers as NumPy views)."""
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    dictionary = None
    if pa.types.is_dictionary(array.type):
        dictionary = array.dictionary
        array = array.dictionary_decode()
    packed = _host_packed_type(array.type)
    if packed != array.type:
        array = array.cast(packed)
    buffers = array.buffers()
    nullable = array.null_count > 0
    validity = _host_bytes(buffers[0]) if nullable else None
    kind_code = _host_kind(packed)
    if kind_code == STRING:
        width = 8 if pa.types.is_large_string(packed) or pa.types.is_large_binary(packed) else 4
        spec = ColumnSpec(field.name, STRING, width, nullable, packed, field.type, dictionary)
        return spec, (STRING, width, array.offset, _host_bytes(buffers[2]), validity,
                      _host_bytes(buffers[1]))
    if kind_code is None:
        raise UnsupportedColumnTypeError(
            f"column {field.name!r} has type {field.type}, which the packer cannot "
            f"pack (integers, floats, booleans, temporal types, strings and binary can)")
    width = packed.bit_width // 8
    spec = ColumnSpec(field.name, kind_code, width, nullable, packed, field.type, dictionary)
    return spec, (kind_code, width, array.offset, _host_bytes(buffers[1]), validity, None)


def _unpack_host(part: PackedBucket) -> pa.Table:
    rows, data = part.rows, part.data
    arrays = []
    for spec, (validity, values, chars), n_chars in zip(part.columns, part.pieces, part.chars):
        buffers = [_arrow_buffer(data, validity, (rows + 7) // 8) if validity >= 0 else None]
        if spec.kind == STRING:
            buffers += [_arrow_buffer(data, values, (rows + 1) * spec.width),
                        _arrow_buffer(data, chars, int(n_chars))]
        else:
            buffers.append(_arrow_buffer(data, values, rows * spec.width))
        array = pa.Array.from_buffers(spec.packed_type, rows, buffers,
                                      null_count=-1 if validity >= 0 else 0)
        arrays.append(_restore(array, spec.type, spec.dictionary))
    schema = pa.schema([pa.field(spec.name, array.type)
                        for spec, array in zip(part.columns, arrays)], metadata=part.metadata)
    return pa.Table.from_arrays(arrays, schema=schema)


def _restore(array: pa.Array, wanted: pa.DataType,
             dictionary: pa.Array | None = None) -> pa.Array:
    """Undo the packing's casts: bytes back to booleans, values back to indices into their
    column's ``dictionary``."""
    if array.type == wanted:
        return array
    if pa.types.is_dictionary(wanted):
        values = _restore(array, wanted.value_type)
        indices = pc.index_in(values, value_set=dictionary).cast(wanted.index_type)
        return pa.DictionaryArray.from_arrays(indices, dictionary, ordered=wanted.ordered)
    return array.cast(wanted)


def _host_bytes(buffer: pa.Buffer | None) -> np.ndarray:
    return np.empty(0, np.uint8) if buffer is None else np.frombuffer(buffer, np.uint8)


def _arrow_buffer(data: np.ndarray, start: int, length: int) -> pa.Buffer:
    return pa.py_buffer(data[start:start + length])


def _aligned_empty(nbytes: int) -> np.ndarray:
    """An uninitialised uint8 array whose data starts on an ALIGNMENT-byte boundary, as Arrow
    prefers its buffers (the pieces inside are aligned relative to the start)."""
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    skip = -raw.ctypes.data % ALIGNMENT
    return raw[skip:skip + nbytes]


def _is_string(kind: pa.DataType) -> bool:
    return (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_binary(kind) or pa.types.is_large_binary(kind))


# --- the GPU side -------------------------------------------------------------------------------
# The GPU packer is pack_device.py; a cuDF range split's destinations are found here, as its
# boundaries are cast and checked by the CPU side's Arrow code above.

def _is_cudf(table: Any) -> bool:
    return type(table).__module__.split(".")[0] == "cudf"


def _range_device(frame: Any, keys: list[Any], boundaries: Any,
                  orders: list[tuple[bool, bool]]) -> Any:
    """:func:`_range_host` for a cuDF frame. The boundaries, a few rows, are cast and checked on
    the host, then copied by CuPy on its current stream, where the kernel reads them: their
    memory goes back to that stream's pool, which hands it out again only behind the kernel."""
    import cupy

    from .. import _core

    columns = _device_columns(frame)
    indices = _key_indices([name for name, _ in columns], keys)
    key_args = [_device_arg(*columns[i]) for i in indices]
    types = frame[keys].head(0).to_arrow(preserve_index=False).schema.types
    bounds = _boundary_table(boundaries, keys, types)
    host_args = _boundary_args(bounds, keys)
    key_orders = _key_orders(bounds, orders)
    try:
        _core.check_boundaries(host_args, bounds.num_rows, key_orders)
    except _core.BoundaryOrderError as error:
        raise BoundariesError(str(error)) from None
    device_args = [tuple(cupy.asarray(x) if isinstance(x, np.ndarray) else x for x in arg)
                   for arg in host_args]
    out = cupy.empty(len(frame), dtype=cupy.uint32)
    _core.range_destinations_cuda(key_args, len(frame), device_args, bounds.num_rows,
                                  key_orders, out, cupy.cuda.get_current_stream().ptr)
    return out
