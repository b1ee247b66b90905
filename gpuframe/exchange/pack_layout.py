"""What the CPU packer (:mod:`~gpuframe.exchange.pack`) and the GPU packer
(:mod:`~gpuframe.exchange.pack_device`) share: the packed layout (column kinds, alignment,
:class:`ColumnSpec`, :class:`PackedBucket`, :class:`PackedBuckets`), the packer's errors and the
checks of its arguments. A module of its own so that the GPU packer needs nothing of ``pack``,
which imports it: no import circle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import ColumnTypeError, GpuframeError, OptionError

#: Column kinds and the alignment of every packed piece, as the native core defines them.
FIXED, FLOATING, STRING = 0, 1, 2
ALIGNMENT = 64


class UnknownKeyColumnError(GpuframeError, KeyError):
    """A key column to hash is not a column of the table (or names several)."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class UnsupportedColumnTypeError(ColumnTypeError):
    """A column's type is one the packer cannot pack (it names the column and the type)."""


class PackOptionError(OptionError):
    """An option of the packer (``n``, ``threads``) has a value it cannot take."""


class DestinationsError(PackOptionError):
    """Destinations given for a partition are not one integer in ``[0, n)`` per row (the message
    says which row, or what is wrong with the array)."""


class BoundariesError(PackOptionError):
    """Boundaries of a range split are not a table of sorted rows over the key columns, of types
    the keys' can be cast to (the message names the column or the rows)."""


@dataclass(frozen=True)
class ColumnSpec:
    """How one column is packed: the same for every destination, so it is sent once.

    ``packed_type`` is the type of the packed buffers (a ``pyarrow.DataType`` on the CPU, a
    ``pylibcudf.DataType`` on the GPU); ``type`` is the type
    :func:`~gpuframe.exchange.pack.unpack` gives back: an Arrow type on the CPU (it differs for
    booleans and dictionaries), the frame's own cuDF dtype on the GPU (pandas' nullable and
    time-zone dtypes, which the packed type does not carry).
    """

    name: Any  # a string, except for cuDF frames with other column labels
    kind: int
    width: int  # bytes per value, or per string offset
    nullable: bool  # whether a validity bitmap is packed
    packed_type: Any
    type: Any = None
    dictionary: pa.Array | None = None
    """A dictionary column's dictionary (CPU): every destination gets it back whole, so its
    categories are the frame's, not the values that reached it (pandas concatenates
    categoricals of different categories as objects)."""


@dataclass(frozen=True)
class PackedBucket:
    """One destination's rows of every column, packed: what travels to that destination.

    ``pieces[c]`` holds the byte offsets into ``data`` of column c's validity bitmap, values (or
    string offsets) and string chars, -1 where absent; ``chars[c]`` the number of string bytes.
    """

    columns: tuple[ColumnSpec, ...]
    rows: int
    pieces: np.ndarray  # int64 [column, 3]
    chars: np.ndarray  # int64 [column]
    data: Any  # uint8 NumPy (CPU) or CuPy (GPU) array
    metadata: dict | None = None  # the Arrow schema's metadata (pandas round trip), CPU only

    @property
    def on_gpu(self) -> bool:
        return not isinstance(self.data, np.ndarray)

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


@dataclass(frozen=True)
class PackedBuckets:
    """All destinations' rows in one buffer: destination d owns
    ``buffer[byte_offsets[d]:byte_offsets[d + 1]]`` and holds ``rows[d]`` rows; ``pieces[d, c]``
    are absolute byte offsets of column c's pieces (see :class:`PackedBucket`)."""

    columns: tuple[ColumnSpec, ...]
    buffer: Any  # uint8 NumPy (CPU) or CuPy (GPU) array
    rows: np.ndarray  # int64 [destination]
    byte_offsets: np.ndarray  # int64 [destination + 1]
    pieces: np.ndarray  # int64 [destination, column, 3]
    chars: np.ndarray  # int64 [destination, column]
    metadata: dict | None = None

    @property
    def n_destinations(self) -> int:
        return len(self.rows)

    def destination(self, d: int) -> PackedBucket:
        """Destination ``d``'s share, as a view of the buffer with offsets relative to it."""
        if not 0 <= d < self.n_destinations:
            raise PackOptionError(
                f"destination {d} does not exist: there are {self.n_destinations}")
        start, end = int(self.byte_offsets[d]), int(self.byte_offsets[d + 1])
        pieces = np.where(self.pieces[d] >= 0, self.pieces[d] - start, -1)
        return PackedBucket(self.columns, int(self.rows[d]), pieces, self.chars[d].copy(),
                               self.buffer[start:end], self.metadata)


# --- checks -------------------------------------------------------------------------------------

def _key_indices(names: list[Any], on: Sequence[Any]) -> list[int]:
    if isinstance(on, str):
        on = [on]
    if len(on) == 0:
        raise UnknownKeyColumnError("no key columns given: pass at least one column to hash")
    indices = []
    for key in on:
        matches = [i for i, name in enumerate(names) if name == key]
        if len(matches) != 1:
            why = "is not" if not matches else "names several"
            raise UnknownKeyColumnError(
                f"key column {key!r} {why} among the table's columns {list(names)}")
        indices.append(matches[0])
    return indices


def _key_list(on: Any) -> list[Any]:
    return [on] if isinstance(on, str) else list(on)


def _orders(keys: list[Any], ascending: Any, nulls_last: Any) -> list[tuple[bool, bool]]:
    """(ascending, nulls_last) for each key column, checked."""
    if isinstance(ascending, (bool, np.bool_)):
        ascending = [bool(ascending)] * len(keys)
    elif not isinstance(ascending, Sequence) or len(ascending) != len(keys) or \
            not all(isinstance(a, (bool, np.bool_)) for a in ascending):
        raise PackOptionError(f"ascending={ascending!r}: give a bool, or one bool per key "
                                   f"column ({len(keys)})")
    if not isinstance(nulls_last, (bool, np.bool_)):
        raise PackOptionError(f"nulls_last={nulls_last!r}: give a bool")
    return [(bool(a), bool(nulls_last)) for a in ascending]


def _checked_destinations(array: Any, rows: int) -> Any:
    """``array`` (NumPy or CuPy) if it holds one integer per row; its values are the core's to
    check."""
    if array.dtype.kind not in "iu":
        raise DestinationsError(f"the destinations are of dtype {array.dtype}: give integers")
    if array.ndim != 1 or array.shape[0] != rows:
        raise DestinationsError(f"destinations of shape {array.shape} for {rows} rows: give one "
                                f"per row")
    return array


def _check_count(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n < 2**32:
        raise PackOptionError(
            f"n={n!r}: the number of destinations must be an integer from 1 to 2**32 - 1")
    return int(n)


def _check_threads(threads: Any) -> int:
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise PackOptionError(f"threads={threads!r}: give a positive integer, or None for "
                                   f"one thread per core")
    return int(threads)
