"""gpuframe: a distributed multi-GPU dataframe engine on Dask.

Start a cluster (one worker per GPU, or a CPU cluster where there is none), move data onto it, and
bring results back::

    import gpuframe
    with gpuframe.start_cluster() as engine:
        frame = gpuframe.from_pandas(df)
        print(len(frame), frame.head())
"""

from .cluster import CpuFallbackWarning, Engine, connect, start_cluster
from .config import ClusterOptions
from .errors import GpuframeError
from .frame import DistributedFrame, from_dask, from_pandas

__all__ = [
    "ClusterOptions",
    "CpuFallbackWarning",
    "DistributedFrame",
    "Engine",
    "GpuframeError",
    "connect",
    "from_dask",
    "from_pandas",
    "start_cluster",
]
