"""gpuframe: a distributed multi-GPU dataframe engine on Dask.

Start a cluster (one worker per GPU, or a CPU cluster where there is none), describe the work as
lazy frames, and run it when the data is asked for::

    import gpuframe
    with gpuframe.start_cluster() as engine:
        orders = gpuframe.read_parquet("orders/")
        big = orders[orders.amount > 100]
        joined = big.merge(gpuframe.from_pandas(customers), on="id")
        joined.explain()
        print(len(joined), joined.head())
"""

from .cluster import CpuFallbackWarning, Engine, connect, start_cluster
from .config import ClusterOptions
from .diagnostics.jobs import job_metrics
from .diagnostics.progress import progress
from .diagnostics.report import report
from .errors import GpuframeError
from .frame import DistributedFrame, from_dask, from_pandas, merge
from .ordering import concat
from .plan.expr import Expr, col
from .readers import read_csv, read_orc, read_parquet

__all__ = [
    "ClusterOptions",
    "CpuFallbackWarning",
    "DistributedFrame",
    "Engine",
    "Expr",
    "GpuframeError",
    "col",
    "concat",
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
