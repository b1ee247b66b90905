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
- :mod:`~gpuframe.io.report`: :class:`ReadReport`, what a read fetched against what its result
  holds;
- :mod:`~gpuframe.io.errors`: the specific errors, each naming the file, URL, column or option.

Nothing here imports the cluster, the engine's runner or the frame: the read operator
(:mod:`gpuframe.operators.scan`) plans with these modules and runs their read tasks, and the
readers users call (``gpuframe.read_parquet``, ...) live in :mod:`gpuframe.readers`.
"""

from .formats import CsvFormat, OrcFormat, ParquetFormat
from .formats.base import FileFormat
from .planning.plan import Fragment, ReadPlan, plan_fragments
from .report import ReadReport
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
    "storage_options",
]
