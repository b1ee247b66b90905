"""Reading datasets onto the cluster: plan on the client, read on the workers.

- :mod:`~gpuframe.io.remote`: byte ranges of local files, ``http(s)://`` URLs and ``s3://``
  objects, fetched concurrently; :class:`StorageOptions` and the Little's-law choice of requests
  in flight (:class:`Concurrency`).
- :mod:`~gpuframe.io.plan`: :func:`plan_fragments` turns a path, glob, directory or list into a
  :class:`ReadPlan` of fragments (row groups of one file), each with an owner worker.
- :mod:`~gpuframe.io.read`: :func:`read_parquet` runs one task per fragment on its owner and
  returns a :class:`gpuframe.DistributedFrame`; :func:`read_parquet_with_report` also returns the
  :class:`ReadReport` of bytes read against bytes of the result's columns.
- :mod:`~gpuframe.io.errors`: the specific errors, each naming the file, URL, column or option.

Nothing here imports the cluster or the frame until a read runs.
"""

from .plan import Fragment, ReadPlan, plan_fragments
from .read import ReadReport, read_parquet, read_parquet_with_report
from .remote import Concurrency, StorageOptions, storage_options

__all__ = [
    "Concurrency",
    "Fragment",
    "ReadPlan",
    "ReadReport",
    "StorageOptions",
    "plan_fragments",
    "read_parquet",
    "read_parquet_with_report",
    "storage_options",
]
