"""Reading datasets onto the cluster: plan on the client, read on the workers.

- :mod:`~gpuframe.io.storage`: byte ranges of local files, ``http(s)://`` URLs and ``s3://``
  objects, one backend each behind one range-read contract, and :class:`StorageOptions`;
- :mod:`~gpuframe.io.tuning`: the Little's-law choice of requests in flight and their size
  (:class:`Concurrency`), from a probe of the store;
- :mod:`~gpuframe.io.formats`: Parquet, ORC and CSV, one module each: their metadata, their
  units (row groups, stripes, line-aligned byte ranges) and how to read them;
- :mod:`~gpuframe.io.filters` and :mod:`~gpuframe.io.statistics`: ``filters=`` checked, and
  tested against hive values and min/max statistics to prune files and units;
- :mod:`~gpuframe.io.planning`: :func:`plan_fragments` turns a path, glob, directory or list into
  a :class:`ReadPlan` of fragments (units of one file), each with an owner worker, read in
  read groups;
- :mod:`~gpuframe.io.tasks` and :mod:`~gpuframe.io.readers`: what each read task is sent, and
  the workers' readers (pyarrow for the pandas backend, cuDF for the cudf one);
- :mod:`~gpuframe.io.submit`: :func:`read_parquet`, :func:`read_orc` and :func:`read_csv` plan
  and run one task per read group on its owner and return a :class:`gpuframe.DistributedFrame`;
  :func:`read_with_report` also returns the :class:`ReadReport` (:mod:`~gpuframe.io.report`)
  of bytes read against bytes of the result's columns;
- :mod:`~gpuframe.io.errors`: the specific errors, each naming the file, URL, column or option.

Nothing here imports the cluster or the frame until a read runs.
"""

from .formats import CsvFormat, OrcFormat, ParquetFormat
from .formats.base import FileFormat
from .planning.plan import Fragment, ReadPlan, plan_fragments
from .report import ReadReport
from .storage.base import StorageOptions, storage_options
from .submit import (
    read_csv,
    read_orc,
    read_parquet,
    read_parquet_with_report,
    read_with_report,
)
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
