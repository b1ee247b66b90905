"""What every storage backend shares: the options of a read, a remote file's version, and the
range-read contract.

- :class:`StorageOptions`, resolved by :func:`storage_options` from defaults, then
  ``GPUFRAME_<FIELD>`` environment variables, then the call's keywords. Without ``key=``, S3
  reads take the AWS default chain's credentials: ``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY`` and ``AWS_SESSION_TOKEN``, then the profile ``AWS_PROFILE`` names
  in ``~/.aws``, then the machine's role.
- :class:`RemoteVersion`: the size, ETag and Last-Modified a store said, which later answers
  must match.
- :class:`RangeSource`: one file's bytes by range, counted, as planning and reading use them;
  :class:`Source` is what the backends (:mod:`.local`, :mod:`.http`, :mod:`.s3`) have in common.
- :class:`DatasetStore`: what writing a dataset asks of a backend that can be written (local
  folders, S3): Arrow's file system for the Parquet writer, and the staging folder's
  publication, each backend as atomic as it can make it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ...config import resolve
from ...errors import OptionError
from ..errors import FileChangedError, without_passwords

if TYPE_CHECKING:
    from pyarrow import fs
    from typing_extensions import Self


def _text(value: str) -> str:
    return value


def _count(value: str) -> int:
    return int(value)


def _seconds(value: str) -> float:
    return float(value)


def _flag(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _option(default: Any, parse: Callable[[str], Any], doc: str, *, secret: bool = False) -> Any:
    return field(default=default, repr=not secret, metadata={"parse": parse, "doc": doc})


_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE_BAD = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]|[^\x00-\xff]")
ENGINE_HEADERS = frozenset({"range", "accept-encoding"})
"""Headers every range request sets itself, which ``http_headers`` may not replace."""


def _headers(value: Any) -> tuple[tuple[str, str], ...]:
    """``http_headers`` as (name, value) pairs, hashable and picklable as the options must be:
    from a mapping, such pairs, or a JSON object's text (how ``GPUFRAME_HTTP_HEADERS`` holds
    them). Errors name the header, never its value: values mostly hold tokens."""
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:  # its text is the value's: not chained, not shown
            raise OptionError("http_headers is not a JSON object of header names to values "
                              f"({exc.msg} at character {exc.pos})") from None
        if not isinstance(value, dict):
            raise OptionError("http_headers must be a JSON object of header names to values, "
                              f"not a JSON {type(value).__name__}")
    try:
        pairs = [(name, text) for name, text in
                 (value.items() if isinstance(value, Mapping) else value)]
    except (TypeError, ValueError):
        raise OptionError("http_headers must map header names to values, e.g. "
                          "{'Authorization': 'Bearer ...'}") from None
    seen: set[str] = set()
    for name, text in pairs:
        _check_header(name, text)
        if name.lower() in seen:
            raise OptionError(f"http_headers: {name!r} is given twice")
        seen.add(name.lower())
    return tuple(pairs)


def _check_header(name: object, text: object) -> None:
    """One header that http.client would send as given (it refuses line breaks, naming the
    value, and encodes values as Latin-1) and that leaves the range reads' own alone."""
    if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
        start = _HEADER_NAME.match(name) if isinstance(name, str) else None
        raise OptionError("http_headers: a header name"
                          + (f" (starting {start.group()!r})" if start else "")
                          + " holds more than letters, digits and !#$%&'*+-.^_`|~; give the "
                          "name as the key and the rest as its value")
    if name.lower() in ENGINE_HEADERS:
        raise OptionError(f"http_headers: {name!r} is set by gpuframe's range reads "
                          "themselves and cannot be given")
    if not isinstance(text, str):
        raise OptionError(f"http_headers: the value of {name!r} must be a str, not "
                          f"{type(text).__name__}")
    bad = _HEADER_VALUE_BAD.search(text)
    if bad:
        raise OptionError(f"http_headers: the value of {name!r} holds a line break, control "
                          f"or non-Latin-1 character at position {bad.start()}; a header "
                          "value is one line of text")


@dataclass(frozen=True)
class StorageOptions:
    """Where remote files live and how hard to pull on them. Local paths ignore all of it."""

    endpoint: str | None = _option(
        None, _text, "S3 endpoint URL ('http://127.0.0.1:9000'); None: AWS"
    )
    key: str | None = _option(None, _text, "S3 access key id; None: the AWS default chain")
    secret: str | None = _option(None, _text, "S3 secret access key", secret=True)
    session_token: str | None = _option(
        None, _text, "S3 session token of temporary (STS) credentials, given with their key= "
        "and secret=", secret=True
    )
    region: str | None = _option(None, _text, "S3 region; None: the AWS default")
    anonymous: bool = _option(False, _flag, "S3 without credentials (public buckets)")
    virtual_addressing: bool = _option(
        False, _flag, "S3 buckets in the host name (bucket.endpoint) at an endpoint= too, for "
        "stores that serve no path-style requests; AWS itself always gets them"
    )
    http_headers: tuple[tuple[str, str], ...] = _option(
        (), _text, "headers sent with every HTTP(S) request, a mapping such as "
        "{'Authorization': 'Bearer ...'} (in the environment: a JSON object); not sent on to "
        "another host a URL redirects to", secret=True
    )
    requests_in_flight: int | None = _option(
        None, _count, "concurrent range requests per file; None: chosen by Little's law"
    )
    task_size: int | None = _option(
        None, _count, "bytes per range request, larger ranges are split into these; None: "
        "chosen from the measured latency and bandwidth"
    )
    max_requests_in_flight: int = _option(
        64, _count, "upper bound on the requests in flight Little's law may choose"
    )
    probe_min_bytes: int = _option(
        256 * 2**20, _count, "reads planning fewer bytes take a fixed concurrency instead of "
        "probing the store, whose probe reads for about a second (hundreds of MiB from a fast "
        "store); 0: every read's store is probed"
    )
    check_version: bool = _option(
        True, _flag, "remote answers must match the size, ETag and Last-Modified planning saw "
        "(FileChangedError), and footers of servers that send ETag or Last-Modified are kept "
        "for later plans; off for servers whose ETag differs between answers for one file (the "
        "servers of some web farms)"
    )
    timeout: float = _option(30.0, _seconds, "seconds to connect or wait for a response")
    slowest_rate: float = _option(
        256 * 2**10, float,
        "bytes per second under which a remote read (HTTP, S3) gives up: a read of n bytes may "
        "take timeout + n / slowest_rate seconds in all, so a server that drips its answer "
        "cannot hold a worker's thread for ever"
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "http_headers", _headers(self.http_headers))
        if self.max_requests_in_flight < 1:
            raise OptionError(f"max_requests_in_flight={self.max_requests_in_flight} must be "
                              "at least 1")
        if self.slowest_rate <= 0:
            raise OptionError(f"slowest_rate={self.slowest_rate} must be above 0")
        if self.probe_min_bytes < 0:
            raise OptionError(f"probe_min_bytes={self.probe_min_bytes} must be at least 0")
        if self.task_size is not None and self.task_size < 1:
            raise OptionError(f"task_size={self.task_size} must be at least 1")
        if self.requests_in_flight is not None and self.requests_in_flight < 1:
            raise OptionError(f"requests_in_flight={self.requests_in_flight} must be at least 1")


def storage_options(storage: StorageOptions | Mapping[str, Any] | None = None,
                    **overrides: Any) -> StorageOptions:
    """The options of one read: ``storage`` (an object, or a dict of overrides) then keywords.

    A dict or None starts from the defaults and the ``GPUFRAME_*`` environment; an object is
    taken as is, with ``overrides`` replacing its fields.
    """
    if isinstance(storage, StorageOptions):
        if not overrides:
            return storage
        known = {f.name for f in dataclasses.fields(StorageOptions)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise OptionError(f"unknown option {unknown[0]!r} for StorageOptions; known options: "
                              + ", ".join(sorted(known)))
        return dataclasses.replace(storage, **overrides)
    return resolve(StorageOptions, {**(storage or {}), **overrides})


def scheme_of(path: str) -> str:
    """'file', 'http', 'https' or 's3'."""
    if "://" not in path:
        return "file"
    scheme = path.split("://", 1)[0].lower()
    if scheme not in ("file", "http", "https", "s3"):
        raise OptionError(f"unsupported URL scheme {scheme!r} in {path!r}: use a local path, "
                          "http(s):// or s3://")
    return scheme


class RemoteVersion(NamedTuple):
    """What a store says of a remote file's version: its size, and the ETag and Last-Modified
    headers of an HTTP server (None where it sends none), an S3 object's LastModified as Arrow
    gives it (ISO 8601)."""

    size: int
    etag: str | None = None
    last_modified: str | None = None

    @property
    def validated(self) -> bool:
        """Whether a change of the file's bytes shows, whatever its size: an ETag or a
        Last-Modified."""
        return self.etag is not None or self.last_modified is not None

    def differs(self, other: RemoteVersion) -> list[str]:
        """How ``other`` differs, as 'size 10 -> 12', for what both say (an answer may leave a
        header out)."""
        return [f"{name} {mine!r} -> {theirs!r}"
                for name, mine, theirs in zip(self._fields, self, other)
                if mine is not None and theirs is not None and mine != theirs]


class KvikioOpen(NamedTuple):
    """How KvikIO opens a remote file (:meth:`RangeSource.kvikio_args`): the ``kvikio.RemoteFile``
    constructor's name and keywords, and the read's timeout in seconds."""

    method: str
    kwargs: dict[str, str | int | None]
    timeout: float


class RangeSource(Protocol):
    """One file's bytes by range, and what was fetched of them: what planning (footers), the
    store's probe and the readers ask of a storage backend. ``path`` names the file in errors;
    ``version`` is what the store said of it (remote files), which ``check_version`` holds the
    later answers to."""

    path: str
    version: RemoteVersion | None
    check_version: bool
    requests: int
    bytes_read: int

    def size(self) -> int: ...

    def read_range(self, offset: int, length: int) -> bytes: ...

    def read_range_into(self, offset: int, view: memoryview) -> int: ...

    def read_tail(self, length: int) -> tuple[int, bytes]: ...

    def kvikio_args(self) -> KvikioOpen | None: ...

    def confirm_version(self) -> None: ...

    def record(self, requests: int, nbytes: int) -> None: ...

    def close(self) -> None: ...


class Source:
    """What the backends share of :class:`RangeSource`: the requests and bytes fetched, counted
    (thread-safe), and the version check. A backend says the file's size and version
    (:meth:`_fetch_size`) and reads ranges (:meth:`_read`, and :meth:`_read_into` where it can
    write into memory without a copy).

    ``version``: the :class:`RemoteVersion` planning saw (remote files). The file's size is then
    known without a request, and an answer from a file that has changed since raises
    :class:`FileChangedError`: the plan's metadata would decode its bytes wrong. Without it,
    :attr:`version` is what the first answer said, and later answers must agree. Unless
    ``check_version`` is off: then :attr:`version` is the first answer's, and nothing is
    checked."""

    def __init__(self, path: str, version: RemoteVersion | None = None,
                 check_version: bool = True):
        self.path = path
        self.version = version
        self.check_version = check_version
        self.requests = 0
        self.bytes_read = 0
        self._size: int | None = None if version is None else version.size
        self._lock = threading.Lock()

    def size(self) -> int:
        if self._size is None:
            self._size = self._fetch_size()
        return self._size

    def read_range(self, offset: int, length: int) -> bytes:
        """Exactly the bytes [offset, offset + length) clipped to the file's end."""
        if length <= 0:
            return b""
        data = self._read(offset, length)
        self._count(len(data))
        return data

    def read_range_into(self, offset: int, view: memoryview) -> int:
        """The bytes at ``offset`` into ``view`` (as many as it holds, up to the file's end);
        how many arrived. Stores that can write into memory do so without a copy."""
        if len(view) == 0:
            return 0
        count = self._read_into(offset, view)
        self._count(count)
        return count

    def read_tail(self, length: int) -> tuple[int, bytes]:
        """(file size, its last ``length`` bytes); one request on stores that allow it."""
        size = self.size()
        start = max(0, size - length)
        return size, self.read_range(start, size - start)

    def kvikio_args(self) -> KvikioOpen | None:
        """How KvikIO's range reads open this file with the read's options; None where they
        cannot (the store wants what KvikIO does not send), or it is local."""
        return None

    def confirm_version(self) -> None:
        """Asks the store for the file's version once more (one request, a HEAD over HTTP):
        :class:`FileChangedError` where it is no longer the planned one (unless
        ``check_version`` is off). For reads that bypass this source (KvikIO's), once all their
        bytes are in: a rewrite before or during them shows then."""
        self._fetch_size()

    def record(self, requests: int, nbytes: int) -> None:
        """Counts requests made for this file outside it (KvikIO's)."""
        with self._lock:
            self.requests += requests
            self.bytes_read += nbytes

    def close(self) -> None:
        pass

    def _count(self, nbytes: int) -> None:
        self.record(1, nbytes)

    def _seen(self, version: RemoteVersion) -> None:
        """An answer said the file is at ``version``: the first one sets :attr:`version`, a
        later one that differs raises :class:`FileChangedError`."""
        with self._lock:
            if self.version is None or not self.check_version:
                self.version = self.version or version
                return
            changes = self.version.differs(version)
        if changes:
            raise FileChangedError(self.path, f"{self.path} changed since it was planned "
                                   f"({', '.join(changes)}): read it again "
                                   "(check_version=False where the server's ETag differs "
                                   "between answers for one file)")

    def _fetch_size(self) -> int:
        raise NotImplementedError

    def _read(self, offset: int, length: int) -> bytes:
        raise NotImplementedError

    def _read_into(self, offset: int, view: memoryview) -> int:
        data = self._read(offset, len(view))
        view[:len(data)] = data
        return len(data)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {without_passwords(self.path)}>"



class DatasetStore(Protocol):
    """A place datasets are written to (:func:`~gpuframe.io.storage.open_store`). Paths are
    the user's (a local path, ``file://`` or ``s3://`` URL); :meth:`location` turns one into
    what :attr:`filesystem` takes."""

    filesystem: fs.FileSystem
    creates_folders: bool
    """Whether folders must exist before files are written in them (local), or a key's
    slashes are enough (S3)."""

    def location(self, path: str) -> str: ...

    def exists(self, path: str) -> bool: ...

    def write_bytes(self, path: str, data: bytes) -> None: ...

    def publish(self, staged: str, path: str, replace: bool, last: Sequence[str] = ()) -> None:
        """Make the files under the folder ``staged`` the dataset at ``path`` (the old one
        gone where ``replace``), and remove ``staged``; where files appear one by one, those
        named in ``last`` (relative to ``staged``) appear after every other, in that order."""
        ...

    def remove(self, path: str) -> None:
        """Delete the file, or the folder and all under it, at ``path``; nothing if none."""
        ...

    def failure(self, exc: OSError, path: str) -> Exception:
        """The error to raise for ``exc``, met writing ``path``."""
        ...
