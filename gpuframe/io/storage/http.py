"""HTTP(S) URLs, read with Range requests over urllib3's keep-alive connections.

Certificates are verified, the environment's proxies are taken, a URL's ``user:password@`` goes
as Basic authentication, and ``http_headers`` go with every request but never follow a redirect
to another host. A server that ignores Range is refused: gpuframe never downloads whole files.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import urllib.request
from collections.abc import Callable, Mapping
from http.client import HTTPException
from typing import TypedDict, TypeVar
from urllib.parse import unquote, urlparse

import certifi
import urllib3
from urllib3.exceptions import (
    HTTPError,
    IncompleteRead,
    MaxRetryError,
    NewConnectionError,
    ResponseError,
)
from urllib3.exceptions import TimeoutError as NoAnswer

from ..errors import (
    AccessDeniedError,
    FileChangedError,
    RangeNotSupportedError,
    RemoteError,
    SourceNotFoundError,
    UnreachableError,
)
from .base import KvikioOpen, RemoteVersion, Source, StorageOptions

Received = TypeVar("Received")

_http_lock = threading.Lock()
_http_pools: dict[tuple[str | None, str, int], urllib3.PoolManager] = {}
_SPAN = re.compile(r"bytes (\d+)-(\d+)/\d+")
"""A 206's Content-Range: the first and last byte sent, of the file's total."""
HTTP_REDIRECTS = 30
"""Redirects one request follows, as requests does: presigned and CDN URLs redirect."""


class _PoolOptions(TypedDict, total=False):
    """What :func:`_http_pool` gives each host's connection pool (urllib3's
    ``connection_pool_kw``): connections kept, and the authorities trusted (a file or a
    folder)."""

    maxsize: int
    block: bool
    cert_reqs: str
    ca_certs: str
    ca_cert_dir: str


def _http_pool(proxy: str | None, ca_bundle: str, connections: int) -> urllib3.PoolManager:
    """The process's keep-alive connections, straight to each host or through ``proxy``, up to
    ``connections`` kept open per host: they outlive the thread pool of each read, so later
    reads reuse them. Certificates are verified against ``ca_bundle`` (a file or a folder).

    urllib3 itself rather than requests: a selective read makes hundreds to thousands of small
    requests, and requests' own work costs more than twice urllib3's client CPU a request
    (benchmarks/results/2026-11-25-figures-from-io-comments.md)."""
    key = (proxy, ca_bundle, connections)
    with _http_lock:
        if key not in _http_pools:
            options: _PoolOptions = {"maxsize": connections, "block": False,
                                     "cert_reqs": "CERT_REQUIRED"}
            if os.path.isdir(ca_bundle):
                options["ca_cert_dir"] = ca_bundle
            else:
                options["ca_certs"] = ca_bundle
            if proxy is None:
                _http_pools[key] = urllib3.PoolManager(num_pools=16, **options)
            else:
                _, login = _login(proxy)
                _http_pools[key] = urllib3.ProxyManager(
                    proxy, num_pools=16, proxy_headers=urllib3.make_headers(
                        proxy_basic_auth=login) if login else None, **options)
        return _http_pools[key]


def _proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url``, as requests chooses it: ``<scheme>_proxy``
    or ``all_proxy``, unless ``no_proxy`` covers the host; one without a scheme is http."""
    parsed = urlparse(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parsed.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parsed.hostname or ""):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _ca_bundle() -> str:
    """The authorities HTTPS servers' certificates must chain to, as requests chooses them:
    those the ``REQUESTS_CA_BUNDLE`` or ``CURL_CA_BUNDLE`` variable names (a file or a folder: a
    site's own authority), else certifi's bundle."""
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

    As requests would: certificates verified (:func:`_ca_bundle`), the environment's proxies
    (:func:`_proxy_for`, credentials in the proxy's URL), a URL's ``user:password@`` sent as
    Basic authentication, up to :data:`HTTP_REDIRECTS` redirects followed, no retries. Unlike
    requests: no ``~/.netrc`` credentials, no cookies between requests, no SOCKS proxies.

    ``http_headers`` go with every request (an ``Authorization`` among them replaces the URL's
    ``user:password@``); like ``Authorization``, none of them follows a redirect to another
    host, so a token is never handed to a CDN or a presigned URL's store."""

    def __init__(self, url: str, storage: StorageOptions, version: RemoteVersion | None = None):
        super().__init__(url, version, storage.check_version)
        self._timeout = storage.timeout
        self._slowest_rate = storage.slowest_rate
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

    def _get(self, headers: Mapping[str, str], method: str = "GET") -> urllib3.BaseHTTPResponse:
        """The answer, its body not yet read; a failure to connect, or a timeout, is an
        :class:`UnreachableError` (urllib3 wraps what ended its one try in ``MaxRetryError``),
        more than :data:`HTTP_REDIRECTS` redirects a :class:`RemoteError`."""
        try:
            response = self._pool.urlopen(method, self._url, headers={**self._headers, **headers},
                                          timeout=self._timeout, retries=self._retries,
                                          preload_content=False)
        except (HTTPError, OSError) as exc:
            cause = exc.reason if isinstance(exc, MaxRetryError) else exc
            if isinstance(cause, ResponseError):  # the only retries allowed are redirects
                raise RemoteError(f"{method} {self.path} was redirected more than "
                                  f"{HTTP_REDIRECTS} times (a redirect loop?): {cause}") from exc
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
        self._ranged("bytes=0-0")  # its answer notes the size, or it raises
        return self.size()

    def _ranged_response(self, spec: str) -> urllib3.BaseHTTPResponse:
        """The streamed answer to a Range GET: 206 holding the bytes asked (:func:`_check_span`),
        or 416 past the end (the file's size and version noted from either,
        :meth:`Source._seen`); else an error (the connection dropped rather than the whole file
        read)."""
        response = self._get({"Range": spec, "Accept-Encoding": "identity"})
        if response.status not in (206, 416):
            response.close()
            raise RangeNotSupportedError(
                f"{self.path}: the server ignored 'Range: {spec}' (HTTP "
                f"{response.status}); gpuframe reads byte ranges and will not download "
                "whole files"
            )
        if response.status == 206 or "Content-Range" in response.headers:
            content_range = response.headers.get("Content-Range", "")
            try:
                total = _total_from(content_range, self.path)
                if response.status == 206:
                    _check_span(spec, content_range, total, self.path)
                self._seen(_version(total, response.headers))
            except (FileChangedError, RangeNotSupportedError):
                response.close()
                raise
            self._size = total
        return response

    def _received(self, response: urllib3.BaseHTTPResponse, spec: str,
                  read: Callable[[urllib3.BaseHTTPResponse], Received]) -> Received:
        """``read(response)``: a body that breaks off is a :class:`RemoteError` naming the
        range (urllib3 raises its ``HTTPError``, http.client its ``HTTPException``), and so is
        one slower than ``slowest_rate``: the socket's timeout bounds each wait for bytes, not
        the whole body, so a watchdog shuts the connection once the body's time is up (the
        read itself runs in one call, its GIL released)."""
        length = int(response.headers.get("Content-Length") or 0)
        allowed = self._timeout + length / self._slowest_rate
        given_up = threading.Event()
        watchdog = threading.Timer(allowed, _cut, (response, given_up))
        watchdog.daemon = True
        watchdog.start()
        try:
            return read(response)
        except (HTTPError, HTTPException, OSError) as exc:
            response.close()
            if given_up.is_set():
                raise RemoteError(f"{self.path}: the response to 'Range: {spec}' ({length} "
                                  f"bytes) took over {allowed:.0f} s, slower than "
                                  f"slowest_rate={self._slowest_rate:.0f} bytes/s: given up"
                                  ) from exc
            raise RemoteError(f"{self.path}: the response to 'Range: {spec}' broke off: "
                              f"{exc}") from exc
        finally:
            watchdog.cancel()

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
        return self.size(), data


def _body(response: urllib3.BaseHTTPResponse) -> bytes:
    """A wanted body in one read of its whole length, which fills the buffer from the socket
    with the GIL released: reading in chunks joined in Python holds it, which caps a process's
    rate (benchmarks/results/2026-11-25-figures-from-io-comments.md). Reading to the end
    returns the connection to the keep-alive pool."""
    return response.read()


def _body_into(response: urllib3.BaseHTTPResponse, view: memoryview) -> int:
    """:func:`_body` straight into ``view``: bytes that arrived. urllib3's ``readinto`` reads
    into a new bytes object and copies it into ``view`` with the GIL held; http.client's, under
    it, receives from the socket into ``view`` itself, about twice the rate at a quarter of the
    CPU (benchmarks/results/2026-11-25-figures-from-io-comments.md). A body shorter than it
    announced raises ``IncompleteRead``, as urllib3's reads do; reading the rest (none, unless
    the server sent more than asked) through urllib3 returns the connection to the keep-alive
    pool (its ``drain_conn``, which counts the bytes it saw against the length, would close
    it)."""
    body = response._original_response if isinstance(response, urllib3.HTTPResponse) else None
    if body is None:
        raise TypeError(f"{type(response).__name__} is not a streamed http.client response")
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


def _cut(response: urllib3.BaseHTTPResponse, given_up: threading.Event) -> None:
    """Shut the connection under ``response``, so a read blocked on it returns, ``given_up``
    set first (the read that wakes tells why it did by it)."""
    given_up.set()
    connection = getattr(response, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # already closed
            pass


def _version(size: int, headers: Mapping[str, str]) -> RemoteVersion:
    return RemoteVersion(size, headers.get("ETag"), headers.get("Last-Modified"))


def _check_span(spec: str, content_range: str, total: int, url: str) -> None:
    """Raise :class:`RangeNotSupportedError` where a 206's Content-Range ('bytes 0-9/1234') is
    not the span of ``spec`` ('bytes=10-19', 'bytes=-64'), clipped to the file's ``total``
    bytes: a server that answers with other bytes than asked would have them read as the
    asked ones."""
    first, _, last = spec[len("bytes="):].partition("-")
    start = max(0, total - int(last)) if first == "" else int(first)
    end = total - 1 if first == "" or last == "" else min(int(last), total - 1)
    answered = _SPAN.fullmatch(content_range.strip())
    if answered is None or (int(answered[1]), int(answered[2])) != (start, end):
        raise RangeNotSupportedError(f"{url}: the server answered 'Range: {spec}' with "
                                     f"'Content-Range: {content_range}', other bytes than "
                                     "asked")


def _total_from(content_range: str | None, url: str) -> int:
    """The total of 'bytes 0-9/1234' or 'bytes */1234'."""
    if not content_range or "/" not in content_range or content_range.endswith("/*"):
        raise RangeNotSupportedError(f"{url}: the server sent no usable Content-Range header "
                                     f"({content_range!r})")
    return int(content_range.rsplit("/", 1)[1])


