"""The engine's stages, named from task keys (and, for planning, which runs on the client, from
its ``gpuframe-stage`` event).

Every gpuframe task key starts ``gpuframe-<stage>-``, so the dashboard, the metrics and the
progress bars can all tell the stages apart without io or shuffle importing anything from here.
"""

from __future__ import annotations

from typing import Any

# Key prefix -> stage, in the order data flows; the first prefix that matches wins.
STAGE_PREFIXES = (
    ("gpuframe-plan-", "plan"),
    ("gpuframe-read-", "read"),
    ("gpuframe-from-pandas-", "load"),
    ("gpuframe-from-dask-", "load"),
    ("gpuframe-sample-", "sample"),
    ("gpuframe-partition-", "partition"),
    ("gpuframe-send-", "send"),
    ("gpuframe-broadcast-", "broadcast"),
    ("gpuframe-join-", "join"),
    ("gpuframe-gather-", "gather"),
    ("gpuframe-head-", "gather"),
)
# Data moved between workers shows as this stage (Dask's "transfer" start-stops).
TRANSFER = "transfer"
# Small bookkeeping tasks (row counts, sizes) of any other gpuframe key.
OTHER = "other"
STAGES = ("plan", "read", "load", "sample", "partition", "send", TRANSFER, "broadcast", "join", "gather",
          OTHER)


def stage_of(key: Any) -> str | None:
    """The stage of a task key, or None for a key that is not gpuframe's."""
    name = key[0] if isinstance(key, tuple) else key
    if not isinstance(name, str) or not name.startswith("gpuframe-"):
        return None
    for prefix, stage in STAGE_PREFIXES:
        if name.startswith(prefix):
            return stage
    return OTHER


JOB_EVENT_TOPIC = "gpuframe-job"
STAGE_EVENT_TOPIC = "gpuframe-stage"
OUTPUT_EVENT_TOPIC = "gpuframe-output"


def new_job() -> str:
    import uuid

    return uuid.uuid4().hex


def task_key(stage: str, job: str, step: int, *index: Any) -> str:
    key = f"gpuframe-{stage}-{job}.{step}"
    return key + ("-" + "-".join(map(str, index)) if index else "")
