"""Thrift's compact protocol, as Parquet's footer, page headers and page index use it.

:func:`decode_struct` keeps every field, known or not, with its compact type
(:class:`ThriftStruct`), so :func:`encode_struct` writes a decoded struct back to the bytes it
came from, and a struct with some fields replaced keeps the others as they were.
:func:`field_of` reads a field checked to be of the type its schema says: bytes that decode
as Thrift may still be garbage.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NoReturn, TypeVar, Union, overload

from ..errors import CorruptFileError

# Thrift compact protocol types (a bool field's value is its type: BOOL true, FALSE false)
BOOL, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY = 1, 2, 3, 4, 5, 6, 7, 8
LIST, SET, STRUCT = 9, 10, 12
_INTEGERS = (I16, I32, I64)
_MAX_DEPTH = 64
"""Deepest struct nesting decoded; Parquet's footer nests 6 deep, garbage may claim any."""
FieldValue = TypeVar("FieldValue")
Default = TypeVar("Default")
ThriftValue = Union[int, float, bool, bytes, "ThriftStruct", "ThriftList"]
"""A decoded value: integers of every width, doubles, bools, binary, structs and lists."""


class ThriftStruct(dict[int, ThriftValue]):
    """A Thrift struct: field id -> value, with each field's compact type in :attr:`kinds`,
    so fields this module does not know are written back as they came."""

    def __init__(self, fields: Iterable[tuple[int, int, ThriftValue]] = ()):
        super().__init__()
        self.kinds: dict[int, int] = {}
        for number, kind, value in fields:
            self.put(number, kind, value)

    def put(self, number: int, kind: int, value: ThriftValue) -> None:
        self[number] = value
        self.kinds[number] = kind

    def subset(self, numbers: Iterable[int]) -> ThriftStruct:
        """A copy holding only the fields ``numbers`` (those present)."""
        return ThriftStruct((n, self.kinds[n], self[n]) for n in numbers if n in self)


class ThriftList(list[ThriftValue]):
    """A Thrift list (or set), with the compact type of its elements in :attr:`kind`."""

    def __init__(self, kind: int, items: Iterable[ThriftValue] = ()):
        super().__init__(items)
        self.kind = kind


def decode_struct(data: bytes | memoryview, position: int = 0, what: str = "Thrift struct"
                  ) -> tuple[ThriftStruct, int]:
    """The compact-protocol struct at ``position`` of ``data`` and the position after it.

    Raises :class:`CorruptFileError` naming ``what`` where the bytes are not a struct."""
    reader = _Reader(memoryview(data), position, what)
    return reader.struct(0), reader.position


def encode_struct(fields: ThriftStruct) -> bytes:
    """``fields`` in the compact protocol, in field id order (as Thrift's own writers do, so a
    decoded struct encodes to the bytes it came from)."""
    out = bytearray()
    _write_struct(out, fields)
    return bytes(out)


class _Reader:
    def __init__(self, data: memoryview, position: int, what: str):
        self.data, self.position, self.what = data, position, what

    def fail(self, problem: str) -> NoReturn:
        raise CorruptFileError(f"{self.what} is corrupt: {problem} at byte {self.position}")

    def take(self, count: int) -> memoryview:
        if count > len(self.data) - self.position:
            self.fail(f"{count} bytes are claimed but {len(self.data) - self.position} remain")
        self.position += count
        return self.data[self.position - count:self.position]

    def byte(self) -> int:
        try:
            value = self.data[self.position]
        except IndexError:
            self.fail("the data ends")
        self.position += 1
        return value

    def varint(self) -> int:
        result = shift = 0
        while True:
            byte = self.byte()
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                if result >> 64:
                    self.fail("a varint exceeds 64 bits")
                return result
            shift += 7
            if shift > 63:
                self.fail("a varint runs past 10 bytes")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def struct(self, depth: int) -> ThriftStruct:
        if depth > _MAX_DEPTH:
            self.fail(f"structs nest deeper than {_MAX_DEPTH}")
        fields = ThriftStruct()
        number = 0
        while header := self.byte():
            kind, delta = header & 0x0F, header >> 4
            number = number + delta if delta else self.zigzag()
            if kind in (BOOL, FALSE):
                fields.put(number, BOOL, kind == BOOL)
            else:
                fields.put(number, kind, self.value(kind, depth))
        return fields

    def value(self, kind: int, depth: int) -> ThriftValue:
        if kind in _INTEGERS:
            return self.zigzag()
        if kind == BINARY:
            return bytes(self.take(self.varint()))
        if kind == STRUCT:
            return self.struct(depth + 1)
        if kind in (LIST, SET):
            header = self.byte()
            size, element = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            if size > len(self.data) - self.position:  # every element takes a byte at least
                self.fail(f"a list claims {size} elements")
            return ThriftList(element, [self.value(element, depth) for _ in range(size)])
        if kind in (BOOL, FALSE):  # a list's element
            return self.byte() == BOOL
        if kind == BYTE:
            return int.from_bytes(self.take(1), "little", signed=True)
        if kind == DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        self.fail(f"compact type {kind} is not one Parquet uses")


def _write_varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def _write_struct(out: bytearray, fields: ThriftStruct) -> None:
    last = 0
    for number in sorted(fields):
        kind, value = fields.kinds[number], fields[number]
        wire = (BOOL if value else FALSE) if kind == BOOL else kind
        if 0 < number - last <= 15:
            out.append((number - last) << 4 | wire)
        else:
            out.append(wire)
            _write_varint(out, (number << 1) ^ (number >> 63))
        if kind != BOOL:
            _write_value(out, kind, value)
        last = number
    out.append(0)


def _write_value(out: bytearray, kind: int, value: ThriftValue) -> None:
    if kind in _INTEGERS and isinstance(value, int):
        _write_varint(out, (value << 1) ^ (value >> 63))
    elif kind == BINARY and isinstance(value, bytes):
        _write_varint(out, len(value))
        out += value
    elif kind == STRUCT and isinstance(value, ThriftStruct):
        _write_struct(out, value)
    elif kind in (LIST, SET) and isinstance(value, ThriftList):
        out.append(min(len(value), 15) << 4 | value.kind)
        if len(value) >= 15:
            _write_varint(out, len(value))
        for item in value:
            _write_value(out, value.kind, item)
    elif kind in (BOOL, FALSE):
        out.append(BOOL if value else FALSE)
    elif kind == BYTE and isinstance(value, int):
        out.append(value & 0xFF)
    elif kind == DOUBLE and isinstance(value, (int, float)):
        out += struct.pack("<d", value)
    else:
        raise ValueError(f"compact type {kind} cannot be written from a {type(value).__name__}")


_REQUIRED = object()


def struct_of(value: object, what: str) -> ThriftStruct:
    """``value`` checked to be a decoded struct; ``what`` names it in the
    :class:`CorruptFileError` where it is not."""
    if not isinstance(value, ThriftStruct):
        raise CorruptFileError(f"{what} is corrupt: a struct was expected")
    return value


@overload
def field_of(fields: object, number: int, kind: type[FieldValue], what: str) -> FieldValue: ...


@overload
def field_of(fields: object, number: int, kind: type[FieldValue], what: str,
             default: Default) -> FieldValue | Default: ...


def field_of(fields: object, number: int, kind: type[FieldValue], what: str,
             default: object = _REQUIRED) -> object:
    """Field ``number`` of a decoded struct (``default`` where it is absent and optional),
    checked to be a ``kind``: a footer that decodes as Thrift may still be garbage; ``what``
    names the struct in the :class:`CorruptFileError` where it is not."""
    fields = struct_of(fields, what)
    if number not in fields and default is not _REQUIRED:
        return default
    value = fields.get(number)
    if not isinstance(value, kind):
        raise CorruptFileError(f"{what} is corrupt: its field {number} is "
                               f"{'missing' if value is None else type(value).__name__}")
    return value
