"""ORC: units are stripes, placed and pruned by the file tail, read with ``ORCFile.read_stripe``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyarrow import orc

from ..errors import CorruptFileError, TruncatedFileError
from ..statistics import HiveValue, Statistics, statistics_may_match, value_range
from ..storage.ranges import RangeFile
from . import orc_tail
from .base import FOOTER_PROBE, CudfReader, Fetcher, FileFormat, FileUnits, Unit

if TYPE_CHECKING:
    from ..filters import Dnf
    from ..storage.base import RangeSource

ORC_MAGIC = b"ORC"
ORC_TAIL_GUESS = 16 * 2**10
"""Bytes Arrow's ORC reader fetches from a file's end before it knows the tail's length."""


@dataclass(frozen=True)
class OrcMetadata:
    """What an ORC file's tail says: its stripes and schema, and how long the tail is."""

    size: int
    tail_length: int
    """Postscript, footer and stripe statistics at the file's end."""
    stripes: tuple[tuple[int, int, int], ...]
    """(offset, length, rows) of each stripe; length counts its index, data and footer."""
    schema: pa.Schema
    tail: bytes
    """The file's last bytes as Arrow's reader opens it (at least :data:`ORC_TAIL_GUESS`), so
    read tasks open the file without fetching its tail again."""
    statistics: tuple[Mapping[str, Statistics], ...] = ()
    """Each stripe's min, max and nulls by top-level column, where the tail holds them in a
    form read here (:func:`.orc_tail.stripe_statistics`); () where not."""


class OrcFormat(FileFormat[OrcMetadata]):
    """ORC: units are stripes, read with ``pyarrow.orc.ORCFile.read_stripe``.

    The stripes' places come from the file tail (``serialized_file_tail``, decoded by
    :mod:`.orc_tail`: Arrow gives no accessor for them), and so do their statistics (pyarrow 26
    exposes only their count): filters skip the stripes whose min/max prove no row matches, as
    Parquet's skip row groups, then apply to rows (:func:`.orc_tail.stripe_statistics` says
    which columns and compressions give statistics). A stripe's bytes are counted and fetched
    whole: its own footer, not the file's, says how they split between columns. So a
    filter-columns-first read would fetch a surviving stripe twice, and is not done.
    """

    name = "orc"
    unit_name = "stripes"
    sparse_copies = True
    reusable_metadata = True

    def read_metadata(self, source: RangeSource, partition_bytes: int) -> OrcMetadata:
        path = source.path
        size, tail = source.read_tail(FOOTER_PROBE)
        if size == 0:
            raise CorruptFileError(f"{path} is empty, not an ORC file")
        head = tail[:3] if len(tail) == size else source.read_range(0, 3)
        if head != ORC_MAGIC:
            raise CorruptFileError(f"{path} is not an ORC file (no 'ORC' magic at its start)")
        handle = pa.PythonFile(RangeFile(source, {size - len(tail): tail}), mode="r")
        try:
            opened = orc.ORCFile(handle)
            file_tail = opened.reader.serialized_file_tail()
            stripes = orc_tail.stripes(file_tail)
            tail_length = (opened.file_postscript_length + 1 + opened.file_footer_length
                           + opened.stripe_statistics_length)
            schema = opened.schema
            compression = opened.compression
            statistics_length = opened.stripe_statistics_length
        except (OSError, pa.ArrowException, ValueError, IndexError) as exc:
            raise TruncatedFileError(
                f"{path} is truncated or its tail is corrupt: it starts like ORC, but its "
                f"{size} bytes end without a readable postscript and footer ({exc})") from exc
        keep = min(size, max(ORC_TAIL_GUESS, tail_length))
        if keep > len(tail):
            tail = source.read_range(size - keep, keep - len(tail)) + tail
        data_end = size - tail_length
        for index, (offset, length, _) in enumerate(stripes):
            if offset + length > data_end:
                raise TruncatedFileError(
                    f"{path} is truncated or corrupt: stripe {index} lies at bytes "
                    f"{offset}-{offset + length}, past the data's end at {data_end}")
        start = len(tail) - tail_length
        statistics = orc_tail.stripe_statistics(
            file_tail, tail[start:start + statistics_length], compression, schema, stripes)
        return OrcMetadata(size, tail_length, stripes, schema, tail[-keep:], statistics)

    def metadata_bytes(self, metadata: OrcMetadata) -> int:
        return len(metadata.tail)

    def arrow_schema(self, path: str, metadata: OrcMetadata) -> pa.Schema:
        return metadata.schema

    def file_size(self, metadata: OrcMetadata) -> int:
        return metadata.size

    def units(self, metadata: OrcMetadata, columns: Sequence[str],
              result_columns: Sequence[str]) -> list[Unit]:
        return [Unit(i, rows, length, length)
                for i, (_, length, rows) in enumerate(metadata.stripes)]

    def unit_may_match(self, metadata: OrcMetadata, unit: Unit,
                       hive_values: Mapping[str, HiveValue], dnf: Dnf | None) -> bool:
        known = metadata.statistics[unit.index] if metadata.statistics else {}
        return statistics_may_match(dnf, hive_values, unit.rows or 0, known.get)

    def unit_rows(self, metadata: OrcMetadata, index: int) -> int:
        return metadata.stripes[index][2]

    def column_range(self, metadata: OrcMetadata, column: str) -> tuple[Any, Any] | None:
        if len(metadata.statistics) != len(metadata.stripes):
            return None
        return value_range(stripe.get(column) for stripe in metadata.statistics)

    def ranges(self, metadata: OrcMetadata, units: Sequence[int],
               columns: Sequence[str]) -> list[tuple[int, int]]:
        return [metadata.stripes[i][:2] for i in units]

    def read_units(self, task: FileUnits[OrcMetadata], fetcher: Fetcher, units: Sequence[int],
                   columns: Sequence[str]) -> pa.Table:
        metadata = task.metadata
        handle = fetcher.file(self.ranges(metadata, units, columns),
                              known={metadata.size - len(metadata.tail): metadata.tail})
        opened = orc.ORCFile(handle)
        schema = pa.schema([task.metadata.schema.field(c) for c in columns])
        batches = []
        for i in units:
            with fetcher.naming_failures([i]):
                batches.append(opened.read_stripe(i, columns=list(columns)).select(list(columns)))
        return pa.Table.from_batches(batches, schema=schema)

    def sparse_layout(self, metadata: OrcMetadata, size: int
                      ) -> tuple[int, dict[int, bytes]]:
        return size, {0: ORC_MAGIC, size - len(metadata.tail): metadata.tail}

    def _cudf_reader(self) -> CudfReader:
        import cudf

        return lambda sources, columns, units: cudf.read_orc(
            sources, columns=columns, stripes=units)
