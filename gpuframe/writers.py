"""Writing frames as datasets: ``write_parquet``.

Everything a write could refuse (the path, the options, a dataset already there) is checked
before anything runs; then the frame runs, each worker writes the partitions it holds, and the
files are committed only once all are written (:mod:`gpuframe.io.writers.commit`), so a failed
write leaves neither a partial dataset nor staged files. A frame is taken as anything that runs
within a job (:class:`RunnableFrame`), so that ``DistributedFrame`` can delegate here without
this module importing it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import pyarrow as pa

from .errors import OptionError, UnknownColumnError
from .execute import in_job
from .io.storage import open_store
from .io.storage.base import StorageOptions, storage_options
from .io.writers.commit import Commit, check_target
from .io.writers.parquet import ParquetWrite, WrittenFile, parquet_compression
from .operators.write import write_partitions
from .runtime.runner import Job

if TYPE_CHECKING:
    import pandas as pd

    from .cluster.engine import Engine
    from .execute import Execution


class RunnableFrame(Protocol):
    """What a write asks of a frame: its engine, its schema, and a run within a job."""

    @property
    def engine(self) -> Engine: ...

    @property
    def meta(self) -> pd.DataFrame: ...

    def run_within(self, job: Job, keep_read_stats: bool = False) -> Execution: ...


class WrittenDataset(NamedTuple):
    """What a write made: the dataset's path, its data files (relative to it, in the frame's
    order) and their rows."""

    path: str
    files: tuple[str, ...]
    rows: int


def write_parquet(frame: RunnableFrame, path: str | os.PathLike[str], *,
                  partition_on: str | Sequence[str] | None = None,
                  compression: str | None = "snappy", overwrite: bool = False,
                  storage: StorageOptions | dict | None = None,
                  **storage_overrides: Any) -> WrittenDataset:
    """Write ``frame`` as a Parquet dataset at ``path``: a local folder or an ``s3://``
    prefix, one file per partition written by the worker that holds it, with ``_metadata``
    (every file's row groups) and ``_SUCCESS`` beside them.

    ``partition_on``: a column, or columns, that become hive folders
    (``col=value/part-...parquet``), left out of the files; gpuframe's and pyarrow's readers
    give them back as columns, typed by the folders' values (int32 where every value is an
    integer that fits, else strings).
    ``compression``: one of :data:`~gpuframe.io.writers.parquet.COMPRESSIONS`, or None.
    ``overwrite``: replace a dataset or file at ``path``; without it, an existing path is a
    :class:`~gpuframe.io.writers.commit.DatasetExistsError` before anything runs. Storage
    options (``endpoint``, ``key``, ``secret``, ``region``, ...) are the readers', as
    ``storage=`` or keywords. Nothing appears at ``path`` unless every partition was written: a
    failed task's error reaches the caller as the readers' do, naming the task.
    """
    target = os.fspath(path)
    codec = parquet_compression(compression)
    hive = (partition_on,) if isinstance(partition_on, str) else tuple(partition_on or ())
    check_partition_columns(frame.meta, hive)
    options = storage_options(storage, **storage_overrides)
    store = open_store(target, options)
    check_target(store, target, overwrite)
    schema = pa.Schema.from_pandas(frame.meta, preserve_index=False)

    def write_all(job: Job) -> list[WrittenFile]:
        parts = frame.run_within(job).output
        commit = Commit(store, target, job.id, overwrite)
        write = ParquetWrite(commit.staged, options, schema, codec, hive,
                             max(5, len(str(len(parts) - 1))))
        return write_partitions(job, parts, write, commit)

    files = in_job(frame.engine, "write_parquet", write_all)
    return WrittenDataset(target, tuple(f.path for f in files), sum(f.rows for f in files))


def check_partition_columns(meta: pd.DataFrame, partition_on: tuple[str, ...]) -> None:
    """The hive columns name columns of the frame, each once, and leave some for the files."""
    unknown = [name for name in partition_on if name not in meta.columns]
    if unknown:
        raise UnknownColumnError(f"partition_on: column(s) {unknown} not among the frame's "
                                 f"columns {list(meta.columns)}")
    if len(set(partition_on)) != len(partition_on):
        raise OptionError(f"partition_on={list(partition_on)} names a column twice")
    if partition_on and set(partition_on) >= set(meta.columns):
        raise OptionError(f"partition_on={list(partition_on)} takes every column: the files "
                          "would hold none")
