"""The job protocol between the engine and its diagnostics: task keys, jobs and their events.

A job is one user action (a persist, a ``to_pandas``, a ``len``). The client makes its id with
:func:`new_job`, names every task of it with :func:`task_key` and logs the job's start and end.
Keys carry their stage and their job, so the scheduler plugin keeps jobs apart even when several
client threads run them at once, and names stages without a table of operators. Dask's
``key_split`` stops at ``<job>.<step>``, which always holds a dot, so the task stream shows
``gpuframe-<stage>``.

Events, each logged with ``log_event`` (the client's, below, or ``get_worker()``'s in a task):

- :data:`JOB_EVENT_TOPIC`, client, :class:`JobEvent`. The start is sent before the job's first
  task is submitted, the end once the action's results are in.
- :data:`STAGE_EVENT_TOPIC`, client, :class:`StageEvent`: work done on the client (planning) that
  just ended.
- :data:`READ_EVENT_TOPIC`, read tasks: ``{"key": key, "bytes_read": int, ...}``, what one read
  fetched, logged before the task returns.
- :data:`OUTPUT_EVENT_TOPIC`, workers, :class:`OutputEvent`: one per output partition of a plan
  operator (``node``), so the client can show rows and bytes per operator after a run.
- :data:`SEND_EVENT_TOPIC`, workers, :class:`SendEvent`: one per delivery of the direct
  exchange, which moves bytes between workers outside Dask's transfers.

A job's start and its client-side stages go to the scheduler as :data:`CLIENT_EVENT_OP`
messages on the stream that carries its tasks, where the engine's metrics plugin takes them (a
call each otherwise, queued behind the scheduler's other work), and so arrive in order with the
job's tasks. Its end is a call of its own: the client's reads of the metrics are calls too,
and would overtake an end that the stream held back.

Nothing here imports the engine: any layer may name its keys and events with this module.
"""

from __future__ import annotations

import re
import uuid
from typing import Literal, TypedDict

from ..errors import GpuframeError

JOB_EVENT_TOPIC = "gpuframe-job"
STAGE_EVENT_TOPIC = "gpuframe-stage"
READ_EVENT_TOPIC = "gpuframe-read"
OUTPUT_EVENT_TOPIC = "gpuframe-output"
SEND_EVENT_TOPIC = "gpuframe-send"
CLIENT_EVENT_OP = "gpuframe-event"
"""The scheduler's stream operation that logs a client's ``{"topic": ..., "msg": ...}``."""

PREFIX = "gpuframe-"
STAGE_NAME = re.compile(r"[a-z]+(?:-[a-z]+)*")
JOB_ID = re.compile(r"[0-9A-Za-z_]+")
JOB_STEP = re.compile(r"([0-9A-Za-z_]+)\.[0-9]+")
# key_split takes an 8-letter word of a-f only for a hex token and stops before it.
HEX_WORD = re.compile(r"[a-f]{8}")


class TaskKeyError(GpuframeError, ValueError):
    """A stage, job or step that a task key cannot carry."""


class JobEvent(TypedDict):
    job: str
    phase: Literal["start", "end"]
    name: str
    time: float  # the client's clock


class StageEvent(TypedDict):
    job: str
    stage: str
    seconds: float


class SendEvent(TypedDict):
    job: str | None
    source: str
    destination: str
    start: float  # the sending worker's clock
    stop: float
    bytes: int


class OutputEvent(TypedDict):
    job: str
    node: int
    partition: int
    rows: int
    bytes: int


def new_job() -> str:
    """A fresh job id."""
    return uuid.uuid4().hex


def task_key(stage: str, job: str, step: int, *index: object) -> str:
    """The key of one task: ``gpuframe-<stage>-<job>.<step>-<index>...``.

    ``stage`` is lowercase alphabetic words joined by ``-`` (``read-parquet``, ``join``); its
    first word is the stage the diagnostics report. ``step`` numbers the job's steps, ``index``
    tells a step's tasks apart.
    """
    if not STAGE_NAME.fullmatch(stage) or any(map(HEX_WORD.fullmatch, stage.split("-"))):
        raise TaskKeyError(f"stage={stage!r}: a stage is lowercase alphabetic words joined by "
                           "'-', such as 'read-parquet', none of them eight letters a-f")
    if not JOB_ID.fullmatch(job):
        raise TaskKeyError(f"job={job!r}: a job id is letters, digits and '_' (new_job())")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise TaskKeyError(f"step={step!r}: a step is an int from 0")
    key = f"{PREFIX}{stage}-{job}.{step}"
    return f"{key}-{'-'.join(map(str, index))}" if index else key


def _words(key: object) -> list[str] | None:
    """The words of a gpuframe key's name after ``gpuframe``; None for other keys."""
    name = key[0] if isinstance(key, tuple) and key else key
    if not isinstance(name, str) or not name.startswith(PREFIX):
        return None
    return name[len(PREFIX):].split("-")


def stage_of(key: object) -> str | None:
    """The stage of a gpuframe task key (its first word: ``read``, ``partition``, ``join``);
    None for other keys."""
    words = _words(key)
    if words is None or not words[0].isalpha():
        return None
    return words[0]


def stage_name_of(key: object) -> str | None:
    """The whole stage name of a key made by :func:`task_key` (``read-parquet``,
    ``assign-partial``: its words before the job's); None for other keys."""
    words = _words(key)
    if words is None:
        return None
    name = []
    for word in words:
        if not word.isalpha():
            break
        name.append(word)
    return "-".join(name) or None


def job_of(key: object) -> str | None:
    """The job of a key made by :func:`task_key`; None for keys without one."""
    words = _words(key)
    if words is None:
        return None
    for position, word in enumerate(words):
        if not word.isalpha():
            match = JOB_STEP.fullmatch(word)
            return match.group(1) if match is not None and position > 0 else None
    return None
