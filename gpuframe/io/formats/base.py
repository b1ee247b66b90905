"""What a file format answers for planning and reading: :class:`FileFormat`.

Planning and reading are the same for every format; a format answers only what differs:

- its *metadata*: what one request for the file's tail (or head) tells: the Parquet footer, the
  ORC file tail with its stripes, or a CSV file's header, sampled types and line-aligned ranges.
  Read once per file on the client and sent to the read tasks, so workers never fetch it again;
- its *units*: the pieces a fragment is made of, with their rows and bytes (:class:`Unit`):
  Parquet row groups, ORC stripes, CSV byte ranges that start and end on line boundaries;
- whether statistics can prove a unit holds no matching row (Parquet's and ORC's min/max; CSV
  has none: there the filters only apply to rows);
- how to read some units' columns: with pyarrow (the pandas backend), fetching through a
  :class:`Fetcher`, or with cuDF.

Formats are small picklable objects; their options (CSV's delimiter, header and types) travel
with each read task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

import numpy as np
import pyarrow as pa

from ..statistics import HiveValue

if TYPE_CHECKING:
    import cudf
    import rmm

    from ..filters import Dnf
    from ..storage.base import RangeSource

FOOTER_PROBE = 64 * 2**10
"""Bytes of a file's end read in one request for its footer or tail."""

Metadata = TypeVar("Metadata")
"""What a format's :meth:`FileFormat.read_metadata` reads of one file."""
Metadata_co = TypeVar("Metadata_co", covariant=True)
CudfReader = Callable[["list[str] | list[rmm.DeviceBuffer]", list[str], list[list[int]]],
                      "cudf.DataFrame"]
"""cuDF's reader of a format: (paths or device copies, columns, units per file) -> frame."""


@dataclass(frozen=True)
class Unit:
    """One piece of a file that a fragment is packed from."""

    index: int
    rows: int | None
    """Rows, where the metadata says (not for CSV)."""
    bytes: int
    """Bytes a read of the planned columns fetches."""
    result_bytes: int
    """Bytes of the result's columns alone."""


class FileUnits(Protocol[Metadata_co]):
    """The units of one file a format's readers are asked for, and what planning knew of it: a
    :class:`~gpuframe.io.tasks.FragmentTask` offers it."""

    @property
    def path(self) -> str: ...

    @property
    def metadata(self) -> Metadata_co: ...

    @property
    def units(self) -> tuple[int, ...]: ...

    @property
    def file_columns(self) -> tuple[str, ...]:
        """The columns read of the file: the result's, then those only the filters need."""
        ...

    @property
    def read_schema(self) -> pa.Schema:
        """Types of :attr:`file_columns`, as the plan agreed them across files."""
        ...


class Fetcher(Protocol):
    """How a format's Arrow reader gets one file's bytes, each fetch counted
    (:class:`~gpuframe.io.readers.fetch.FileFetcher`)."""

    def file(self, ranges: Sequence[tuple[int, int]],
             known: Mapping[int, bytes] | None = None) -> str | pa.NativeFile:
        """Something Arrow's reader opens holding at least ``ranges`` (and ``known``, bytes
        the plan holds by offset): the local path, or a copy of the remote file."""
        ...

    def bytes(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of each range, many requests in flight."""
        ...

    def naming_failures(self, units: Sequence[int]) -> AbstractContextManager[None]:
        """Decoding errors raised inside as the engine's errors naming the file and
        ``units``."""
        ...


class FileFormat(Generic[Metadata]):
    """What planning and reading need to know of one file format; see the module docstring."""

    name = ""
    unit_name = "units"
    selective = False
    """Units can be read a few columns at a time, with known rows (filter columns first)."""
    sparse_copies = False
    """A remote file's planned ranges and the plan's bytes make a copy cuDF can open
    (:meth:`sparse_layout`)."""
    device_decodes = True
    """cuDF decodes the file's bytes itself (a CSV in another encoding than UTF-8 is
    transcoded by Arrow on the host first)."""
    reusable_metadata = False
    """The metadata is the file's own (Parquet footer, ORC tail), whatever the format's options
    and the partition budget: planning reuses it while the file is unchanged
    (:class:`~gpuframe.io.planning.metadata.MetadataCache`)."""

    def read_metadata(self, source: RangeSource, partition_bytes: int) -> Metadata:
        raise NotImplementedError

    def arrow_schema(self, path: str, metadata: Metadata) -> pa.Schema:
        raise NotImplementedError

    def metadata_bytes(self, metadata: Metadata) -> int:
        """Bytes of ``metadata`` as its file holds it (what a cache of it is charged)."""
        raise NotImplementedError

    def sent_metadata(self, metadata: Metadata) -> object:
        """``metadata`` as a read task carries it to the workers (:meth:`received_metadata`
        undoes it): itself, unless pickling it costs each hop much."""
        return metadata

    def received_metadata(self, sent: object) -> Metadata:
        """The metadata that :meth:`sent_metadata` sent as ``sent``."""
        return cast(Metadata, sent)

    def units(self, metadata: Metadata, columns: Sequence[str],
              result_columns: Sequence[str]) -> list[Unit]:
        raise NotImplementedError

    def unit_may_match(self, metadata: Metadata, unit: Unit,
                       hive_values: Mapping[str, HiveValue], dnf: Dnf | None) -> bool:
        """False only when what is known without reading proves no row can match."""
        return unit.rows != 0

    def unit_rows(self, metadata: Metadata, index: int) -> int:
        raise NotImplementedError

    def column_range(self, metadata: Metadata, column: str) -> tuple[Any, Any] | None:
        """The least and greatest value of ``column`` in the file, where its metadata says
        (None: it does not), for the plan's estimates of what a filter keeps."""
        return None

    def describe_units(self, metadata: Metadata, units: Sequence[int]) -> str:
        """``units`` as an error message names them ('row group 3', 'stripes 0-7')."""
        name = self.unit_name if len(units) != 1 else self.unit_name[:-1]
        if len(units) > 2 and list(units) == list(range(units[0], units[-1] + 1)):
            return f"{name} {units[0]}-{units[-1]}"
        return f"{name} " + ", ".join(map(str, units))

    def file_size(self, metadata: Metadata) -> int | None:
        """The file's size when it was planned, where the metadata says."""
        return None

    def ranges(self, metadata: Metadata, units: Sequence[int],
               columns: Sequence[str]) -> list[tuple[int, int]]:
        """(offset, length) of the bytes reading ``columns`` of ``units`` fetches."""
        raise NotImplementedError

    def fetched_bytes(self, metadata: Metadata, units: Sequence[int],
                      columns: Sequence[str]) -> int:
        """The bytes of :meth:`ranges`: what a local read of them fetches."""
        return sum(length for _, length in self.ranges(metadata, units, columns))

    def read_units(self, task: FileUnits[Metadata], fetcher: Fetcher, units: Sequence[int],
                   columns: Sequence[str]) -> pa.Table:
        """``columns`` of ``units`` of the task's file as an Arrow table (the pandas backend).

        ``fetcher`` fetches byte ranges and counts them; its ``naming_failures([unit])`` names
        the unit at fault where a format can tell."""
        raise NotImplementedError

    def read_rows(self, task: FileUnits[Metadata], fetcher: Fetcher, rows: Mapping[int, np.ndarray],
                  columns: Sequence[str]) -> pa.Table:
        """``columns`` at ``rows`` (unit -> sorted row indices in it, units in order), in
        order: here the whole units are read, then the rows taken."""
        units = list(rows)
        table = self.read_units(task, fetcher, units, columns)
        sizes = [self.unit_rows(task.metadata, unit) for unit in units]
        starts = np.cumsum([0] + sizes[:-1])
        return table.take(pa.array(np.concatenate(
            [start + np.asarray(r, dtype=np.int64) for start, r in zip(starts, rows.values())])))

    def read_cudf(self, tasks: Sequence[FileUnits[Metadata]],
                  copies: Sequence[rmm.DeviceBuffer] | None = None
                  ) -> tuple[cudf.DataFrame, list[int]]:
        """The file columns of the tasks' units as one cuDF frame, read by cuDF in as few calls
        as the format allows, and the rows each task gave, in order. ``copies``: each task's
        remote file copied into device memory (laid out by :meth:`sparse_layout`), else the
        tasks' local paths are read.

        Formats whose units have known rows read every file in one call of
        :meth:`_cudf_reader`."""
        frame = self._cudf_reader()(list(copies) if copies else [t.path for t in tasks],
                                    list(tasks[0].file_columns),
                                    [list(task.units) for task in tasks])
        return frame, self.task_rows(tasks)

    def task_rows(self, tasks: Sequence[FileUnits[Metadata]]) -> list[int]:
        """The rows each task's units hold, in order (formats whose units have known rows)."""
        return [sum(self.unit_rows(task.metadata, u) for u in task.units) for task in tasks]

    def _cudf_reader(self) -> CudfReader:
        """cuDF's reader of this format."""
        raise NotImplementedError

    def sparse_layout(self, metadata: Metadata, size: int
                      ) -> tuple[int, dict[int, bytes]] | None:
        """How to lay out a sparse copy of a remote file that cuDF can open: (its length, the
        bytes the plan already holds by offset: magic numbers, footer), the planned ranges
        going at their own offsets. None where a reader needs more than those (CSV)."""
        return None

    def resolve_schema(self, schema: pa.Schema) -> pa.Schema:
        """The dataset's file schema, once every file agreed on it."""
        return schema

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"
