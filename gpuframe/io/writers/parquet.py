"""One partition written as Parquet, on the worker that holds it.

A partition becomes one file in the staging folder, ``part-<partition>-0.parquet``, or, with
hive partitioning, one file in each ``<column>=<value>/`` folder it has rows for, the partition
columns left out of the files as hive does (a null value is ``__HIVE_DEFAULT_PARTITION__``,
values are URL-encoded). Partition numbers are zero-padded so that the files sort in the
frame's order, which is the order readers list them in. Each task hands back its files'
footers, from which the client writes ``_metadata`` (:mod:`.commit`).

Both backends write through Arrow: a cuDF partition is copied to host memory first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from ...backend import get_backend
from ...errors import OptionError
from ..storage import open_store
from ..storage.base import StorageOptions

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


def write_partition(partition: Any, backend: str, write: ParquetWrite,
                    index: int) -> list[WrittenFile]:
    """On a worker: partition ``index`` written under ``write.staged``; the files written."""
    table = conformed(get_backend(backend).to_arrow(partition), write.schema)
    store = open_store(write.staged, write.storage)
    root = store.location(write.staged)
    written: list[WrittenFile] = []

    def record(file: Any) -> None:
        relative = file.path[len(root) + 1:]
        file.metadata.set_file_path(relative)
        written.append(WrittenFile(relative, file.metadata.num_rows, file.metadata))

    partitioning = None
    if write.partition_on:
        keys = pa.schema([table.schema.field(name) for name in write.partition_on])
        partitioning = ds.partitioning(keys, flavor="hive")
    try:
        ds.write_dataset(
            table, root, format="parquet", filesystem=store.filesystem,
            partitioning=partitioning, basename_template=f"part-{index:0{write.digits}d}-{{i}}"
            ".parquet", file_options=ds.ParquetFileFormat().make_write_options(
                compression=write.compression),
            existing_data_behavior="overwrite_or_ignore", create_dir=store.creates_folders,
            preserve_order=True, file_visitor=record)
    except OSError as exc:
        raise store.failure(exc, write.staged) from exc
    return written


def conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with each column cast to ``schema``'s type, where the schema has one (not
    null)."""
    for i, field in enumerate(schema):
        column = table.column(i)
        if not pa.types.is_null(field.type) and column.type != field.type:
            table = table.set_column(i, field, column.cast(field.type))
    return table
