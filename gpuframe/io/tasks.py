"""What one read task is sent for each fragment: :class:`FragmentTask`, made from a plan by
:func:`fragment_tasks`; the plan's side of the contract between planning on the client and the
readers on the workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .errors import repr_without_passwords
from .filters import Dnf
from .formats import FileMetadata
from .formats.base import FileFormat
from .statistics import HiveValue
from .storage.base import RemoteVersion, StorageOptions
from .tuning.model import DEFAULT_REQUEST_SIZE, Concurrency

if TYPE_CHECKING:
    from .planning.plan import ReadPlan


@dataclass(frozen=True)
class FragmentTask:
    """Everything reading one fragment needs; the file's metadata travels with it."""

    path: str
    format: FileFormat
    units: tuple[int, ...]
    metadata: FileMetadata
    file_columns: tuple[str, ...]
    read_schema: pa.Schema
    """Types of :attr:`file_columns`, as the plan agreed them across files."""
    schema: pa.Schema
    hive_values: tuple[tuple[str, HiveValue], ...]
    hive_schema: pa.Schema
    filters: Dnf | None
    storage: StorageOptions
    concurrency: Concurrency
    """Requests in flight and their size for one read task: the plan's (measured and fitted to
    its ranges) or configured."""
    version: RemoteVersion | None = None
    """A remote file's version as planning saw it
    (:attr:`~gpuframe.io.planning.plan.ReadPlan.versions`): its size needs no request, and an
    answer from a changed file raises :class:`~gpuframe.io.errors.FileChangedError`."""

    __repr__ = repr_without_passwords

    def __reduce__(self) -> tuple[Callable[..., FragmentTask], tuple[Any, ...]]:
        # The metadata as its format sends it: a Parquet footer pickled by pyarrow is written
        # and decoded again on each hop of each task (FileFormat.sent_metadata).
        values = {field.name: getattr(self, field.name) for field in fields(self)}
        values["metadata"] = self.format.sent_metadata(self.metadata)
        return _received_task, (values,)


def _received_task(values: dict[str, Any]) -> FragmentTask:
    values["metadata"] = values["format"].received_metadata(values["metadata"])
    return FragmentTask(**values)


def fragment_tasks(plan: ReadPlan) -> list[FragmentTask]:
    """What reading each fragment of ``plan`` needs, in the plan's order."""
    concurrency = plan.concurrency or Concurrency(
        0.0, 0.0, 1, plan.storage.task_size or DEFAULT_REQUEST_SIZE, "configured")
    read_schema = pa.schema([plan.file_schema.field(c) for c in plan.columns_read])
    return [FragmentTask(f.path, plan.format, f.units, plan.footers[f.path],
                         tuple(plan.columns_read), read_schema, plan.schema, f.hive_values,
                         plan.hive_schema, plan.filters, plan.storage, concurrency,
                         plan.versions.get(f.path))
            for f in plan.fragments]
