"""gpuframe: a distributed multi-GPU dataframe engine on Dask.

Start a cluster (one worker per GPU, or a CPU cluster where there is none), move data onto it, and
bring results back::

    import gpuframe
    with gpuframe.start_cluster() as engine:
        orders = gpuframe.read_parquet("orders/", columns=["id", "amount"])
        joined = orders.merge(gpuframe.from_pandas(customers), on="id")
        print(len(joined), joined.head())
"""

from .cluster import CpuFallbackWarning, Engine, connect, start_cluster
from .config import ClusterOptions
from .diagnostics import job_metrics, progress, report
from .errors import GpuframeError
from .frame import DistributedFrame, from_dask, from_pandas
from .io import read_csv, read_orc, read_parquet
from .operators.join import merge

__all__ = [
    "ClusterOptions",
    "CpuFallbackWarning",
    "DistributedFrame",
    "Engine",
    "GpuframeError",
    "connect",
    "from_dask",
    "from_pandas",
    "job_metrics",
    "merge",
    "progress",
    "read_csv",
    "read_orc",
    "read_parquet",
    "report",
    "start_cluster",
]
