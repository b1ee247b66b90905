"""Progress bars for gpuframe work, drawn by Dask's own progress machinery with one bar per
engine stage (read, partition, send, join, gather, ...) instead of per task prefix."""

from __future__ import annotations

from typing import Any

from dask.utils import key_split

from ..frame import DistributedFrame
from .stages import stage_of


def stage_group(key: Any) -> str:
    """The progress bar a task counts in: its gpuframe stage, else Dask's key prefix."""
    return stage_of(key) or key_split(key)


def progress(*objects: Any, notebook: bool | None = None, **options: Any) -> Any:
    """Show the progress of frames or futures and of everything they wait on.

    In a terminal this blocks until they are done; in Jupyter it returns a widget at once (make
    it the cell's last expression). ``options`` go to :func:`distributed.progress`.
    """
    from distributed import progress as dask_progress

    futures = [f for obj in objects
               for f in (obj.futures if isinstance(obj, DistributedFrame) else [obj])]
    return dask_progress(futures, notebook=notebook, multi=True, group_by=stage_group,
                         **options)
