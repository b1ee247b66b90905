"""S3 objects, read with ranged GETs through Arrow's S3 client, listed by prefix, and written
as datasets (:class:`S3Store`).

One ``pyarrow.fs.S3FileSystem`` per set of options and process (:func:`s3_filesystem`); Arrow's
failures become the specific errors (:func:`s3_error`), and KvikIO's remote reads are given the
same key where they can sign with it (:func:`kvikio_s3_args`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from typing import TypedDict
from urllib.parse import urlparse

import pyarrow as pa
from pyarrow import fs

from ...errors import OptionError
from ..errors import (
    AccessDeniedError,
    FileChangedError,
    RemoteError,
    SourceNotFoundError,
    UnreachableError,
)
from .base import KvikioOpen, RemoteVersion, Source, StorageOptions

_filesystems: dict[StorageOptions, fs.S3FileSystem] = {}
_filesystems_lock = threading.Lock()


class _S3Options(TypedDict, total=False):
    """What :func:`s3_filesystem` gives ``pyarrow.fs.S3FileSystem``."""

    anonymous: bool
    connect_timeout: float
    request_timeout: float
    retry_strategy: fs.S3RetryStrategy
    endpoint_override: str
    scheme: str
    region: str
    force_virtual_addressing: bool
    access_key: str
    secret_key: str
    session_token: str | None


def s3_filesystem(storage: StorageOptions) -> fs.S3FileSystem:
    """The ``pyarrow.fs.S3FileSystem`` for these options, made once per process."""
    with _filesystems_lock:
        if storage not in _filesystems:
            kwargs: _S3Options = {
                "anonymous": storage.anonymous,
                "connect_timeout": storage.timeout,
                "request_timeout": storage.timeout,
                "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=2),
            }
            if storage.endpoint:
                endpoint = urlparse(storage.endpoint if "://" in storage.endpoint
                                    else "https://" + storage.endpoint)
                kwargs["endpoint_override"] = endpoint.netloc
                kwargs["scheme"] = endpoint.scheme
            if storage.region:
                kwargs["region"] = storage.region
            if storage.virtual_addressing:
                kwargs["force_virtual_addressing"] = True
            if storage.key is not None or storage.secret is not None:
                if storage.key is None or storage.secret is None:
                    raise OptionError("S3 credentials need both key= and secret=")
                kwargs["access_key"], kwargs["secret_key"] = storage.key, storage.secret
                kwargs["session_token"] = storage.session_token
            elif storage.session_token is not None:
                raise OptionError("session_token= needs the key= and secret= it was issued "
                                  "with (the AWS default chain takes AWS_SESSION_TOKEN with "
                                  "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
            _filesystems[storage] = fs.S3FileSystem(**kwargs)
        return _filesystems[storage]


def s3_error(exc: OSError, url: str, storage: StorageOptions
             ) -> RemoteError | SourceNotFoundError:
    """The specific gpuframe error for an S3 failure reported by Arrow."""
    text = str(exc)
    lowered = text.lower()
    where = f" at endpoint {storage.endpoint}" if storage.endpoint else ""
    if any(mark in lowered for mark in ("access_denied", "accessdenied", "invalidaccesskeyid",
                                        "signaturedoesnotmatch", "http response code: 403",
                                        "forbidden")):
        return AccessDeniedError(f"access denied to {url}{where}: check key=/secret="
                                 f"/session_token= ({text})")
    if storage.session_token is not None and "http status 400" in lowered:
        # S3 refuses an expired or wrong token with 400 ExpiredToken or InvalidToken, and the
        # answer to a HEAD (every open) has no body to name it.
        return AccessDeniedError(f"access denied to {url}{where}: HTTP 400, most often an "
                                 f"expired or wrong session_token= ({text})")
    if any(mark in lowered for mark in ("path does not exist", "nosuchkey", "nosuchbucket",
                                        "http response code: 404", "resource_not_found")):
        return SourceNotFoundError(f"no such object: {url}{where} ({text})")
    if any(mark in lowered for mark in ("couldn't connect", "curlcode: 7", "connection refused",
                                        "network_connection", "unable to connect",
                                        "timeout", "timed out")):
        return UnreachableError(f"cannot reach the S3 endpoint {storage.endpoint or '(AWS)'} "
                                f"for {url}: {text}")
    return RemoteError(f"S3 request for {url}{where} failed: {text}")


def kvikio_s3_args(url: str, size: int, storage: StorageOptions) -> KvikioOpen | None:
    """How KvikIO opens an S3 object (:meth:`~.base.RangeSource.kvikio_args`): path-style
    requests signed with a key that KvikIO is given (the options') or reads itself
    (``AWS_ACCESS_KEY_ID`` and the rest of the environment's, which Arrow's default chain also
    takes first), in a known region; None where anonymous (KvikIO wants public objects by their
    HTTPS URL), virtual-host addressed, or the key or region would come from a profile or the
    machine's role, which KvikIO does not read."""
    region = (storage.region or os.environ.get("AWS_REGION")
              or os.environ.get("AWS_DEFAULT_REGION"))
    if (storage.anonymous or storage.virtual_addressing or region is None
            or storage.key is None and not os.environ.get("AWS_ACCESS_KEY_ID")):
        return None
    kwargs: dict[str, str | int | None] = {
        "url": url, "nbytes": size, "aws_region_name": region, "aws_access_key_id": storage.key,
        "aws_secret_access_key": storage.secret, "aws_session_token": storage.session_token}
    if storage.endpoint:
        kwargs["aws_endpoint_url"] = (storage.endpoint if "://" in storage.endpoint
                                      else "https://" + storage.endpoint)
    return KvikioOpen("open_s3_url", kwargs, storage.timeout)


class S3Source(Source):
    """An S3 object read by ranged GETs through Arrow's S3 client (``read_at``). Its version is
    its size, ETag and LastModified, which Arrow's file says when it is opened (a HEAD): the
    ETag tells apart an object put again within the second, of the same size, which
    LastModified (whole seconds) does not. A source made without a version opens the file at
    once; one given planning's version opens it (and checks the version) at the first read,
    which a GPU read that KvikIO fetches never makes: opening the objects one after another took
    a large share of such a read (benchmarks/results/2026-11-25-figures-from-io-comments.md);
    KvikIO's reads confirm the version once done instead."""

    def __init__(self, url: str, storage: StorageOptions, version: RemoteVersion | None = None):
        super().__init__(url, version, storage.check_version)
        self._storage = storage
        self._file: pa.NativeFile | None = None
        self._open_lock = threading.Lock()
        if version is None:
            self._size = self._fetch_size()

    def _opened(self) -> pa.NativeFile:
        """Arrow's file, opened by the first read (or size asked) that finds none."""
        with self._open_lock:
            file = self._file
        return file if file is not None else self._open()[0]

    def kvikio_args(self) -> KvikioOpen | None:
        return kvikio_s3_args(self.path, self.size(), self._storage)

    def _fetch_size(self) -> int:
        return self._open()[1]

    def _open(self) -> tuple[pa.NativeFile, int]:
        """Arrow's file of the object, opened now (a HEAD), and its size; its version is
        checked against the one seen before (:meth:`Source._seen`). The first file opened is
        kept for the reads, later ones closed."""
        try:
            file = s3_filesystem(self._storage).open_input_file(self.path[len("s3://"):])
        except OSError as exc:
            raise s3_error(exc, self.path, self._storage) from exc
        size = file.size()
        try:
            self._seen(_version(size, file.metadata()))
        except FileChangedError:
            file.close()
            raise
        with self._open_lock:
            if self._file is None:
                self._file = file
            kept = self._file
        if kept is not file:
            file.close()
        return kept, size

    def _read(self, offset: int, length: int) -> bytes:
        """A range, by ``timeout + length / slowest_rate`` seconds: Arrow's client gives up only
        on an endpoint sending under a byte a second, so the read runs in a thread of its own
        and is left behind (its bytes unused) once its time is up, freeing the worker's."""
        file = self._opened()
        allowed = self._storage.timeout + length / self._storage.slowest_rate
        read = _Deadlined(lambda: bytes(file.read_at(length, offset)))
        try:
            return read.result(allowed)
        except TimeoutError:
            raise RemoteError(f"{self.path}: the read of bytes {offset}-{offset + length - 1} "
                              f"({length} bytes) took over {allowed:.0f} s, slower than "
                              f"slowest_rate={self._storage.slowest_rate:.0f} bytes/s: given up"
                              ) from None
        except OSError as exc:
            raise s3_error(exc, self.path, self._storage) from exc

    def close(self) -> None:
        if self._file is not None:
            self._file.close()



class _Deadlined:
    """A call run in a daemon thread, so that a wait for it can end before it does (a thread
    of a pool would keep the process from exiting while the call hangs)."""

    def __init__(self, call: Callable[[], bytes]) -> None:
        self._call = call
        self._done = threading.Event()
        self._value: bytes | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._run, daemon=True, name="gpuframe-s3-read").start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as error:  # handed to the waiting thread
            self._error = error
        finally:
            self._done.set()

    def result(self, timeout: float) -> bytes:
        if not self._done.wait(timeout):
            raise TimeoutError
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


def _version(size: int, metadata: dict[str, bytes]) -> RemoteVersion:
    """What an opened object's metadata (Arrow's, from its HEAD's headers) says of its
    version."""
    etag, modified = metadata.get("ETag"), metadata.get("Last-Modified")
    return RemoteVersion(size, etag.decode() if etag else None,
                         modified.decode() if modified else None)


def list_s3(url: str, storage: StorageOptions) -> list[str]:
    """Every object under an ``s3://bucket/prefix`` (recursively), as sorted URLs."""
    filesystem = s3_filesystem(storage)
    base = url[len("s3://"):].rstrip("/")
    try:
        info = filesystem.get_file_info(base)
        if info.type == fs.FileType.File:
            return [url]
        if info.type == fs.FileType.NotFound:
            bucket = base.split("/", 1)[0]
            if bucket != base and filesystem.get_file_info(bucket).type == fs.FileType.NotFound:
                raise SourceNotFoundError(f"no such bucket {bucket!r}: {url}")
            raise SourceNotFoundError(f"no such object or prefix: {url}")
        found = filesystem.get_file_info(fs.FileSelector(base, recursive=True))
    except SourceNotFoundError:
        raise
    except OSError as exc:
        raise s3_error(exc, url, storage) from exc
    return sorted("s3://" + f.path for f in found if f.type == fs.FileType.File)


class S3Store:
    """Datasets under S3 prefixes (:class:`~.base.DatasetStore`), written with the readers'
    options and credentials. S3 has no rename: a staged prefix is published by copying each
    object to the dataset's prefix on the server, the files named ``last`` after every other
    (the markers a reader may trust, ``_SUCCESS`` at the very end), then deleting the staged
    objects. A reader that lists the prefix while the copies run sees part of the dataset
    without its marker; where ``replace``, the old objects are deleted first, so the path is
    empty or partial until the copies are done. A failed copy deletes what it had published,
    which leaves the path empty where it replaced a dataset."""

    creates_folders = False

    def __init__(self, storage: StorageOptions) -> None:
        self.storage = storage
        self.filesystem = s3_filesystem(storage)

    def location(self, path: str) -> str:
        return path[len("s3://"):].rstrip("/")

    def exists(self, path: str) -> bool:
        try:
            info = self.filesystem.get_file_info(self.location(path))
        except OSError as exc:
            raise s3_error(exc, path, self.storage) from exc
        return info.type != fs.FileType.NotFound

    def write_bytes(self, path: str, data: bytes) -> None:
        try:
            with self.filesystem.open_output_stream(self.location(path)) as stream:
                stream.write(data)
        except OSError as exc:
            raise s3_error(exc, path, self.storage) from exc

    def publish(self, staged: str, path: str, replace: bool,
                last: Sequence[str] = ()) -> None:
        source, target = self.location(staged), self.location(path)
        published: list[str] = []
        try:
            found = self.filesystem.get_file_info(fs.FileSelector(source, recursive=True))
            names = sorted(f.path[len(source) + 1:] for f in found
                           if f.type == fs.FileType.File)
            order = [n for n in names if n not in last] + [n for n in last if n in names]
            if replace:
                self._delete(target)
            for name in order:
                self.filesystem.copy_file(f"{source}/{name}", f"{target}/{name}")
                published.append(f"{target}/{name}")
            self._delete(source)
        except OSError as exc:
            with contextlib.suppress(OSError):  # the copy's error is the one to report
                for key in published:
                    self._delete(key)
            raise s3_error(exc, path, self.storage) from exc

    def remove(self, path: str) -> None:
        try:
            self._delete(self.location(path))
        except OSError as exc:
            raise s3_error(exc, path, self.storage) from exc

    def failure(self, exc: OSError, path: str) -> Exception:
        return s3_error(exc, path, self.storage)

    def _delete(self, key: str) -> None:
        info = self.filesystem.get_file_info(key)
        if info.type == fs.FileType.File:
            self.filesystem.delete_file(key)
        elif info.type == fs.FileType.Directory:
            self.filesystem.delete_dir(key)
