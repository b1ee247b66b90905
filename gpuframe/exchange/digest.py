"""Digests of key columns that the packer cannot hash as stored: Python objects and decimals.

The native core hashes fixed-width values and strings by their bytes. An object column (pandas
only) holds Python values, which pandas' join compares by ``==``: ``1 == 1.0 == True ==
Decimal("1")`` and ``Decimal("1.5") == 1.5``, but ``1 != "1"``. A decimal column holds integers
scaled by its type's scale, so equal values have equal bytes once both sides have one type (the
join casts them to one). Each such key column is hashed through a uint64 digest instead, equal
for values that compare equal and the same in every worker process:

- numbers by Python's ``hash``, which is defined by arithmetic modulo ``2**61 - 1`` so that
  equal numbers of any type hash alike, and is not salted per process;
- strings and bytes by BLAKE2b: Python salts their ``hash`` per process;
- times by their instant, dates by their day, durations by their length, tuples and frozensets
  by their items' digests, and any other value by BLAKE2b of its type and ``repr``;
- missing values (None, NaN, ``pd.NA``, ``NaT``), which pandas matches with each other, as null.

A digest only picks the bucket: rows whose digests collide still meet pandas' own comparison in
the join task, so a collision costs balance, never a wrong row.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..backend import is_cudf_decimal
from ..errors import ColumnTypeError

_MASK = 2**64 - 1
_DATETIME, _DATE, _DURATION, _TUPLE, _FROZENSET, _MISSING_ITEM = range(6)
"""Tags mixed into the digests of values that are not numbers, so that a date and the number of
its day do not share one by construction."""
_EPOCH = datetime.datetime(1970, 1, 1)
_MICROSECOND = datetime.timedelta(microseconds=1)


class UnhashableKeyError(ColumnTypeError):
    """A key column holds values that have no hash (lists, dicts, sets); the message names it."""


def digest_keys(frame: Any, keys: Sequence[Any]) -> tuple[Any, list[Any], list[Any]]:
    """``frame`` (a pandas DataFrame or pyarrow Table) with a digest column added for each key
    the packer cannot hash as stored; the columns to hash on instead of ``keys``, in order; the
    added columns' names, for the caller to drop."""
    if isinstance(frame, pd.DataFrame):
        columns = {key: frame[key] for key in keys}
    elif isinstance(frame, pa.Table):
        columns = {key: frame.column(key) for key in keys}
    else:
        return _device_digests(frame, keys)
    digests = {}
    for key, column in columns.items():
        try:
            digest = column_digest(column)
        except UnhashableKeyError as error:
            raise UnhashableKeyError(f"key column {key!r}: {error}") from None
        if digest is not None:
            digests[key] = digest
    if not digests:
        return frame, list(keys), []
    names = {key: _unused_name(frame, i) for i, key in enumerate(digests)}
    if isinstance(frame, pd.DataFrame):
        frame = frame.assign(**{names[key]: pd.arrays.ArrowExtensionArray(digest)
                                for key, digest in digests.items()})
    else:
        for key, digest in digests.items():
            frame = frame.append_column(names[key], digest)
    return frame, [names.get(key, key) for key in keys], list(names.values())


def _device_digests(frame: Any, keys: Sequence[Any]) -> tuple[Any, list[Any], list[Any]]:
    """:func:`digest_keys` for a cuDF frame: a decimal key (which the packer cannot hash) as
    its text, equal for equal values once both sides are cast to one decimal type, as a join
    casts them."""
    decimals = [key for key in keys if is_cudf_decimal(frame[key].dtype)]
    if not decimals:
        return frame, list(keys), []
    names = {key: _unused_name(frame, i) for i, key in enumerate(decimals)}
    frame = frame.assign(**{names[key]: frame[key].astype("str") for key in decimals})
    return frame, [names.get(key, key) for key in keys], list(names.values())


def holds_objects(dtype: Any) -> bool:
    """Whether a pandas column of ``dtype`` holds Python objects (NumPy's object dtype)."""
    return isinstance(dtype, np.dtype) and dtype.kind == "O"


def column_digest(column: Any) -> pa.Array | None:
    """A uint64 digest of a pandas Series or Arrow column, for one the packer cannot hash as
    stored (Python objects, decimals); None for any other."""
    if isinstance(column, pd.Series):
        if holds_objects(column.dtype):
            return object_digest(column.to_numpy())
        if not (isinstance(column.dtype, pd.ArrowDtype)
                and pa.types.is_decimal(column.dtype.pyarrow_dtype)):
            return None
        column = pa.array(column.array)
    if isinstance(column, pa.ChunkedArray):
        if not pa.types.is_decimal(column.type):
            return None
        column = column.combine_chunks()
    return decimal_digest(column) if pa.types.is_decimal(column.type) else None


def decimal_digest(array: pa.Array) -> pa.Array:
    """A uint64 digest of each decimal: its scaled integer's 64-bit words folded into one."""
    width = array.type.byte_width // 8
    words = np.frombuffer(array.buffers()[1], np.uint64)[array.offset * width:
                                                        (array.offset + len(array)) * width]
    folded = np.zeros(len(array), np.uint64)
    for word in words.reshape(len(array), width).T:
        folded = folded * np.uint64(0x9E3779B97F4A7C15) ^ word
    return pa.array(folded, mask=array.is_null().to_numpy(zero_copy_only=False))


def object_digest(values: np.ndarray) -> pa.Array:
    """A uint64 digest of each Python object, equal for objects that compare equal."""
    return pa.array([value_digest(value) for value in values], pa.uint64())


def value_digest(value: Any) -> int | None:
    """One object's digest (see the module's docstring); None for a missing value."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, str):
        return _bytes_digest(value.encode("utf-8", "surrogatepass"), b"str")
    if isinstance(value, bytes):
        return _bytes_digest(value, b"bytes")
    if isinstance(value, np.datetime64 | np.timedelta64):
        value = pd.Timestamp(value) if isinstance(value, np.datetime64) else pd.Timedelta(value)
        if value is pd.NaT:
            return None
    if isinstance(value, numbers.Number | np.bool_):
        if _is_nan(value):
            return None
        return hash(value) & _MASK
    if isinstance(value, datetime.datetime):
        offset = value.utcoffset()
        naive = value.replace(tzinfo=None) - (offset or datetime.timedelta())
        return hash((_DATETIME, offset is not None, (naive - _EPOCH) // _MICROSECOND)) & _MASK
    if isinstance(value, datetime.date):
        return hash((_DATE, value.toordinal())) & _MASK
    if isinstance(value, datetime.timedelta):
        return hash((_DURATION, value // _MICROSECOND)) & _MASK
    if isinstance(value, tuple | frozenset):
        items = [_MISSING_ITEM if d is None else d for d in map(value_digest, value)]
        if isinstance(value, frozenset):  # its order of iteration follows the salted hash
            return hash((_FROZENSET, *sorted(items))) & _MASK
        return hash((_TUPLE, *items)) & _MASK
    kind = type(value)
    if kind.__hash__ is None:
        raise UnhashableKeyError(f"a key holds a {kind.__name__} ({value!r:.60}), which has no "
                                 "hash: pandas cannot join or group on it either")
    return _bytes_digest(f"{kind.__module__}.{kind.__qualname__}:{value!r}".encode(
        "utf-8", "surrogatepass"), b"repr")


def unhashable_type(values: np.ndarray) -> type | None:
    """The first type among ``values`` (Python objects) that has no hash (list, dict, set), or
    None: pandas compares object keys through their hashes."""
    return next((kind for kind in set(map(type, values)) if kind.__hash__ is None), None)


def _is_nan(value: Any) -> bool:
    """Whether a number is NaN (a float's, or a decimal's quiet or signalling one, whose hash
    Python does not define by value)."""
    if isinstance(value, decimal.Decimal):
        return value.is_nan()
    try:
        return bool(value != value)
    except TypeError:
        return False


def _bytes_digest(data: bytes, person: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=person).digest(), "little")


def _unused_name(frame: Any, index: int) -> str:
    """A column name that ``frame`` does not have, for the digest of its ``index``-th key."""
    names = set(frame.schema.names if isinstance(frame, pa.Table) else frame.columns)
    name = f"__gpuframe_digest_{index}__"
    while name in names:
        name += "_"
    return name
