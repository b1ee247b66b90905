"""Byte ranges of local files, HTTP(S) URLs and S3 objects, read concurrently.

Every file of a dataset is a :class:`Source`: something with a size that answers
``read_range(offset, length)``. Planning reads footers through it (one suffix request for the
last 64 KiB of a remote file), and the read step fetches the column chunks it needs with
:func:`read_ranges`, many requests in flight, never the whole file. How many requests, and of
what size, is :mod:`gpuframe.io.tuning`'s to choose.

Options live in :class:`StorageOptions`, resolved by :func:`storage_options` from defaults, then
``GPUFRAME_<FIELD>`` environment variables, then the call's keywords. Without ``key=``, S3 reads
take the AWS default chain's credentials: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and
``AWS_SESSION_TOKEN``, then the profile ``AWS_PROFILE`` names in ``~/.aws``, then the machine's
role.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.client import HTTPException
from typing import Any, Callable, Mapping, NamedTuple, Sequence
from urllib.parse import unquote, urlparse

from ..config import resolve
from ..errors import OptionError
from .errors import (
    AccessDeniedError,
    FileChangedError,
    RangeNotSupportedError,
    RemoteError,
    SourceNotFoundError,
    UnreachableError,
    without_passwords,
)

FOOTER_PROBE = 64 * 2**10


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
        except ValueError as exc:  # its text is the value's: not chained, not shown
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


def _check_header(name: Any, text: Any) -> None:
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "http_headers", _headers(self.http_headers))
        if self.max_requests_in_flight < 1:
            raise OptionError(f"max_requests_in_flight={self.max_requests_in_flight} must be "
                              "at least 1")
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
    """How KvikIO opens a remote file (:meth:`Source.kvikio_args`): the ``kvikio.RemoteFile``
    constructor's name and keywords, and the read's timeout in seconds."""

    method: str
    kwargs: dict[str, Any]
    timeout: float


class Source:
    """One file's bytes by range; counts the requests and bytes it fetched (thread-safe).

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

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {without_passwords(self.path)}>"


class LocalSource(Source):
    """A local file read with ``os.pread``, safe to share between threads."""

    def __init__(self, path: str):
        super().__init__(path)
        local = unquote(urlparse(path).path) if path.startswith("file://") else path
        try:
            self._fd = os.open(local, os.O_RDONLY)
        except FileNotFoundError as exc:
            raise SourceNotFoundError(f"no such file: {path}") from exc
        except IsADirectoryError as exc:
            raise SourceNotFoundError(f"{path} is a directory, not a file") from exc
        except PermissionError as exc:
            raise AccessDeniedError(f"cannot open {path}: permission denied") from exc

    def _fetch_size(self) -> int:
        return os.fstat(self._fd).st_size

    def _read(self, offset: int, length: int) -> bytes:
        chunks, end = [], offset + length
        while offset < end:
            chunk = os.pread(self._fd, end - offset, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks)  # one chunk: itself, no copy

    def _read_into(self, offset: int, view: memoryview) -> int:
        done = 0
        while done < len(view):
            count = os.preadv(self._fd, [view[done:]], offset + done)
            if not count:
                break
            done += count
        return done

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


_http_lock = threading.Lock()
_http_pools: dict[tuple[str | None, str, int], Any] = {}
HTTP_REDIRECTS = 30
"""Redirects one request follows, as requests did: presigned and CDN URLs redirect."""


def _http_pool(proxy: str | None, ca_bundle: str, connections: int) -> Any:
    """The process's keep-alive connections, straight to each host or through ``proxy``, up to
    ``connections`` kept open per host: they outlive the thread pool of each read, so later
    reads reuse them. Certificates are verified against ``ca_bundle`` (a file or a folder).

    urllib3 itself rather than requests: a 64 KiB Range request took 1.4-1.7 ms of client CPU
    through a ``requests.Session``, 0.53-0.67 ms through urllib3 (4 threads, loopback server,
    2-core host), and a selective read makes hundreds to thousands of them."""
    key = (proxy, ca_bundle, connections)
    with _http_lock:
        if key not in _http_pools:
            import urllib3

            trust = "ca_cert_dir" if os.path.isdir(ca_bundle) else "ca_certs"
            kwargs = {"num_pools": 16, "maxsize": connections, "block": False,
                      "cert_reqs": "CERT_REQUIRED", trust: ca_bundle}
            if proxy is None:
                _http_pools[key] = urllib3.PoolManager(**kwargs)
            else:
                _, login = _login(proxy)
                _http_pools[key] = urllib3.ProxyManager(
                    proxy, proxy_headers=urllib3.make_headers(proxy_basic_auth=login)
                    if login else None, **kwargs)
        return _http_pools[key]


def _proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url``, as requests chose it: ``<scheme>_proxy``
    or ``all_proxy``, unless ``no_proxy`` covers the host; one without a scheme is http."""
    import urllib.request

    parsed = urlparse(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parsed.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parsed.hostname or ""):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _ca_bundle() -> str:
    """The authorities HTTPS servers' certificates must chain to, as requests chose them: those
    the ``REQUESTS_CA_BUNDLE`` or ``CURL_CA_BUNDLE`` variable names (a file or a folder: a
    site's own authority), else certifi's bundle."""
    import certifi

    return (os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
            or certifi.where())


def _login(url: str) -> tuple[str, str | None]:
    """(``url`` as requested: without its ``user:password@`` and fragment; that 'user:password'
    percent-decoded, or None). The login goes as Basic authentication, to the server for a
    file's URL, to the proxy for a proxy's, and never in a request line (a proxy's has the
    whole URL)."""
    parsed = urlparse(url)
    bare = parsed._replace(netloc=parsed.netloc.rpartition("@")[2], fragment="").geturl()
    if not (parsed.username or parsed.password):
        return bare, None
    return bare, f"{unquote(parsed.username or '')}:{unquote(parsed.password or '')}"


class HttpSource(Source):
    """An http(s) URL read with Range requests over keep-alive connections (:func:`_http_pool`).

    What gpuframe's reads did through requests, they still do: certificates verified
    (:func:`_ca_bundle`), the environment's proxies (:func:`_proxy_for`, credentials in the
    proxy's URL), a URL's ``user:password@`` sent as Basic authentication, up to
    :data:`HTTP_REDIRECTS` redirects followed, no retries. Not kept: ``~/.netrc`` credentials,
    cookies between requests, SOCKS proxies (which needed PySocks).

    ``http_headers`` go with every request (an ``Authorization`` among them replaces the URL's
    ``user:password@``); like ``Authorization``, none of them follows a redirect to another
    host, so a token is never handed to a CDN or a presigned URL's store."""

    def __init__(self, url: str, storage: StorageOptions, version: RemoteVersion | None = None):
        import urllib3

        super().__init__(url, version, storage.check_version)
        self._timeout = storage.timeout
        self._proxy, self._ca_bundle = _proxy_for(url), _ca_bundle()
        self._pool = _http_pool(self._proxy, self._ca_bundle, storage.max_requests_in_flight)
        names = [name for name, _ in storage.http_headers]
        self._retries = urllib3.Retry(
            total=None, connect=0, read=False, status=0, other=0, redirect=HTTP_REDIRECTS,
            remove_headers_on_redirect=urllib3.Retry.DEFAULT_REMOVE_HEADERS_ON_REDIRECT | {
                name.lower() for name in names})
        self._url, login = _login(url)
        headers = urllib3.HTTPHeaderDict(urllib3.make_headers(basic_auth=login) if login else {})
        headers.update(storage.http_headers)
        self._headers = dict(headers.items())
        if names:
            self._denied_hint = f"check the http_headers sent ({', '.join(names)})"
        elif login:
            self._denied_hint = "check the URL's user:password@, or give http_headers="
        else:
            self._denied_hint = ("give credentials as http_headers={'Authorization': ...} or "
                                 "as user:password@ in the URL")

    def _get(self, headers: Mapping[str, str], method: str = "GET") -> Any:
        """The answer, its body not yet read; a failure to connect, or a timeout, is an
        :class:`UnreachableError` (urllib3 wraps what ended its one try in ``MaxRetryError``)."""
        from urllib3.exceptions import HTTPError, MaxRetryError, NewConnectionError
        from urllib3.exceptions import TimeoutError as NoAnswer

        try:
            response = self._pool.urlopen(method, self._url, headers={**self._headers, **headers},
                                          timeout=self._timeout, retries=self._retries,
                                          preload_content=False)
        except (HTTPError, OSError) as exc:
            cause = exc.reason if isinstance(exc, MaxRetryError) else exc
            if isinstance(cause, NoAnswer) and not isinstance(cause, NewConnectionError):
                raise UnreachableError(f"{self.path}: no answer in {self._timeout} s") from exc
            raise UnreachableError(f"cannot reach {self.path}: {cause}") from exc
        status = response.status
        if status in (200, 206) or (status == 416 and method == "GET"):
            return response
        response.drain_conn()
        if status == 404:
            raise SourceNotFoundError(f"no such file: {self.path} (HTTP 404)")
        if status in (401, 403):
            raise AccessDeniedError(f"access denied to {self.path} (HTTP {status}): "
                                    f"{self._denied_hint}")
        raise RemoteError(f"{method} {self.path} failed: HTTP {status} {response.reason}")

    def kvikio_args(self) -> KvikioOpen | None:
        """A plain URL alone: KvikIO sends none of the read's headers or Basic login, goes
        through no proxy of the environment's, and trusts the default authorities."""
        import certifi

        if (self._headers or self._proxy or self._url.lower().startswith("https")
                and self._ca_bundle != certifi.where()):
            return None
        return KvikioOpen("open_http", {"url": self._url, "nbytes": self.size()}, self._timeout)

    def _fetch_size(self) -> int:
        response = self._get({"Accept-Encoding": "identity"}, method="HEAD")
        response.drain_conn()
        if "Content-Length" in response.headers:
            self._seen(_version(int(response.headers["Content-Length"]), response.headers))
            return int(response.headers["Content-Length"])
        self._ranged("bytes=0-0")
        return self._size

    def _ranged_response(self, spec: str) -> Any:
        """The streamed answer to a Range GET: 206, or 416 past the end (the file's size and
        version noted from either, :meth:`Source._seen`); else an error (the connection
        dropped rather than the whole file read)."""
        response = self._get({"Range": spec, "Accept-Encoding": "identity"})
        if response.status not in (206, 416):
            response.close()
            raise RangeNotSupportedError(
                f"{self.path}: the server ignored 'Range: {spec}' (HTTP "
                f"{response.status}); gpuframe reads byte ranges and will not download "
                "whole files"
            )
        if response.status == 206 or "Content-Range" in response.headers:
            total = _total_from(response.headers.get("Content-Range"), self.path)
            try:
                self._seen(_version(total, response.headers))
            except FileChangedError:
                response.close()
                raise
            self._size = total
        return response

    def _received(self, response: Any, spec: str, read: Callable[[Any], Any]) -> Any:
        """``read(response)``: a body that breaks off is a :class:`RemoteError` naming the
        range (urllib3 raises its ``HTTPError``, http.client its ``HTTPException``)."""
        from urllib3.exceptions import HTTPError

        try:
            return read(response)
        except (HTTPError, HTTPException, OSError) as exc:
            response.close()
            raise RemoteError(f"{self.path}: the response to 'Range: {spec}' broke off: "
                              f"{exc}") from exc

    def _ranged(self, spec: str) -> bytes:
        """The body of a Range GET (empty past the end, the size then noted from the 416)."""
        response = self._ranged_response(spec)
        if response.status == 416:
            response.drain_conn()
            if self._size is None:
                raise RangeNotSupportedError(f"{self.path}: the server refused 'Range: {spec}' "
                                             "(HTTP 416) without saying the file's size")
            return b""
        return self._received(response, spec, _body)

    def _read(self, offset: int, length: int) -> bytes:
        return self._ranged(f"bytes={offset}-{offset + length - 1}")

    def _read_into(self, offset: int, view: memoryview) -> int:
        spec = f"bytes={offset}-{offset + len(view) - 1}"
        response = self._ranged_response(spec)
        if response.status == 416:
            response.drain_conn()
            return 0
        return self._received(response, spec, lambda answer: _body_into(answer, view))

    def read_tail(self, length: int) -> tuple[int, bytes]:
        data = self._ranged(f"bytes=-{length}")
        self._count(len(data))
        return self._size, data


def _body(response: Any) -> bytes:
    """A wanted body in one read of its whole length, which fills the buffer from the socket
    with the GIL released (reading in chunks joined in Python held it, and capped a process
    near 200 MB/s). Reading to the end returns the connection to the keep-alive pool."""
    return response.read()


def _body_into(response: Any, view: memoryview) -> int:
    """:func:`_body` straight into ``view``: bytes that arrived. urllib3's ``readinto`` reads
    into a new bytes object and copies it into ``view`` with the GIL held; http.client's, under
    it, receives from the socket into ``view`` itself (16 threads x 64 MiB from a loopback
    server: 0.86 -> 1.60 GiB/s, 1.04 -> 0.28 CPU s/GiB). A body shorter than it announced
    raises ``IncompleteRead``, as urllib3's reads do; reading the rest (none, unless the server
    sent more than asked) through urllib3 returns the connection to the keep-alive pool (its
    ``drain_conn``, which counts the bytes it saw against the length, would close it)."""
    from urllib3.exceptions import IncompleteRead

    body = response._original_response
    done = 0
    while done < len(view):
        count = body.readinto(view[done:])
        if not count:
            break
        done += count
    if done < len(view) and body.length:
        raise IncompleteRead(done, body.length)
    response.read()
    return done


def _version(size: int, headers: Mapping[str, str]) -> RemoteVersion:
    return RemoteVersion(size, headers.get("ETag"), headers.get("Last-Modified"))


def _total_from(content_range: str | None, url: str) -> int:
    """The total of 'bytes 0-9/1234' or 'bytes */1234'."""
    if not content_range or "/" not in content_range or content_range.endswith("/*"):
        raise RangeNotSupportedError(f"{url}: the server sent no usable Content-Range header "
                                     f"({content_range!r})")
    return int(content_range.rsplit("/", 1)[1])


_filesystems: dict[StorageOptions, Any] = {}
_filesystems_lock = threading.Lock()


def s3_filesystem(storage: StorageOptions) -> Any:
    """The ``pyarrow.fs.S3FileSystem`` for these options, made once per process."""
    with _filesystems_lock:
        if storage not in _filesystems:
            from pyarrow import fs

            kwargs: dict[str, Any] = {
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


def s3_error(exc: OSError, url: str, storage: StorageOptions) -> RemoteError:
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
        return UnreachableError(f"cannot reach the S3 endpoint{where or ' (AWS)'} for {url}: "
                                f"{text}")
    return RemoteError(f"S3 request for {url}{where} failed: {text}")


def kvikio_s3_args(url: str, size: int, storage: StorageOptions) -> KvikioOpen | None:
    """How KvikIO opens an S3 object (:meth:`Source.kvikio_args`): path-style requests signed
    with a key that KvikIO is given (the options') or reads itself (``AWS_ACCESS_KEY_ID`` and the
    rest of the environment's, which Arrow's default chain also takes first), in a known
    region; None where anonymous (KvikIO wants public objects by their HTTPS URL), virtual-host
    addressed, or the key or region would come from a profile or the machine's role, which
    KvikIO does not read."""
    region = (storage.region or os.environ.get("AWS_REGION")
              or os.environ.get("AWS_DEFAULT_REGION"))
    if (storage.anonymous or storage.virtual_addressing or region is None
            or storage.key is None and not os.environ.get("AWS_ACCESS_KEY_ID")):
        return None
    kwargs = {"url": url, "nbytes": size, "aws_region_name": region,
              "aws_access_key_id": storage.key, "aws_secret_access_key": storage.secret,
              "aws_session_token": storage.session_token}
    if storage.endpoint:
        kwargs["aws_endpoint_url"] = (storage.endpoint if "://" in storage.endpoint
                                      else "https://" + storage.endpoint)
    return KvikioOpen("open_s3_url", kwargs, storage.timeout)


class S3Source(Source):
    """An S3 object read by ranged GETs through Arrow's S3 client (``read_at``). Its version is
    its size and LastModified, asked by a HEAD (Arrow's ``get_file_info``). Arrow's file is
    opened (another HEAD) at the first read, which a GPU read that KvikIO fetches never makes
    (16 objects opened one after another took ~0.3 s of a read from moto's S3 on an H200
    host); KvikIO's reads confirm the version once done instead."""

    def __init__(self, url: str, storage: StorageOptions, version: RemoteVersion | None = None):
        super().__init__(url, version, storage.check_version)
        self._storage = storage
        self._file: Any = None
        self._open_lock = threading.Lock()
        self._planned = version is not None
        if version is None:
            self._size = self._fetch_size()

    def _opened(self) -> Any:
        """Arrow's file, opened by the first call; a planned version is first asked again (the
        answers to Arrow's reads say nothing of it: a rewrite of the same size since planning
        would go unseen), and the file's size checked against it."""
        with self._open_lock:
            if self._file is None:
                if self._planned:
                    self._fetch_size()
                try:
                    file = s3_filesystem(self._storage).open_input_file(self.path[len("s3://"):])
                except OSError as exc:
                    raise s3_error(exc, self.path, self._storage) from exc
                try:
                    self._seen(RemoteVersion(file.size()))
                except FileChangedError:
                    file.close()
                    raise
                self._file = file
            return self._file

    def kvikio_args(self) -> KvikioOpen | None:
        return kvikio_s3_args(self.path, self.size(), self._storage)

    def _fetch_size(self) -> int:
        """The object's size and LastModified (a HEAD), checked against its version."""
        try:
            info = s3_filesystem(self._storage).get_file_info(self.path[len("s3://"):])
        except OSError as exc:
            raise s3_error(exc, self.path, self._storage) from exc
        if info.size is None:  # Arrow's answer to a 404 (or to a prefix: a "directory")
            where = f" at endpoint {self._storage.endpoint}" if self._storage.endpoint else ""
            raise SourceNotFoundError(f"no such object: {self.path}{where}")
        self._seen(RemoteVersion(info.size, None,
                                 info.mtime.isoformat() if info.mtime is not None else None))
        return info.size

    def _read(self, offset: int, length: int) -> bytes:
        file = self._opened()
        try:
            return bytes(file.read_at(length, offset))
        except OSError as exc:
            raise s3_error(exc, self.path, self._storage) from exc

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def open_source(path: str, storage: StorageOptions | None = None,
                version: RemoteVersion | None = None) -> Source:
    """The :class:`Source` of a local path, ``file://``, ``http(s)://`` or ``s3://`` URL;
    ``version``: the remote file's as planning saw it (:class:`Source`)."""
    scheme = scheme_of(path)
    if scheme == "file":
        return LocalSource(path)
    storage = storage or storage_options()
    if scheme in ("http", "https"):
        return HttpSource(path, storage, version)
    return S3Source(path, storage, version)


class RangeFile(io.RawIOBase):
    """A seekable, read-only file object over a :class:`Source`.

    ``prefetched`` maps offsets to bytes already fetched (by :func:`read_ranges`); reads inside
    them are served from memory, others become one range request each. Wrap it in
    ``pyarrow.PythonFile`` to hand it to Arrow's Parquet reader.
    """

    def __init__(self, source: Source, prefetched: Mapping[int, bytes] | None = None):
        super().__init__()
        self.source = source
        self._position = 0
        self._spans = sorted((offset, data) for offset, data in (prefetched or {}).items())

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.source.size()}
        self._position = base[whence] + offset
        return self._position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        want = min(len(view), max(0, self.source.size() - self._position))
        data = self._cached(self._position, want)
        if data is None:
            data = self.source.read_range(self._position, want)
        view[:len(data)] = data
        self._position += len(data)
        return len(data)

    def _cached(self, offset: int, length: int) -> bytes | None:
        for start, data in self._spans:
            if start <= offset and offset + length <= start + len(data):
                return data[offset - start:offset - start + length]
        return None


def read_ranges(source: Source, ranges: Sequence[tuple[int, int]], max_in_flight: int,
                request_size: int | None = None) -> list[bytes]:
    """The bytes of each (offset, length), fetched by up to ``max_in_flight`` threads.

    Ranges longer than ``request_size`` are split into requests of that size and joined again,
    so one large column chunk is fetched in parallel too. The first failed request's error is
    raised; nothing partial is returned.
    """
    pieces = cut_requests(ranges, max_in_flight, request_size)
    fetched = run_requests(pieces, max_in_flight, lambda p: source.read_range(p[1], p[2]))
    joined: list[list[bytes]] = [[] for _ in ranges]
    for (index, _, _), data in zip(pieces, fetched):
        joined[index].append(data)
    return [b"".join(parts) for parts in joined]


def read_ranges_into(jobs: Sequence[tuple[Source, Sequence[tuple[int, int]], memoryview]],
                     max_in_flight: int, request_size: int | None = None) -> None:
    """:func:`read_ranges` for several files at once, each job's ranges landing at their own
    offsets of its buffer (as long as its file at least): no copies of the bytes, and one pool
    of ``max_in_flight`` requests over all the files, so no file waits for another's last
    request. A short answer is a :class:`RemoteError` naming the file and the range."""
    pieces = [(job, start, length) for job, (_, ranges, _) in enumerate(jobs)
              for _, start, length in cut_requests(ranges, max_in_flight, request_size)]

    def fetch(piece: tuple[int, int, int]) -> None:
        source, _, buffer = jobs[piece[0]]
        read_exactly_into(source, piece[1], buffer[piece[1]:piece[1] + piece[2]])

    run_requests(pieces, max_in_flight, fetch)


def read_exactly_into(source: Source, offset: int, view: memoryview) -> None:
    """All of ``view`` from ``source`` at ``offset``: a short answer is a
    :class:`RemoteError` naming the file and the range."""
    count = source.read_range_into(offset, view)
    if count != len(view):
        raise RemoteError(f"{source.path}: bytes {offset}-{offset + len(view)} ended after "
                          f"{count} bytes; the file is shorter than its footer says")


def cut_requests(ranges: Sequence[tuple[int, int]], max_in_flight: int,
                 request_size: int | None) -> list[tuple[int, int, int]]:
    """(range index, offset, length) of each request: ranges cut at ``request_size`` (whole
    where it is None), for :func:`run_requests`."""
    if max_in_flight < 1:
        raise OptionError(f"max_in_flight={max_in_flight} must be at least 1")
    pieces: list[tuple[int, int, int]] = []
    for index, (offset, length) in enumerate(ranges):
        step = request_size or max(length, 1)
        pieces.extend((index, start, min(step, offset + length - start))
                      for start in range(offset, offset + length, step))
    return pieces


def run_requests(pieces: list[tuple[int, int, int]], max_in_flight: int,
                 fetch: Callable[[tuple[int, int, int]], Any]) -> list[Any]:
    """``fetch(piece)`` of every piece, by up to ``max_in_flight`` threads, results in order;
    the first failure is raised."""
    if len(pieces) <= 1 or max_in_flight == 1:
        return [fetch(piece) for piece in pieces]
    with ThreadPoolExecutor(min(max_in_flight, len(pieces)),
                            thread_name_prefix="gpuframe-range") as pool:
        return list(pool.map(fetch, pieces))


def list_s3(url: str, storage: StorageOptions) -> list[str]:
    """Every object under an ``s3://bucket/prefix`` (recursively), as sorted URLs."""
    from pyarrow import fs

    filesystem = s3_filesystem(storage)
    base = url[len("s3://"):].rstrip("/")
    try:
        info = filesystem.get_file_info(base)
        if info.type == fs.FileType.File:
            return [url]
        if info.type == fs.FileType.NotFound:
            raise SourceNotFoundError(f"no such object or prefix: {url}")
        found = filesystem.get_file_info(fs.FileSelector(base, recursive=True))
    except SourceNotFoundError:
        raise
    except OSError as exc:
        raise s3_error(exc, url, storage) from exc
    return sorted("s3://" + f.path for f in found if f.type == fs.FileType.File)
