"""Byte ranges of local files, HTTP(S) URLs and S3 objects, read concurrently.

Every file of a dataset is a :class:`Source`: something with a size that answers
``read_range(offset, length)``. Planning reads footers through it (one suffix request for the
last 64 KiB of a remote file), and the read step fetches the column chunks it needs with
:func:`read_ranges`, many requests in flight, never the whole file. How many requests, and of
what size, follows Little's law (:func:`choose_concurrency`, from what :func:`probe_storage`
measured where the reads run): requests large enough that latency is a small part of each, and
enough of them in flight to cover the store's bandwidth times the time each request takes while
the store delivers that bandwidth.

Options live in :class:`StorageOptions`, resolved by :func:`storage_options` from defaults, then
``GPUFRAME_<FIELD>`` environment variables, then the call's keywords.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.client import HTTPException
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import unquote, urlparse

from ..config import resolve
from ..errors import OptionError
from .errors import (
    AccessDeniedError,
    RangeNotSupportedError,
    RemoteError,
    SourceNotFoundError,
    UnreachableError,
)

FOOTER_PROBE = 64 * 2**10
BANDWIDTH_PROBE = 4 * 2**20
"""Bytes of each read that measures one request's rate alone (at most half the file): long
enough that transfer, not latency, dominates on a fast store."""
PARALLEL_PROBES = 32
"""The most concurrent reads that measure what a store serves to many requests at once: the
probe doubles them from 2 while the store's rate still grows (:data:`PROBE_GAIN`)."""
PROBE_GAIN = 1.15
"""Doubling the concurrent probes must raise the measured rate this much to go on. The step
that stops the ramp still counts when it gained at all (:func:`probe_storage`)."""
PROBE_READ_BYTES = 16 * 2**20
"""The largest read of the probe's concurrent steps, which read requests of the size chosen
for the store (:func:`choose_request_size`) up to this, however many run at once. Reads that
shrank as they multiplied (32 MiB in all a round: 2 MiB each at 16, 1 MiB at 32) measured a
Python server's ~1000 requests a second, not its bandwidth: 6.7 GB/s of a loopback server
from which 16 requests of 16 MiB got 12 (H200 host)."""
PROBE_MEMORY = 256 * 2**20
"""The most buffer memory one concurrent step reads into: past it, reads at once share buffers
(their bytes are thrown away), so 32 reads of 16 MiB need 256 MiB, not 512."""
PROBE_STEP_SECONDS = 0.1
"""The least time each probe step reads for, its reads repeated until then: a single round of
32 MiB lasts 16 ms at 2 GB/s, short enough that noise decided where the ramp stopped. Each
step (one read alone, then 2 to 32 at once) so takes 0.1 s, up to one read's time more, once
per store and process."""
DEFAULT_REQUEST_SIZE = 4 * 2**20
"""Request size where nothing was measured (``requests_in_flight`` set, no ``task_size``)."""
MIN_REQUEST_SIZE = 2**20
MAX_REQUEST_SIZE = 64 * 2**20
LATENCY_SHARE = 1 / 16
"""The part of each request's time that may go to latency (the per-request cost): requests
are made ``(1 - share) / share`` times latency x one request's rate long, so that fewer,
larger requests amortise it."""
WAVES = 4
"""Requests each request in flight should make in one fetch (:meth:`Concurrency.request_size_for`):
when a fetch is only one or two rounds of requests, its last round's stragglers leave the
other connections idle. H200, 1.8 GiB over loopback HTTP in one GPU read task: 32 requests of
32 MiB in flight (64 chunks, two rounds) 0.29-0.31 s; 16 of 16 MiB (eight rounds) 0.19-0.20 s."""


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


@dataclass(frozen=True)
class StorageOptions:
    """Where remote files live and how hard to pull on them. Local paths ignore all of it."""

    endpoint: str | None = _option(
        None, _text, "S3 endpoint URL ('http://127.0.0.1:9000'); None: AWS"
    )
    key: str | None = _option(None, _text, "S3 access key id; None: the AWS default chain")
    secret: str | None = _option(None, _text, "S3 secret access key", secret=True)
    region: str | None = _option(None, _text, "S3 region; None: the AWS default")
    anonymous: bool = _option(False, _flag, "S3 without credentials (public buckets)")
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
    timeout: float = _option(30.0, _seconds, "seconds to connect or wait for a response")

    def __post_init__(self) -> None:
        if self.max_requests_in_flight < 1:
            raise OptionError(f"max_requests_in_flight={self.max_requests_in_flight} must be "
                              "at least 1")
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


class Source:
    """One file's bytes by range; counts the requests and bytes it fetched (thread-safe)."""

    def __init__(self, path: str):
        self.path = path
        self.requests = 0
        self.bytes_read = 0
        self._size: int | None = None
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

    def close(self) -> None:
        pass

    def _count(self, nbytes: int) -> None:
        with self._lock:
            self.requests += 1
            self.bytes_read += nbytes

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
        return f"<{type(self).__name__} {self.path}>"


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
    cookies between requests, SOCKS proxies (which needed PySocks)."""

    def __init__(self, url: str, storage: StorageOptions):
        import urllib3

        super().__init__(url)
        self._timeout = storage.timeout
        self._pool = _http_pool(_proxy_for(url), _ca_bundle(), storage.max_requests_in_flight)
        self._retries = urllib3.Retry(total=None, connect=0, read=False, status=0, other=0,
                                      redirect=HTTP_REDIRECTS)
        self._url, login = _login(url)
        self._headers = urllib3.make_headers(basic_auth=login) if login else {}

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
            raise AccessDeniedError(f"access denied to {self.path} (HTTP {status})")
        raise RemoteError(f"{method} {self.path} failed: HTTP {status} {response.reason}")

    def _fetch_size(self) -> int:
        response = self._get({"Accept-Encoding": "identity"}, method="HEAD")
        response.drain_conn()
        if "Content-Length" in response.headers:
            return int(response.headers["Content-Length"])
        self._ranged("bytes=0-0")
        return self._size

    def _ranged_response(self, spec: str) -> Any:
        """The streamed answer to a Range GET: 206 (the file's size noted from it), or 416 past
        the end; else an error (the connection dropped rather than the whole file read)."""
        response = self._get({"Range": spec, "Accept-Encoding": "identity"})
        if response.status not in (206, 416):
            response.close()
            raise RangeNotSupportedError(
                f"{self.path}: the server ignored 'Range: {spec}' (HTTP "
                f"{response.status}); gpuframe reads byte ranges and will not download "
                "whole files"
            )
        if response.status == 206:
            self._size = _total_from(response.headers.get("Content-Range"), self.path)
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
            self._size = _total_from(response.headers.get("Content-Range"), self.path)
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
            if storage.key is not None or storage.secret is not None:
                if storage.key is None or storage.secret is None:
                    raise OptionError("S3 credentials need both key= and secret=")
                kwargs["access_key"], kwargs["secret_key"] = storage.key, storage.secret
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
        return AccessDeniedError(f"access denied to {url}{where}: check key=/secret= ({text})")
    if any(mark in lowered for mark in ("path does not exist", "nosuchkey", "nosuchbucket",
                                        "http response code: 404", "resource_not_found")):
        return SourceNotFoundError(f"no such object: {url}{where} ({text})")
    if any(mark in lowered for mark in ("couldn't connect", "curlcode: 7", "connection refused",
                                        "network_connection", "unable to connect",
                                        "timeout", "timed out")):
        return UnreachableError(f"cannot reach the S3 endpoint{where or ' (AWS)'} for {url}: "
                                f"{text}")
    return RemoteError(f"S3 request for {url}{where} failed: {text}")


class S3Source(Source):
    """An S3 object read by ranged GETs through Arrow's S3 client (``read_at``)."""

    def __init__(self, url: str, storage: StorageOptions):
        super().__init__(url)
        self._storage = storage
        try:
            self._file = s3_filesystem(storage).open_input_file(url[len("s3://"):])
        except OSError as exc:
            raise s3_error(exc, url, storage) from exc

    def _fetch_size(self) -> int:
        return self._file.size()

    def _read(self, offset: int, length: int) -> bytes:
        try:
            return bytes(self._file.read_at(length, offset))
        except OSError as exc:
            raise s3_error(exc, self.path, self._storage) from exc

    def close(self) -> None:
        self._file.close()


def open_source(path: str, storage: StorageOptions | None = None) -> Source:
    """The :class:`Source` of a local path, ``file://``, ``http(s)://`` or ``s3://`` URL."""
    scheme = scheme_of(path)
    if scheme == "file":
        return LocalSource(path)
    storage = storage or storage_options()
    if scheme in ("http", "https"):
        return HttpSource(path, storage)
    return S3Source(path, storage)


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
    pieces = _pieces(ranges, max_in_flight, request_size)
    fetched = _run(pieces, max_in_flight, lambda p: source.read_range(p[1], p[2]))
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
              for _, start, length in _pieces(ranges, max_in_flight, request_size)]

    def fetch(piece: tuple[int, int, int]) -> None:
        source, _, buffer = jobs[piece[0]]
        read_exactly_into(source, piece[1], buffer[piece[1]:piece[1] + piece[2]])

    _run(pieces, max_in_flight, fetch)


def read_exactly_into(source: Source, offset: int, view: memoryview) -> None:
    """All of ``view`` from ``source`` at ``offset``: a short answer is a
    :class:`RemoteError` naming the file and the range."""
    count = source.read_range_into(offset, view)
    if count != len(view):
        raise RemoteError(f"{source.path}: bytes {offset}-{offset + len(view)} ended after "
                          f"{count} bytes; the file is shorter than its footer says")


def _pieces(ranges: Sequence[tuple[int, int]], max_in_flight: int,
            request_size: int | None) -> list[tuple[int, int, int]]:
    """(range index, offset, length) of each request: ranges cut at ``request_size``."""
    if max_in_flight < 1:
        raise OptionError(f"max_in_flight={max_in_flight} must be at least 1")
    pieces: list[tuple[int, int, int]] = []
    for index, (offset, length) in enumerate(ranges):
        step = request_size or max(length, 1)
        pieces.extend((index, start, min(step, offset + length - start))
                      for start in range(offset, offset + length, step))
    return pieces


def _run(pieces: list[tuple[int, int, int]], max_in_flight: int, fetch: Any) -> list[Any]:
    if len(pieces) <= 1 or max_in_flight == 1:
        return [fetch(piece) for piece in pieces]
    with ThreadPoolExecutor(min(max_in_flight, len(pieces)),
                            thread_name_prefix="gpuframe-range") as pool:
        return list(pool.map(fetch, pieces))


@dataclass(frozen=True)
class StoreProbe:
    """What one process measured of a store (:func:`probe_storage`), rates in bytes/s.

    ``latency_s``: the time to first byte of a small read; ``stream_bandwidth``: one request's
    transfer rate when it is the only one; ``bandwidth``: what ``requests_at_once`` reads of
    ``request_size`` bytes got together at the knee of the probe's curve, where doubling them
    stopped paying, each taking ``request_seconds`` on average there. Little's law holds at the
    knee: ``requests_at_once = bandwidth x request_seconds / request_size``."""

    latency_s: float
    stream_bandwidth: float
    bandwidth: float
    request_seconds: float = 0.0
    """Mean seconds one request took at the knee; 0: not measured (as one request alone)."""
    request_size: int = 0
    """Bytes of each read at the knee."""
    requests_at_once: int = 1
    """Reads at once at the knee."""

    @property
    def loaded_bandwidth(self) -> float:
        """One request's transfer rate while the store delivers :attr:`bandwidth`: its time at
        the knee less one latency (at least a tenth of it, when the two are too close to tell
        apart). Below :attr:`stream_bandwidth` where requests at once slow each other down."""
        if self.request_seconds <= 0 or self.request_size <= 0:
            return self.stream_bandwidth
        transfer = max(self.request_seconds - self.latency_s, self.request_seconds / 10)
        return self.request_size / transfer


@dataclass(frozen=True)
class Concurrency:
    """Requests in flight and their size for one store, and the measurements behind them.

    Little's law: requests in flight = rate x time each spends in flight. ``readers`` tasks
    read at once (every worker thread) and share the store's ``bandwidth``, so each task's
    share serves ``share / request_size`` requests a second. Each request spends ``latency``
    waiting and ``request_size / stream_bandwidth`` transferring, where ``stream_bandwidth`` is
    one request's rate *while the store delivers its bandwidth*, measured at the knee of the
    probe's curve (:attr:`StoreProbe.loaded_bandwidth`), not alone: requests at once slow each
    other down (3 requests of a loopback server that gave one alone 2.5 GB/s got ~1 GB/s each,
    H200 host), and the rate alone chose 3 requests where 16 read 4x as fast. So
    ``share / stream_bandwidth + latency * share / request_size`` requests keep a task's share
    busy; at the probe's request size they add up, over all readers, to the reads at once at
    its knee. The request size itself is chosen first, from latency and the rate of one request
    alone (``alone_bandwidth``), so that latency is at most :data:`LATENCY_SHARE` of each
    request's time (:func:`choose_request_size`).
    """

    latency_s: float
    bandwidth: float
    requests_in_flight: int
    request_size: int
    source: str = "measured"
    stream_bandwidth: float = 0.0
    """One request's transfer rate while the store delivers :attr:`bandwidth`; 0: the same as
    :attr:`bandwidth`."""
    readers: int = 1
    """Tasks reading at once, each with :attr:`requests_in_flight` requests; they share
    :attr:`bandwidth`."""
    mean_request: int = 0
    """The mean request a plan makes, when its ranges are shorter than :attr:`request_size`
    (:func:`fit_to_ranges`); 0: not fitted."""
    alone_bandwidth: float = 0.0
    """One request's transfer rate with no other request at once; 0: not measured."""
    probed_at_once: int = 0
    """Reads at once, over all probes, where the store's rate stopped growing; 0: not
    measured."""

    @property
    def bytes_in_flight(self) -> int:
        return self.requests_in_flight * self.request_size

    @property
    def share(self) -> float:
        """The bandwidth one reading task can count on."""
        return self.bandwidth / max(1, self.readers)

    def request_size_for(self, nbytes: int) -> int:
        """The request size for one fetch of ``nbytes``: the chosen size, or smaller, so that
        each request in flight makes :data:`WAVES` requests (not below
        :data:`MIN_REQUEST_SIZE`); a configured size is kept as it is."""
        if self.source != "measured":
            return self.request_size
        waves = math.ceil(nbytes / (max(1, self.requests_in_flight) * WAVES))
        return min(self.request_size, max(MIN_REQUEST_SIZE, waves))

    def __repr__(self) -> str:
        if self.source != "measured":
            return (f"<Concurrency {self.source}: {self.requests_in_flight} requests of "
                    f"{_human(self.request_size)} in flight>")
        stream = self.stream_bandwidth or self.bandwidth
        readers = f" over {self.readers} readers" if self.readers > 1 else ""
        alone = (f"{self.alone_bandwidth / 1e6:.1f} MB/s per request alone, "
                 if self.alone_bandwidth else "")
        knee = f" at {self.probed_at_once} at once" if self.probed_at_once else ""
        mean = (f" ({_human(self.mean_request)} on average for this plan)"
                if self.mean_request else "")
        return (f"<Concurrency measured: latency {self.latency_s * 1e6:.0f} us, "
                f"bandwidth {self.bandwidth / 1e6:.1f} MB/s{readers}{knee} ({alone}"
                f"{stream / 1e6:.1f} MB/s per request{' under load' if alone else ''}) -> "
                f"{self.requests_in_flight} requests of {_human(self.request_size)}{mean} "
                f"in flight>")


def _human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes} B"


def littles_law(latency_s: float, bandwidth: float, request_size: int,
                max_in_flight: int, stream_bandwidth: float | None = None) -> tuple[int, int]:
    """(requests in flight, request size) that keep a store of ``bandwidth`` busy; see
    :class:`Concurrency`. ``stream_bandwidth``: one request's transfer rate while the store
    delivers ``bandwidth`` (default ``bandwidth``).

    When more than ``max_in_flight`` requests would be needed, requests grow instead, so the
    bytes in flight still cover ``bandwidth * latency_s``.
    """
    bandwidth = max(0.0, bandwidth)
    stream = stream_bandwidth if stream_bandwidth and stream_bandwidth > 0 else bandwidth
    streams = bandwidth / stream if stream > 0 else 1.0
    in_flight_bytes = max(0.0, latency_s) * bandwidth
    wanted = max(1, math.ceil(max(1.0, streams) + in_flight_bytes / request_size - 1e-9))
    if wanted <= max_in_flight:
        return wanted, request_size
    if max_in_flight == 1:
        return 1, request_size
    return max_in_flight, max(request_size, math.ceil(in_flight_bytes / (max_in_flight - 1)))


def choose_request_size(latency_s: float, stream_bandwidth: float, streams: float = 1.0,
                        fragment_bytes: int | None = None) -> int:
    """Bytes per request such that latency is at most :data:`LATENCY_SHARE` of its time.

    A request costs ``latency_s`` (time to first byte, with the client's and server's
    per-request work) plus ``size / stream_bandwidth``; so ``size = (1 - share) / share x
    latency x stream_bandwidth``, rounded up to a power of two within
    [:data:`MIN_REQUEST_SIZE`, :data:`MAX_REQUEST_SIZE`]. A fragment of ``fragment_bytes``
    must still split into ``streams`` requests (the concurrent streams the store needs), so
    the size is at most ``fragment_bytes / streams``.
    """
    wanted = (1 - LATENCY_SHARE) / LATENCY_SHARE * max(0.0, latency_s) * max(0.0,
                                                                              stream_bandwidth)
    size = MIN_REQUEST_SIZE
    while size < wanted and size < MAX_REQUEST_SIZE:
        size *= 2
    if fragment_bytes:
        while size > MIN_REQUEST_SIZE and size * max(1.0, streams) > fragment_bytes:
            size //= 2
    return size


def choose_concurrency(probes: Sequence[StoreProbe], storage: StorageOptions,
                       readers: int | None = None,
                       fragment_bytes: int | None = None) -> Concurrency:
    """Requests in flight and their size from probes made at once by each reading process.

    The probes ran concurrently (one per worker), so each saw the store shared as it will be
    during the read: the store's bandwidth is the sum of what each got at its knee; latency,
    one request's rate alone and one request's rate under that load
    (:attr:`StoreProbe.loaded_bandwidth`) are their medians. ``readers``: the tasks that will
    read at once (default: one per probe); each gets ``bandwidth / readers``, and as many
    requests as Little's law asks for that share with the loaded rate (:func:`littles_law`),
    so that at the probes' request size all readers together keep as many requests in flight
    as the probes had at their knee. A ``task_size`` option fixes the request size.
    """
    if not probes:
        raise OptionError("choose_concurrency needs at least one probe")
    latency = _median([p.latency_s for p in probes])
    alone = _median([p.stream_bandwidth for p in probes])
    loaded = _median([p.loaded_bandwidth for p in probes])
    bandwidth = sum(p.bandwidth for p in probes)
    readers = max(1, readers or len(probes))
    share = bandwidth / readers
    streams = share / loaded if loaded > 0 else 1.0
    size = storage.task_size or choose_request_size(latency, min(alone, share) if share > 0
                                                    else alone, streams, fragment_bytes)
    count, request_size = littles_law(latency, share, size, storage.max_requests_in_flight,
                                      loaded)
    return Concurrency(latency, bandwidth, count, request_size, stream_bandwidth=loaded,
                       readers=readers, alone_bandwidth=alone,
                       probed_at_once=sum(p.requests_at_once for p in probes))


def fit_to_ranges(concurrency: Concurrency, lengths: Sequence[int],
                  max_in_flight: int) -> Concurrency:
    """``concurrency`` for the requests a plan will make: ranges (column chunks) shorter than
    the request size are one request each, and more of them must be in flight to cover the
    same bandwidth x latency. Little's law again, with the plan's mean request; never fewer
    requests in flight than chosen before. Configured concurrency is returned as is."""
    lengths = [n for n in lengths if n > 0]
    if concurrency.source != "measured" or not lengths:
        return concurrency
    size = concurrency.request_size
    mean = math.ceil(sum(lengths) / sum(math.ceil(n / size) for n in lengths))
    if mean >= size:
        return concurrency
    count, _ = littles_law(concurrency.latency_s, concurrency.share, mean, max_in_flight,
                           concurrency.stream_bandwidth)
    return dataclasses.replace(concurrency, mean_request=mean,
                               requests_in_flight=max(count, concurrency.requests_in_flight))


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


_measured: dict[tuple[str, str, str | None], tuple[tuple[StoreProbe, ...], int]] = {}
_measured_lock = threading.Lock()


def _store_of(path: str, storage: StorageOptions) -> tuple[str, str, str | None]:
    """What one measurement covers: a scheme and host (and the S3 endpoint)."""
    if "://" not in path or path.startswith("file://"):
        return ("file", "", None)
    parsed = urlparse(path)
    return (parsed.scheme, parsed.netloc, storage.endpoint if parsed.scheme == "s3" else None)


def forget_measurements() -> None:
    """Drop every store's probes, so the next read measures again."""
    with _measured_lock:
        _measured.clear()


def remembered_concurrency(path: str, storage: StorageOptions,
                           probe: Callable[[], tuple[Sequence[StoreProbe], int]],
                           fragment_bytes: int | None = None) -> Concurrency:
    """The concurrency for ``path``'s store: configured, or chosen (:func:`choose_concurrency`)
    for this read's ``storage`` options and ``fragment_bytes`` from the store's probes, made
    by ``probe()`` (the probes, and the readers that will share the store) on its first read.

    An explicit ``requests_in_flight`` option wins over any measurement. The probes are kept
    per store (scheme, host and S3 endpoint) for the life of the process, so only the first
    read of a store pays for them (:func:`forget_measurements` clears them); the choice is
    made again for each read, since it depends on the read: a plan of 128 MiB partitions caps
    requests at 4 MiB where 32 streams must share a partition, and a choice kept from it held
    a GPU's reads of 4 GiB partitions to 4 MiB requests (H200: 3.64 GiB/s, 16 MiB 4.66)."""
    if storage.requests_in_flight is not None:
        return Concurrency(0.0, 0.0, storage.requests_in_flight,
                           storage.task_size or DEFAULT_REQUEST_SIZE, "configured")
    store = _store_of(path, storage)
    with _measured_lock:
        known = _measured.get(store)
    if known is None:
        probes, readers = probe()
        with _measured_lock:
            known = _measured.setdefault(store, (tuple(probes), readers))
    return choose_concurrency(known[0], storage, readers=known[1],
                              fragment_bytes=fragment_bytes)


def measure_storage(source: Source, storage: StorageOptions | None = None, probes: int = 3,
                    fragment_bytes: int | None = None) -> Concurrency:
    """Requests in flight and their size for ``source``'s store, measured in this process
    (:func:`probe_storage`, then :func:`choose_concurrency` for one reader); the probe is
    remembered per store (:func:`remembered_concurrency`). A read on a cluster measures on
    its workers instead (``gpuframe.io.read.measure_on_workers``)."""
    storage = storage or storage_options()
    return remembered_concurrency(
        source.path, storage, lambda: ([probe_storage(source, storage, probes)], 1),
        fragment_bytes)


def probe_storage(source: Source, storage: StorageOptions | None = None,
                  probes: int = 3) -> StoreProbe:
    """Latency, one request's rate, and the knee of the store's rate against requests at once,
    from a few first reads in this process.

    Latency is the fastest of ``probes`` 4 KiB reads; one request's rate alone comes from reads
    of :data:`BANDWIDTH_PROBE` bytes (at least ``task_size``) one after another, less that
    latency each. From those two the request size (:func:`choose_request_size`, or
    ``task_size``; at most :data:`PROBE_READ_BYTES` and half the file), and reads of that size,
    2, 4, 8... at once (up to :data:`PARALLEL_PROBES` and the requests-in-flight limit), while
    doubling them still raises the rate by :data:`PROBE_GAIN`. The knee is the count that got
    the highest rate, the last step's too when it gained less than that but gained: near a
    flat top the ramp's stop moves with noise, and too few requests in flight cost more than
    too many (H200 host, loopback HTTP, two loans: knees at 32 and at 8 reads at once, 7.3 and
    6.2 GB/s; reads of 1.8 GiB with 32 requests 5.26 GiB/s, with 9 4.50, fixed 64 never slower
    than fixed 16). Its rate and the mean time of one read there go into the probe, so Little's
    law can use the response time under load (:class:`Concurrency`). One read alone is not
    timed again at that size: latency plus its transfer at the rate alone.

    A step that did not gain is read again and the better of its two rates counts: one pause
    (a collection, a busy neighbour) in a step of 16 stopped the ramp at 8 reads of a store
    that serves 32 (2-core CI host, full suite).

    Each step reads for :data:`PROBE_STEP_SECONDS`, and its last reads end up to one read's
    time later (~16 latencies, by the request size's rule); at most 7 steps, the one past the
    knee twice. Peak memory: the buffers of one step, at most :data:`PROBE_MEMORY` (256 MiB; 32 reads
    of 8 MiB or less take 32 x their size). On a 16-core H200 host a loopback HTTP server gave
    one 4 MiB read alone 2.5 GB/s and 16 of 16 MiB at once 12 GB/s; the rate alone in Little's
    law chose 3 requests of 32 MiB (2.9 GiB/s, 0.25x of 16 x 16 MiB)."""
    storage = storage or storage_options()
    size = source.size()
    probe = min(4096, size)
    latencies = []
    for i in range(max(1, probes)):
        start = time.perf_counter()
        source.read_range(min(i * probe, max(0, size - probe)), probe)
        latencies.append(time.perf_counter() - start)
    latency = min(latencies)
    half = max(probe, size // 2)
    length = min(max(storage.task_size or 0, BANDWIDTH_PROBE), PROBE_READ_BYTES, half)
    stream = _transfer_rate(source, length, latency)
    each = min(storage.task_size or choose_request_size(latency, stream), PROBE_READ_BYTES,
               half)
    if each <= 0 or stream <= 0:  # an empty file: nothing to time
        return StoreProbe(latency, stream, stream)
    seconds = latency + each / stream
    bandwidth, knee = each / seconds, 1
    most = min(PARALLEL_PROBES, storage.max_requests_in_flight)
    span = max(1, size - each + 1)
    together = 2
    while together <= most:
        offsets = [(i * each) % span for i in range(together)]
        _read_together(source, offsets, probe, memoryview(bytearray(probe)))  # connect first
        rate, per_read = _loaded_rate(source, offsets, each)
        if rate < bandwidth * PROBE_GAIN:  # the top, or a pause mid-step: read it again
            rate, per_read = max((rate, per_read), _loaded_rate(source, offsets, each))
        grew = rate >= bandwidth * PROBE_GAIN
        if rate > bandwidth:
            bandwidth, seconds, knee = rate, per_read, together
        if not grew:
            break
        together *= 2
    return StoreProbe(latency, stream, bandwidth, seconds, each, knee)


def probe_store(path: str, storage: StorageOptions) -> StoreProbe:
    """:func:`probe_storage` of the file at ``path``: the measuring task run on a worker."""
    with open_source(path, storage) as source:
        return probe_storage(source, storage)


def _read_together(source: Source, offsets: Sequence[int], length: int, buffer: memoryview,
                   until: float = 0.0) -> list[tuple[int, int, float]]:
    """(bytes, reads, seconds) of each thread reading ``length`` bytes at its offset, all at
    once (a thread each); each thread reads on, the next ranges of the file in turn, until
    ``until`` (a ``time.perf_counter()``) has passed.

    Into ``buffer``, slices of ``length`` that threads take in turn (several threads share one
    where it holds fewer slices than threads: the bytes are thrown away), as reads fill their
    sparse copies: a new bytes object a read would time the client's page faults instead of the
    store (16 threads of 4 MiB ``read_range`` got 1 GiB/s of a loopback server from which
    ``read_ranges_into`` got 9 on a 16-core host)."""
    slots = max(1, len(buffer) // max(1, length))
    stride = len(offsets) * length
    span = max(1, source.size() - length + 1)
    start = time.perf_counter()

    def read_on(index: int) -> tuple[int, int, float]:
        slot = index % slots
        view, offset = buffer[slot * length:(slot + 1) * length], offsets[index]
        nbytes = reads = 0
        while reads == 0 or time.perf_counter() < until:
            nbytes += source.read_range_into(offset, view)
            reads += 1
            offset = (offset + stride) % span
        return nbytes, reads, max(time.perf_counter() - start, 1e-9)

    if len(offsets) == 1:
        return [read_on(0)]
    with ThreadPoolExecutor(len(offsets), thread_name_prefix="gpuframe-probe") as pool:
        return list(pool.map(read_on, range(len(offsets))))


def _probe_buffer(together: int, length: int) -> memoryview:
    """Room for ``together`` reads of ``length`` bytes, at most :data:`PROBE_MEMORY` of it
    (never less than one read)."""
    slots = max(1, min(together, PROBE_MEMORY // max(1, length)))
    return memoryview(bytearray(slots * length))


def _transfer_rate(source: Source, length: int, latency: float) -> float:
    """Bytes a second of one request alone: reads of ``length`` bytes one after another for
    :data:`PROBE_STEP_SECONDS`.

    Transfer time is what the reads took beyond one latency each; when the two are too close
    to tell apart (tiny files, noise), count at least a tenth of it rather than divide by
    ~0."""
    [(nbytes, reads, elapsed)] = _read_together(source, [0], length, _probe_buffer(1, length),
                                                time.perf_counter() + PROBE_STEP_SECONDS)
    return nbytes / max(elapsed - reads * latency, elapsed / 10)


def _loaded_rate(source: Source, offsets: Sequence[int], length: int) -> tuple[float, float]:
    """(bytes a second, mean seconds of one read) of reading ``length`` bytes at each offset,
    all at once, for :data:`PROBE_STEP_SECONDS`: what the store delivers to that many requests,
    and the time each takes meanwhile, by Little's law: reads at once / reads a second.

    Each thread's bytes and reads a second count up to its own last read's end: a thread whose
    last read ended early waited for the others' (up to one read's time) reading nothing, and
    the whole step's time would count that wait as the store's."""
    threads = _read_together(source, offsets, length, _probe_buffer(len(offsets), length),
                             time.perf_counter() + PROBE_STEP_SECONDS)
    rate = sum(nbytes / seconds for nbytes, _, seconds in threads)
    return rate, len(threads) / sum(reads / seconds for _, reads, seconds in threads)


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
