"""The write sink: a frame's partitions written where they lie, by one stage of the job, and
committed once every one has been written.

A write is an action, not a plan node: nothing runs after it and the optimizer has nothing to
push into it, so it takes the partitions of a run, as ``to_pandas`` does, instead of lowering a
node of the plan. Its tasks are the stage ``write`` (keys ``gpuframe-write-<job>...``), which
the dashboard shows beside the stages that computed the partitions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from distributed import wait

from ..io.storage.sealed import Secrets
from ..io.writers.parquet import ParquetWrite, WrittenFile, write_partition

if TYPE_CHECKING:
    from ..io.writers.commit import Commit
    from ..runtime.runner import Job, Partitions


def write_partitions(job: Job, parts: Partitions, write: ParquetWrite,
                     commit: Commit) -> list[WrittenFile]:
    """Write every partition of ``parts`` under the commit's staged folder, on its owner, and
    publish them; the files written. A failed task fails the job as any task does (naming it),
    once every other has finished, and the staged folder is deleted: cancelling does not stop
    a task already writing, which would otherwise leave files after the clean-up."""
    commit.begin()
    stage = job.stage("write")
    secrets = Secrets()
    hidden = secrets.redact(write)
    sealed = secrets.seal(job.engine.client)
    futures = [stage.submit(write_partition, future, job.backend, hidden, i, sealed,
                            index=(i,), owner=owner)
               for i, (future, owner) in enumerate(zip(parts.futures, parts.owners))]
    try:
        wait(futures)
        failed = [future for future in futures if future.status != "finished"]
        if failed:
            job.fail(failed[0])
        files = [file for written in job.gather(futures) for file in written]
        commit.publish(files, data_columns(write))
    except BaseException:
        commit.abort()
        raise
    return files


def data_columns(write: ParquetWrite) -> pa.Schema:
    """The columns a file of ``write`` holds: the frame's, less the hive folders'."""
    return pa.schema([f for f in write.schema if f.name not in write.partition_on])
