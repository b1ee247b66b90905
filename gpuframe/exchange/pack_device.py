"""The GPU packer: what :mod:`~gpuframe.exchange.pack` does for a cuDF DataFrame, which it hands
here: packed on the frame's GPU into a CuPy buffer, on CuPy's current stream, and unpacked back
into cuDF. A module apart because only cuDF frames reach it, and it holds what they alone need:
how cuDF columns reach the core, and the scratch kept between calls. cuDF, pylibcudf and CuPy
are imported inside its functions, so importing it needs none of them.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..cudf_direct import cudf_frame
from .pack_layout import (
    ALIGNMENT,
    FIXED,
    FLOATING,
    STRING,
    ColumnSpec,
    DestinationsError,
    PackedBucket,
    PackedBuckets,
    UnsupportedColumnTypeError,
    _checked_destinations,
    _key_indices,
)


def _pack_device(frame: Any, n: int, *, on: Sequence[str] = (),
                      destinations: Any = None) -> PackedBuckets:
    """``frame`` packed by the hash of ``on``, or to ``destinations`` (checked) where given."""
    import cupy

    from .. import _core

    columns = _device_columns(frame)
    keys = [] if destinations is not None else _key_indices([name for name, _ in columns], on)
    args = [_device_arg(name, column) for name, column in columns]
    stream = cupy.cuda.get_current_stream().ptr
    if destinations is None:
        core = _core.CudaPartition(args, keys, len(frame), n)
    else:
        core = _core.CudaPartition.by_destinations(args, destinations, len(frame), n)
    scratch, totals = _kept_scratch.get(cupy, core, stream)
    core.count(scratch, stream, totals)
    # What the count does not need is done while the GPU counts: the specs, and the output,
    # whose size is bounded before the count where there are no string columns (total_bytes
    # waits for the count).
    specs = tuple(_device_spec(name, column, arg) for (name, column), arg in zip(columns, args))
    bound = core.output_bound
    buffer = cupy.empty(bound if bound >= 0 else core.total_bytes, dtype=cupy.uint8)
    core.scatter(buffer, stream)
    return PackedBuckets(specs, buffer[:core.total_bytes], core.rows, core.byte_offsets,
                            core.pieces, core.chars)


def _device_destinations(destinations: Any, rows: int) -> Any:
    """The caller's destinations for a cuDF frame, as a contiguous CuPy integer array."""
    import cupy

    if not hasattr(destinations, "__cuda_array_interface__"):
        raise DestinationsError(f"the destinations are a {type(destinations).__name__}: give a "
                                f"CuPy array for a cuDF DataFrame")
    return cupy.ascontiguousarray(_checked_destinations(cupy.asarray(destinations), rows))


SCRATCH_KEPT_BYTES = 16 * 2**20
"""Device scratch up to this size is kept between partitions (see :class:`_KeptScratch`): one
plain key column needs ~8 KiB per million rows, other keys a byte or more a row."""


class _KeptScratch(threading.local):
    """Each thread's scratch for the core, kept between calls on one device and stream:
    allocating and freeing it costs host time on every call
    (benchmarks/results/2026-11-25-host-trims-h100-h200.md). Same stream, same thread: the next
    call's work is queued behind the last one's, so the scratch is free for it; a call on another
    stream gets a new one (the old one is freed on its own stream). With it, page-locked host
    memory for the count's totals: a copy into it is queued behind the count instead of waiting
    for it."""

    def __init__(self) -> None:
        self.by_device: dict[int, tuple[int, Any, np.ndarray]] = {}

    def get(self, cupy: Any, core: Any, stream: int) -> tuple[Any, np.ndarray]:
        """Device scratch (a uint8 CuPy array) and host memory for the totals (a page-locked
        int64 NumPy array) for ``core``'s count on ``stream``."""
        import cupyx

        device = cupy.cuda.runtime.getDevice()
        kept_bytes = core.scratch_bytes if core.scratch_bytes <= SCRATCH_KEPT_BYTES else 0
        kept = self.by_device.get(device)
        if (kept is None or kept[0] != stream or kept[1].size < kept_bytes
                or kept[2].size < core.totals_size):
            kept = self.by_device[device] = (
                stream, cupy.empty(kept_bytes, dtype=cupy.uint8),
                cupyx.empty_pinned(core.totals_size, dtype=np.int64))
        if core.scratch_bytes > SCRATCH_KEPT_BYTES:  # made for this call
            return cupy.empty(core.scratch_bytes, dtype=cupy.uint8), kept[2]
        return kept[1], kept[2]


_kept_scratch = _KeptScratch()


@functools.cache
def _device_kinds() -> dict[Any, tuple[int, int]]:
    """The core's kind and value width of every pylibcudf type id it packs (strings: width 0,
    their offsets say), looked up once a column: a lookup by the id's name and
    ``plc.types.size_of`` costs more of a partition's host work
    (benchmarks/results/2026-11-25-host-trims-h100-h200.md)."""
    import pylibcudf as plc

    kinds = {plc.TypeId.STRING: (STRING, 0)}
    for names, kind in ((_DEVICE_FIXED, FIXED), (_DEVICE_FLOATING, FLOATING)):
        for name in names:
            type_id = getattr(plc.TypeId, name)
            kinds[type_id] = (kind, plc.types.size_of(plc.DataType(type_id)))
    return kinds


def _device_unpackable(frame: Any) -> list[Any]:
    """The columns of a cuDF DataFrame that the core cannot pack (decimals, lists, structs,
    categoricals)."""
    return [name for name, column in _device_columns(frame) if _device_kind(column) is None]


def _device_kind(column: Any) -> tuple[int, int] | None:
    """The core's kind and value width of a cuDF column (see :func:`_device_kinds`); None where
    the core cannot pack it. A categorical's pylibcudf column is its codes, which would travel
    without their categories."""
    import cudf

    if isinstance(column.dtype, cudf.CategoricalDtype):
        return None
    return _device_kinds().get(column.plc_column.type().id())


def _take_carried_device(part: Any, frame: Any, carried: list[Any], row: str) -> Any:
    """:func:`~gpuframe.exchange.pack._take_carried_host` for a cuDF destination of ``frame``."""
    taken = frame[carried].take(part[row].values).reset_index(drop=True)
    part = part.drop(columns=[row])
    for name in carried:
        part[name] = taken[name]
    return part[list(frame.columns)]


def _device_columns(frame: Any) -> list[tuple[Any, Any]]:
    """(label, cuDF column) for each column of a cuDF DataFrame: the frame's own.
    ``frame.to_pylibcudf()`` wraps every column and buffer anew and ``frame.columns`` builds a
    pandas Index, which costs the call more host time
    (benchmarks/results/2026-11-25-async-count-h100-h200.md). A spillable buffer's ``ptr`` marks
    it unspillable, as the core reads it later."""
    return list(frame._column_labels_and_values)


def _device_arg(name: Any, column: Any) -> tuple:
    """The core's argument for a cuDF column, buffers as (address, bytes) pairs: the frame keeps
    their memory."""
    import pylibcudf as plc

    kind_width = _device_kind(column)
    if kind_width is None:
        raise UnsupportedColumnTypeError(
            f"column {name!r} has cuDF type {column.dtype}, which the packer cannot "
            f"pack (integers, floats, booleans, timestamps, durations and strings can)")
    kind, width = kind_width
    column = column.plc_column
    validity = _device_bytes(column.null_mask()) if column.null_count() > 0 else None
    if kind == STRING:
        offsets = column.child(0)
        width = 8 if offsets.type().id() == plc.TypeId.INT64 else 4
        return (STRING, width, column.offset(), _device_bytes(column.data()), validity,
                _device_bytes(offsets.data()))
    return (kind, width, column.offset(), _device_bytes(column.data()), validity, None)


def _device_spec(name: Any, column: Any, arg: tuple) -> ColumnSpec:
    """How a cuDF column, passed to the core as ``arg``, is packed."""
    kind, width, _, _, validity, _ = arg
    return ColumnSpec(name, kind, width, validity is not None, column.plc_column.type(),
                      column.dtype)


_DEVICE_FLOATING = ("FLOAT32", "FLOAT64")
_DEVICE_FIXED = (
    "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "BOOL8",
    "TIMESTAMP_DAYS", "TIMESTAMP_SECONDS", "TIMESTAMP_MILLISECONDS", "TIMESTAMP_MICROSECONDS",
    "TIMESTAMP_NANOSECONDS", "DURATION_DAYS", "DURATION_SECONDS", "DURATION_MILLISECONDS",
    "DURATION_MICROSECONDS", "DURATION_NANOSECONDS")


def _device_bytes(span: Any) -> tuple[int, int] | None:
    """A pylibcudf buffer as the core's (address, bytes) pair (None stays None), which keeps
    nothing alive (the frame keeps the memory): a CuPy view of each buffer would cost more host
    time apiece (benchmarks/results/2026-11-25-staged-key-h100-h200.md)."""
    # pylibcudf's Span protocol: .ptr and .size, the size in bytes.
    return None if span is None else (span.ptr, span.size)


def _unpack_device(part: PackedBucket) -> Any:
    import pylibcudf as plc

    rows, data = part.rows, part.data
    columns = []
    for spec, (validity, values, chars), n_chars in zip(part.columns, part.pieces, part.chars):
        if rows == 0:
            columns.append(plc.column_factories.make_empty_column(spec.packed_type))
            continue
        mask, null_count = None, 0
        if validity >= 0:
            # The whole piece: cuDF wants bitmaps padded to 64 bytes, as the packing pads them.
            mask_bytes = (((rows + 7) // 8 + ALIGNMENT - 1) // ALIGNMENT) * ALIGNMENT
            mask = plc.gpumemoryview(data[validity:validity + mask_bytes])
            null_count = plc.null_mask.null_count(mask, 0, rows)
        if spec.kind == STRING:
            offsets_type = plc.DataType(plc.TypeId.INT64 if spec.width == 8 else plc.TypeId.INT32)
            offsets = plc.Column(offsets_type, rows + 1,
                                 plc.gpumemoryview(data[values:values + (rows + 1) * spec.width]),
                                 None, 0, 0, [])
            chars_view = (plc.gpumemoryview(data[chars:chars + int(n_chars)]) if n_chars else None)
            columns.append(plc.Column(spec.packed_type, rows, chars_view, mask, null_count, 0,
                                      [offsets]))
        else:
            columns.append(plc.Column(spec.packed_type, rows,
                                      plc.gpumemoryview(data[values:values + rows * spec.width]),
                                      mask, null_count, 0, []))
    return cudf_frame({spec.name: (column, spec.type)
                       for spec, column in zip(part.columns, columns)})
