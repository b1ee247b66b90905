"""One partition written as Parquet, on the worker that holds it.

A partition becomes one file in the staging folder, ``part-<partition>.parquet``, or, with
hive partitioning, one file of that name in each ``<column>=<value>/`` folder it has rows for,
the partition columns left out of the files as hive does (a null value is
``__HIVE_DEFAULT_PARTITION__``, values are URL-encoded); a partition without rows writes none.
Partition numbers are zero-padded so that the files sort in the frame's order, which is the
order readers list them in. Each task hands back its files' footers, from which the client
writes ``_metadata`` (:mod:`.commit`).

Both backends write through Arrow's Parquet writer: a cuDF partition is copied to host memory
first. Hive folders are split here rather than by ``pyarrow.dataset.write_dataset``, whose
Acero source warns of every partition that arrived over the network in unaligned buffers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...backend import get_backend
from ...errors import OptionError
from ..planning.sources import HIVE_NULL
from ..storage import open_store
from ..storage.base import StorageOptions
from ..storage.sealed import unsealed

COMPRESSIONS = ("snappy", "zstd", "gzip", "brotli", "lz4", "none")
"""The codecs a write may use; 'none' (or None) writes uncompressed pages."""


def parquet_compression(compression: str | None) -> str:
    """``compression`` as Arrow names it, or :class:`~gpuframe.errors.OptionError` naming the
    choices."""
    name = "none" if compression is None else compression
    if not isinstance(name, str) or name.lower() not in COMPRESSIONS:
        raise OptionError(f"compression={compression!r}: choose one of "
                          f"{', '.join(map(repr, COMPRESSIONS))} or None")
    name = name.lower()
    if name != "none" and not pa.Codec.is_available(name):
        raise OptionError(f"compression={compression!r}: this pyarrow was built without it")
    return name


@dataclass(frozen=True)
class ParquetWrite:
    """What every write task of one dataset is sent.

    ``schema``: the frame's columns as Arrow types them; each partition is cast to it, so that
    all files agree (a column whose type the schema cannot say, a pandas object column, is
    written as each partition has it). ``digits``: the zero-padded width of partition
    numbers."""

    staged: str
    storage: StorageOptions
    schema: pa.Schema
    compression: str
    partition_on: tuple[str, ...]
    digits: int


class WrittenFile(NamedTuple):
    """A file a task wrote: its path relative to the dataset's folder ('/'-separated), its
    rows, and its footer, which names that path for ``_metadata``."""

    path: str
    rows: int
    metadata: pq.FileMetaData


def write_partition(partition: Any, backend: str, write: ParquetWrite, index: int,
                    sealed: str | None = None) -> list[WrittenFile]:
    """On a worker: partition ``index`` written under ``write.staged``; the files written (none
    for a partition without rows). ``sealed``: the token of what ``write``'s options were
    redacted of (:mod:`~gpuframe.io.storage.sealed`)."""
    write = unsealed(write, sealed)
    table = conformed(get_backend(backend).to_arrow(partition), write.schema)
    store = open_store(write.staged, write.storage)
    name = f"part-{index:0{write.digits}d}.parquet"
    groups = (hive_groups(table, write.partition_on) if write.partition_on
              else [("", table)] if table.num_rows else [])
    written = []
    for folder, rows in groups:
        relative = f"{folder}/{name}" if folder else name
        where = store.location(f"{write.staged}/{relative}")
        footers: list[pq.FileMetaData] = []
        try:
            if folder and store.creates_folders:
                store.filesystem.create_dir(where.rsplit("/", 1)[0], recursive=True)
            pq.write_table(rows, where, filesystem=store.filesystem,
                           compression=write.compression, metadata_collector=footers)
        except OSError as exc:
            raise store.failure(exc, f"{write.staged}/{relative}") from exc
        footers[0].set_file_path(relative)
        written.append(WrittenFile(relative, rows.num_rows, footers[0]))
    return written


def hive_groups(table: pa.Table, columns: tuple[str, ...]) -> Iterator[tuple[str, pa.Table]]:
    """(hive folder, its rows less the hive columns) for each combination of ``columns``'
    values in ``table``, the rows in their order. Each value's code is its place in its
    column's dictionary, with one more for null; a row's codes make one number to sort by."""
    codes = np.zeros(table.num_rows, dtype=np.int64)
    for name in columns:
        encoded = table.column(name).combine_chunks().dictionary_encode()
        places = pc.fill_null(encoded.indices, len(encoded.dictionary))
        codes = codes * (len(encoded.dictionary) + 1) + places.to_numpy()
    order = np.argsort(codes, kind="stable")
    data = table.drop_columns(list(columns))
    for rows in np.split(order, np.flatnonzero(np.diff(codes[order])) + 1):
        if len(rows):
            folder = "/".join(f"{quote(name, safe='')}={hive_value(table.column(name)[rows[0]])}"
                              for name in columns)
            yield folder, data.take(rows)


def hive_value(value: pa.Scalar) -> str:
    """A value as its hive folder names it: URL-encoded text, or the hive writers' null."""
    return HIVE_NULL if not value.is_valid else quote(str(value.as_py()), safe="")


def conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with each column cast to ``schema``'s type, where the schema has one (not
    null)."""
    for i, field in enumerate(schema):
        column = table.column(i)
        if not pa.types.is_null(field.type) and column.type != field.type:
            table = table.set_column(i, field, column.cast(field.type))
    return table
