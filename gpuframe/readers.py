"""Reading datasets into lazy frames: ``read_parquet``, ``read_orc``, ``read_csv``.

A reader plans the dataset once when called (the workers read the files' metadata; no store is
measured), which gives the frame its schema and the estimates ``explain()`` shows, and returns a
frame whose plan starts with a scan. The scan is planned again when the frame runs, with the
columns and filters the optimizer pushed into it; the files' metadata then comes from the
readers' cache where they have not changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from .cluster.engine import Engine, current_engine
from .frame import DistributedFrame
from .io.formats import format_for
from .io.formats.base import FileFormat
from .io.planning.plan import ValueRanges
from .io.planning.sources import DatasetSource
from .io.report import ReadReport
from .io.storage.base import StorageOptions, storage_options
from .operators.scan import frame_meta, plan_scan, read_report
from .plan.nodes import ReadSource, Scan
from .runtime.runner import Job


def read_parquet(source: DatasetSource, columns: Sequence[str] | None = None,
                 filters: Sequence[Any] | None = None, *, partition_bytes: int | None = None,
                 storage: StorageOptions | dict | None = None, engine: Engine | None = None,
                 **storage_overrides: Any) -> DistributedFrame:
    """A Parquet dataset as a lazy :class:`~gpuframe.DistributedFrame`, read on the workers
    when it runs.

    ``source``: a path, glob, directory (hive ``key=value`` folders become columns), an
    ``http(s)://`` or ``s3://`` URL, or a list of them. ``columns``: the columns to return
    (filter columns are read as needed). ``filters``: pandas/pyarrow DNF, used to skip row
    groups and pages and applied to rows (filters written later on the frame join them where
    the reader applies them exactly). ``partition_bytes``: compressed bytes per partition
    (default: 1/32 of the workers' smallest GPU, 128 MiB without GPUs). Storage options
    (``endpoint``, ``key``, ``secret``, ``region``, ``anonymous``, ``requests_in_flight``,
    ``task_size``, ...) come as ``storage=`` or keywords. A run never returns a partial frame:
    a read task's own error reaches the caller as itself, naming the file (and unit), e.g. a
    ``SourceNotFoundError`` (a ``FileNotFoundError``), ``TruncatedFileError`` or
    ``CorruptFileError`` for a file deleted, cut or corrupted after planning.
    """
    return _scan_frame(source, "parquet", columns, filters, partition_bytes, storage, engine,
                       storage_overrides)


def read_orc(source: DatasetSource, columns: Sequence[str] | None = None,
             filters: Sequence[Any] | None = None, *, partition_bytes: int | None = None,
             storage: StorageOptions | dict | None = None, engine: Engine | None = None,
             **storage_overrides: Any) -> DistributedFrame:
    """An ORC dataset: :func:`read_parquet`'s sources and options, with stripes for row
    groups: filters skip the stripes whose statistics prove no row matches, then apply to
    rows."""
    return _scan_frame(source, "orc", columns, filters, partition_bytes, storage, engine,
                       storage_overrides)


def read_csv(source: DatasetSource, columns: Sequence[str] | None = None,
             filters: Sequence[Any] | None = None, *, delimiter: str = ",", header: bool = True,
             schema: pa.Schema | dict | None = None, newlines_in_values: bool = False,
             encoding: str = "utf-8", partition_bytes: int | None = None,
             storage: StorageOptions | dict | None = None, engine: Engine | None = None,
             **storage_overrides: Any) -> DistributedFrame:
    """A CSV dataset: :func:`read_parquet`'s sources and options, each file split into byte
    ranges of about ``partition_bytes`` on line boundaries (local and remote alike, by range
    reads).

    ``header``: the first line names the columns (else they are ``f0, f1, ...``).
    ``schema``: column types (a ``pyarrow.Schema`` or ``{name: type}``) for some or all
    columns; the others are inferred from each file's first MiB. Empty fields are nulls.
    ``filters`` apply to rows after parsing (CSV has no statistics).
    ``newlines_in_values``: quoted fields may hold newlines, so a file cannot be split at a
    line's end found by a small read: each file is read whole, by one task.
    ``encoding``: the files' text encoding (one that writes newlines, quotes and the delimiter
    as ASCII does); bytes that are not UTF-8 in a file read as UTF-8 are an error naming the
    file and the byte, never bytes in a column.
    """
    fmt = format_for("csv", delimiter=delimiter, header=header, schema=schema,
                     newlines_in_values=newlines_in_values, encoding=encoding)
    return _scan_frame(source, fmt, columns, filters, partition_bytes, storage, engine,
                       storage_overrides)


def read_parquet_with_report(source: DatasetSource, columns: Sequence[str] | None = None,
                             filters: Sequence[Any] | None = None, **options: Any,
                             ) -> tuple[DistributedFrame, ReadReport]:
    """:func:`read_parquet`, run at once, with the :class:`~gpuframe.io.report.ReadReport` of
    what it fetched."""
    return read_with_report(source, "parquet", columns, filters, **options)


def read_with_report(source: DatasetSource, format: str | FileFormat = "parquet",
                     columns: Sequence[str] | None = None,
                     filters: Sequence[Any] | None = None, *,
                     partition_bytes: int | None = None,
                     storage: StorageOptions | dict | None = None, engine: Engine | None = None,
                     **storage_overrides: Any) -> tuple[DistributedFrame, ReadReport]:
    """Read a dataset of ``format`` ('parquet', 'orc', 'csv' or a
    :class:`~gpuframe.io.formats.FileFormat`) at once; the frame and the
    :class:`~gpuframe.io.report.ReadReport` of bytes fetched against bytes of its columns."""
    frame = _scan_frame(source, format, columns, filters, partition_bytes, storage, engine,
                        storage_overrides)
    return frame, report_of_run(frame)


def report_of_run(frame: DistributedFrame) -> ReadReport:
    """Run ``frame`` (whose plan holds one read) and report what its read fetched."""
    with Job(frame.engine, "read") as job:
        execution = frame.run_within(job, keep_read_stats=True)
        return read_report(job, execution.scans[0])


def _scan_frame(source: DatasetSource, format: str | FileFormat, columns: Sequence[str] | None,
                filters: Sequence[Any] | None, partition_bytes: int | None,
                storage: StorageOptions | dict | None, engine: Engine | None,
                storage_overrides: dict[str, Any]) -> DistributedFrame:
    engine = current_engine(engine)
    fmt = format_for(format)
    options = storage_options(storage, **storage_overrides)
    with Job(engine, f"plan {fmt.name} read") as job:
        planned = plan_scan(job, source, fmt, options, partition_bytes, columns, filters,
                            measure=False)
    meta = frame_meta(planned, engine.backend)
    read = ReadSource(source, fmt, options, partition_bytes, meta, planned.rows,
                      planned.total_bytes, ValueRanges(planned))
    dnf = None if planned.filters is None else [[tuple(term) for term in alternative]
                                                for alternative in planned.filters]
    return DistributedFrame(engine, Scan(read, None, dnf))
