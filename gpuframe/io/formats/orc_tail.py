"""The ORC file tail's protobuf, decoded where pyarrow exposes nothing: each stripe's place
and rows, and each stripe's column statistics (min, max, nulls), which let ``filters=`` skip
stripes as Parquet's row-group statistics skip row groups. Planning already holds the tail, so
this costs no request.
"""

from __future__ import annotations

import datetime
import struct
import zlib
from collections.abc import Sequence

import pyarrow as pa

from ..statistics import Statistics

EPOCH = datetime.date(1970, 1, 1)
"""Day 0 of ORC's date statistics."""


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def _varints(data: bytes) -> list[int]:
    """The values of a packed repeated integer field."""
    values, position = [], 0
    while position < len(data):
        value, position = _varint(data, position)
        values.append(value)
    return values


ProtoValue = int | bytes
"""A protobuf field's value: an int (varint), or bytes (fixed-width, length-delimited)."""


def _proto_fields(data: bytes) -> list[tuple[int, ProtoValue]]:
    """(field number, value) of a serialized protobuf message: ints, or bytes for the
    length-delimited fields (nested messages, strings) and the fixed-width ones."""
    fields: list[tuple[int, ProtoValue]] = []
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        value: ProtoValue
        if wire == 0:
            value, position = _varint(data, position)
        elif wire == 2:
            length, position = _varint(data, position)
            value, position = data[position:position + length], position + length
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, position = data[position:position + width], position + width
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        fields.append((number, value))
    return fields


def _int(value: ProtoValue) -> int:
    """A varint field's value; ValueError where the field came in another wire type."""
    if not isinstance(value, int):
        raise ValueError("a protobuf field expected as a varint is not one")
    return value


def _bytes(value: ProtoValue) -> bytes:
    """A length-delimited or fixed-width field's bytes; ValueError where it is a varint."""
    if not isinstance(value, bytes):
        raise ValueError("a protobuf field expected as bytes is a varint")
    return value


def stripes(file_tail: bytes) -> tuple[tuple[int, int, int], ...]:
    """(offset, length, rows) of each stripe, from ORC's FileTail message (footer = field 2;
    its stripes = field 3: offset 1, index, data and footer lengths 2-4, rows 5)."""
    footer = _bytes(next(value for number, value in _proto_fields(file_tail) if number == 2))
    stripes = []
    for number, value in _proto_fields(footer):
        if number == 3:
            info = dict(_proto_fields(_bytes(value)))
            offset, index, data, stripe_footer, rows = (_int(info.get(n, 0)) for n in range(1, 6))
            stripes.append((offset, index + data + stripe_footer, rows))
    return tuple(stripes)


def stripe_statistics(file_tail: bytes, section: bytes, compression: str,
                          schema: pa.Schema, stripes: Sequence[tuple[int, int, int]]
                          ) -> tuple[dict[str, Statistics], ...]:
    """Each stripe's (min, max, nulls) by top-level column, from ORC's Metadata section
    (``section``, before the footer: StripeStatistics = field 1, each a list of
    ColumnStatistics by column id) and the footer's types (field 4; the root struct's subtypes
    are the top-level columns' ids).

    Integer, floating, string and date columns give statistics; others (timestamps, whose
    minimum is in the writer's time zone, decimals, booleans, nested) only their nulls. The
    section is read when uncompressed, ZLIB or SNAPPY; LZ4 and ZSTD chunks do not say their
    decompressed size, which Arrow's codecs need: such files, and a section that does not
    parse, prune no stripe ((), never an error: statistics only skip work)."""
    try:
        footer = _bytes(next(value for number, value in _proto_fields(file_tail)
                             if number == 2))
        root = _proto_fields(_bytes(next(value for number, value in _proto_fields(footer)
                                         if number == 4)))
        names = [_bytes(value).decode() for number, value in root if number == 3]
        ids = [i for number, value in root if number == 2
               for i in (_varints(value) if isinstance(value, bytes) else [value])]
        columns = {name: i for name, i in zip(names, ids) if name in schema.names}
        found = [[_bytes(value) for number, value in _proto_fields(_bytes(stripe)) if number == 1]
                 for number, stripe in _proto_fields(_decompress(section, compression))
                 if number == 1]
        if len(found) != len(stripes):
            return ()
        return tuple({name: _column_statistics(stats[i], schema.field(name).type, rows)
                      for name, i in columns.items() if i < len(stats)}
                     for stats, (_, _, rows) in zip(found, stripes))
    except (ValueError, IndexError, KeyError, StopIteration, UnicodeDecodeError, zlib.error,
            pa.ArrowException):
        return ()


def _decompress(data: bytes, compression: str) -> bytes:
    """An ORC stream's bytes: chunks behind 3-byte headers (length << 1 | original)."""
    if compression == "UNCOMPRESSED":
        return data
    chunks, position = [], 0
    while position < len(data):
        header = int.from_bytes(data[position:position + 3], "little")
        chunk = data[position + 3:position + 3 + (header >> 1)]
        position += 3 + (header >> 1)
        if header & 1:
            chunks.append(chunk)
        elif compression == "ZLIB":
            chunks.append(zlib.decompress(chunk, -15))  # raw deflate
        elif compression == "SNAPPY":
            size, _ = _varint(chunk, 0)  # snappy's own preamble
            chunks.append(pa.Codec("snappy").decompress(chunk, size, asbytes=True))
        else:
            raise ValueError(f"stripe statistics compressed with {compression} are not read")
    return b"".join(chunks)


def _column_statistics(data: bytes, kind: pa.DataType, rows: int) -> Statistics:
    """(min, max, nulls) of a column in a stripe of ``rows`` from its ColumnStatistics:
    values = field 1 (those not null); integer 2, double 3, string 4, date 7 statistics,
    each minimum = 1, maximum = 2."""
    fields = dict(_proto_fields(data))
    low: object = None
    high: object = None
    if pa.types.is_integer(kind) and 2 in fields:
        ints = dict(_proto_fields(_bytes(fields[2])))
        if 1 in ints and 2 in ints:
            low, high = _zigzag(_int(ints[1])), _zigzag(_int(ints[2]))
    elif pa.types.is_floating(kind) and 3 in fields:
        doubles = dict(_proto_fields(_bytes(fields[3])))
        if 1 in doubles and 2 in doubles:
            low, high = (struct.unpack("<d", _bytes(doubles[i]))[0] for i in (1, 2))
    elif (pa.types.is_string(kind) or pa.types.is_large_string(kind)) and 4 in fields:
        strings = dict(_proto_fields(_bytes(fields[4])))
        if 1 in strings and 2 in strings:
            low, high = _bytes(strings[1]).decode(), _bytes(strings[2]).decode()
    elif pa.types.is_date32(kind) and 7 in fields:
        dates = dict(_proto_fields(_bytes(fields[7])))
        if 1 in dates and 2 in dates:
            low, high = (EPOCH + datetime.timedelta(days=_zigzag(_int(dates[i])))
                         for i in (1, 2))
    return low, high, None if 1 not in fields else rows - _int(fields[1])


def _zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)
