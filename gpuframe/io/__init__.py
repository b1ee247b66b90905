"""Reading datasets onto the cluster: plan on the client, read on the workers.

- :mod:`~gpuframe.io.remote`: byte ranges of local files, ``http(s)://`` URLs and ``s3://``
  objects, fetched concurrently; :class:`StorageOptions` and the Little's-law choice of requests
  in flight (:class:`Concurrency`).
- :mod:`~gpuframe.io.formats`: Parquet, ORC and CSV, one small class each: their metadata, their
  units (row groups, stripes, line-aligned byte ranges), statistics, and readers.
- :mod:`~gpuframe.io.filters`: ``filters=`` in DNF, checked and tested against what is known.
- :mod:`~gpuframe.io.plan`: :func:`plan_fragments` turns a path, glob, directory or list into a
  :class:`ReadPlan` of fragments (units of one file), each with an owner worker.
- :mod:`~gpuframe.io.read`: :func:`read_parquet`, :func:`read_orc` and :func:`read_csv` run one
  task per fragment on its owner and return a :class:`gpuframe.DistributedFrame`;
  :func:`read_with_report` also returns the :class:`ReadReport` of bytes read against bytes of
  the result's columns.
- :mod:`~gpuframe.io.errors`: the specific errors, each naming the file, URL, column or option.

Nothing here imports the cluster or the frame until a read runs.
"""

from .formats import CsvFormat, FileFormat, OrcFormat, ParquetFormat
from .planning.plan import Fragment, ReadPlan, plan_fragments
from .read import (
    ReadReport,
    read_csv,
    read_orc,
    read_parquet,
    read_parquet_with_report,
    read_with_report,
)
from .storage.base import StorageOptions, storage_options
from .tuning.model import Concurrency

__all__ = [
    "Concurrency",
    "CsvFormat",
    "FileFormat",
    "Fragment",
    "OrcFormat",
    "ParquetFormat",
    "ReadPlan",
    "ReadReport",
    "StorageOptions",
    "plan_fragments",
    "read_csv",
    "read_orc",
    "read_parquet",
    "read_parquet_with_report",
    "read_with_report",
    "storage_options",
]
