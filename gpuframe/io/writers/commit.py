"""The commit protocol of a dataset write: files are staged, and published only once every
partition's have been written.

1. Before anything runs, :func:`check_target` refuses a path that exists, unless the write is
   to replace it (:class:`DatasetExistsError`).
2. The tasks write under :attr:`Commit.staged`, a hidden sibling of the path
   (``.<name>.gpuframe-<job id>``): gpuframe's readers and pyarrow's skip names that start with
   '.', so a read of the parent folder never meets it, and on a local disk it lies on the same
   file system as the path, which a rename needs.
3. When all have succeeded, :meth:`Commit.publish` checks that the files agree on their columns,
   writes ``_metadata`` (every file's row groups, each naming its file) and an empty
   ``_SUCCESS`` beside them, and has the store publish the staged folder: one rename on a local
   disk, so a reader sees all of the dataset or none of it; on S3, which has no rename, copies
   with ``_metadata`` and then ``_SUCCESS`` last, so a reader that waits for ``_SUCCESS`` never
   sees a partial dataset (:class:`~gpuframe.io.storage.s3.S3Store` says what one that does not
   wait may see: gpuframe's readers do not wait for it).
4. When any failed, :meth:`Commit.abort` deletes the staged folder; the caller first waits for
   every task, so that none writes after it.

A client that dies between 2 and 4 leaves the hidden staged folder behind, named after the job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import GpuframeError, OptionError
from ..errors import SchemaMismatchError
from ..storage.base import scheme_of
from ..storage.local import local_path

if TYPE_CHECKING:
    from ..storage.base import DatasetStore
    from .parquet import WrittenFile

METADATA = "_metadata"
SUCCESS = "_SUCCESS"
"""The empty file whose presence says the dataset is whole: published last."""


class DatasetExistsError(GpuframeError, FileExistsError):
    """A write's path holds a file or dataset already, and ``overwrite`` was not given."""


def check_target(store: DatasetStore, path: str, overwrite: bool) -> None:
    """:class:`DatasetExistsError` where ``path`` exists and is not to be replaced, and
    :class:`~gpuframe.errors.OptionError` where it cannot hold a dataset."""
    parent_and_name(path)
    if not overwrite and store.exists(path):
        raise DatasetExistsError(f"{path} exists already: pass overwrite=True to replace it, "
                                 "or write to another path")


def staging_path(path: str, job: str) -> str:
    """Where a write of ``path`` by ``job`` stages its files: a hidden sibling of ``path``."""
    parent, name = parent_and_name(path)
    return f"{parent}/.{name}.gpuframe-{job}"


def parent_and_name(path: str) -> tuple[str, str]:
    """The folder that holds ``path`` (a local path made absolute), and its name in it."""
    if scheme_of(path) == "file":
        path = local_path(path)
    elif "/" not in path.split("://", 1)[1].strip("/"):
        raise OptionError(f"cannot write a dataset at {path}, a bucket's root: name a prefix, "
                          f"such as {path.rstrip('/')}/dataset")
    parent, name = path.rstrip("/").rsplit("/", 1)
    return parent, name


class Commit:
    """One write's staged folder, published whole or deleted."""

    def __init__(self, store: DatasetStore, path: str, job: str, overwrite: bool) -> None:
        self.store = store
        self.path = path
        self.overwrite = overwrite
        self.staged = staging_path(path, job)

    def begin(self) -> None:
        """Make the staged folder where the store has folders."""
        if self.store.creates_folders:
            self.store.filesystem.create_dir(self.store.location(self.staged))

    def publish(self, files: list[WrittenFile], schema: pa.Schema) -> None:
        """Write ``_metadata`` and ``_SUCCESS`` for ``files`` and publish the dataset at the
        path; ``schema``: the files' columns, where there are no files to say them."""
        if files:
            schema = agreed_schema(files)
        pq.write_metadata(schema, self.store.location(f"{self.staged}/{METADATA}"),
                          metadata_collector=[f.metadata for f in files],
                          filesystem=self.store.filesystem)
        self.store.write_bytes(f"{self.staged}/{SUCCESS}", b"")
        check_target(self.store, self.path, self.overwrite)  # another writer may have come
        self.store.publish(self.staged, self.path, self.overwrite, last=(METADATA, SUCCESS))

    def abort(self) -> None:
        """Delete the staged folder and all in it."""
        self.store.remove(self.staged)


def agreed_schema(files: list[WrittenFile]) -> pa.Schema:
    """The columns every file has, or :class:`SchemaMismatchError` naming a column on which two
    disagree (a pandas object column holding other types in other partitions)."""
    first = files[0]
    schema = first.metadata.schema.to_arrow_schema()
    for file in files[1:]:
        if file.metadata.schema.equals(first.metadata.schema):
            continue
        other = file.metadata.schema.to_arrow_schema()
        for name in dict.fromkeys(schema.names + other.names):
            mine = schema.field(name).type if name in schema.names else "no such column"
            theirs = other.field(name).type if name in other.names else "no such column"
            if mine != theirs:
                raise SchemaMismatchError(
                    f"the written files disagree on column {name!r}: {mine} in {first.path}, "
                    f"{theirs} in {file.path}; cast it to one dtype (astype) before writing")
        raise SchemaMismatchError(f"the written files {first.path} and {file.path} have "
                                  "different Parquet schemas")
    return schema
