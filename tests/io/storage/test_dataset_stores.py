"""The stores datasets are written to (gpuframe.io.storage.open_store): a local folder and an
S3 prefix against the session's moto server, each publishing a staged folder."""

from __future__ import annotations

import pytest
from pyarrow import fs

from gpuframe.errors import OptionError
from gpuframe.io.storage import open_store
from gpuframe.io.storage.base import storage_options
from gpuframe.io.storage.local import LocalStore
from gpuframe.io.storage.s3 import S3Store


class RecordingFileSystem:
    """Arrow's S3 file system, with the copies it was asked for recorded in order."""

    def __init__(self, inner: fs.FileSystem) -> None:
        self.inner = inner
        self.copies: list[str] = []

    def copy_file(self, source: str, target: str) -> None:
        self.copies.append(target.rsplit("/", 1)[1])
        self.inner.copy_file(source, target)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def _stage(store, staged: str, names: list[str]) -> None:
    if store.creates_folders:
        store.filesystem.create_dir(store.location(staged))
    for name in names:
        store.write_bytes(f"{staged}/{name}", name.encode())


def test_open_store_picks_the_backend_by_scheme(tmp_path):
    assert isinstance(open_store(str(tmp_path)), LocalStore)
    assert isinstance(open_store("s3://bucket/out", storage_options(anonymous=True)), S3Store)
    with pytest.raises(OptionError, match="HTTP has no writes"):
        open_store("https://example.com/out")


def test_local_publish_renames_the_staged_folder_and_replaces_on_request(tmp_path):
    store = open_store(str(tmp_path))
    staged, path = str(tmp_path / ".out.staged"), str(tmp_path / "out")
    _stage(store, staged, ["part-0.parquet", "_SUCCESS"])
    assert not store.exists(path)
    store.publish(staged, path, replace=False)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["_SUCCESS", "part-0.parquet"]
    _stage(store, staged, ["part-1.parquet"])
    store.publish(staged, path, replace=True)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["part-1.parquet"]
    store.remove(path)
    store.remove(path)  # nothing there: nothing to do
    assert not list(tmp_path.iterdir())


def test_s3_publish_copies_the_markers_last_and_deletes_the_staged_prefix(s3_server):
    store = open_store("s3://data/stores", storage_options(s3_server.options()))
    recording = RecordingFileSystem(store.filesystem)
    store.filesystem = recording
    staged, path = s3_server.url("stores/.out.staged"), s3_server.url("stores/out")
    _stage(store, staged, ["_SUCCESS", "_metadata", "b.parquet", "a.parquet"])
    store.publish(staged, path, replace=False, last=("_metadata", "_SUCCESS"))
    assert recording.copies == ["a.parquet", "b.parquet", "_metadata", "_SUCCESS"]
    assert not store.exists(staged) and store.exists(path)
    _stage(store, staged, ["c.parquet"])
    store.publish(staged, path, replace=True)
    listed = store.filesystem.get_file_info(fs.FileSelector("data/stores", recursive=True))
    assert sorted(f.path for f in listed if f.type == fs.FileType.File) == [
        "data/stores/out/c.parquet"]
    store.remove(path)
    assert not store.exists(path)
