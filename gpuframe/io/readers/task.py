"""The read task: one read group's fragments read on a worker into one partition of the frame
(:func:`read_group`), with what it fetched reported as a Dask event (topic
:data:`EVENT_TOPIC`, for the dashboard's figures) and kept for the client's
:class:`~gpuframe.io.report.ReadReport` (:func:`take_kept_stats`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from distributed import get_worker

from ...backend import get_backend
from ..storage.sealed import unsealed
from ..tasks import FragmentTask
from .arrow import ArrowReader
from .base import KeptStats, Reader
from .cudf import CudfReader

if TYPE_CHECKING:
    import cudf
    import pandas as pd

EVENT_TOPIC = "gpuframe-read"
KEPT_STATS = 65536
"""Read tasks' :class:`~.base.ReadStats` a worker keeps until the report of their read takes
them (the oldest go first, should a read fail before): a report asks the workers, since the
scheduler keeps only the last 1000 events of a topic (``distributed.admin.low-level-log-length``),
fewer than a large read has tasks, and a report built from them undercounted."""
READERS: dict[str, type[Reader]] = {"pandas": ArrowReader, "cudf": CudfReader}
"""Each backend's reader, by the backend's name."""

_kept_stats: OrderedDict[str, KeptStats] = OrderedDict()
_kept_stats_lock = threading.Lock()


def read_group(key: str, tasks: Sequence[FragmentTask], backend: str,
               keep_stats: bool = False, sealed: str | None = None
               ) -> pd.DataFrame | cudf.DataFrame:
    """The read task ``key``: ``tasks``' fragments (one read group: a worker's, packed up to the
    partition budget) as one partition of ``backend``; reports one Dask event for them, and
    keeps their :class:`~.base.ReadStats` for the client's report where it wants one
    (:func:`take_kept_stats`). ``sealed``: the token of what the tasks' options and URLs were
    redacted of (:mod:`~gpuframe.io.storage.sealed`)."""
    frame, stats = READERS[backend]().read(key, unsealed(list(tasks), sealed))
    if keep_stats:
        with _kept_stats_lock:
            _kept_stats[key] = stats.as_dict()
            while len(_kept_stats) > KEPT_STATS:
                _kept_stats.popitem(last=False)
    try:  # for the dashboard's figures (EngineMetrics)
        get_worker().log_event(EVENT_TOPIC, stats.as_dict())
    except ValueError:
        pass  # not on a worker (called directly)
    if isinstance(frame, pa.Table):  # the Arrow reader's: the backend makes it a frame
        return get_backend(backend).from_arrow(frame)
    return frame


def take_kept_stats(keys: Sequence[str]) -> list[KeptStats]:
    """The stats this worker kept for ``keys``, no longer kept."""
    with _kept_stats_lock:
        return [_kept_stats.pop(key) for key in keys if key in _kept_stats]
