"""HTTP(S) range reads against the session's Range-serving servers."""

from __future__ import annotations

import base64
import io
import pickle
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest

import gpuframe
from gpuframe.errors import GpuframeError
from gpuframe.io.errors import (
    AccessDeniedError,
    FileChangedError,
    RangeNotSupportedError,
    RemoteError,
    SourceNotFoundError,
    UnreachableError,
)
from gpuframe.io.storage import open_source
from gpuframe.io.storage.base import (
    KvikioOpen,
    RemoteVersion,
    StorageOptions,
    storage_options,
)
from gpuframe.io.storage.ranges import RangeFile, read_ranges, read_ranges_into

PART = "flat/part-0.parquet"


def open_range_file(url: str) -> io.BufferedReader:
    return io.BufferedReader(RangeFile(open_source(url)), buffer_size=2**14)


def test_http_file_object_reads_ranges_over_keep_alive(dataset_dir, http_server):
    data = (dataset_dir / PART).read_bytes()
    http_server.reset()
    with open_range_file(f"{http_server.url}/{PART}") as handle:
        assert handle.seekable()
        handle.seek(-12, 2)
        assert handle.read() == data[-12:]
        handle.seek(100)
        assert handle.read(50) == data[100:150]
    gets = [r for r in http_server.log if r.method == "GET"]
    assert gets and all(r.status == 206 for r in gets)
    assert http_server.bytes_served() < len(data) and http_server.whole_file_gets() == 0
    assert http_server.connections <= 1  # 0 when an earlier test's connection is still open
    opened = http_server.connections
    with open_range_file(f"{http_server.url}/{PART}") as handle:
        handle.seek(10)
        assert handle.read(10) == data[10:20]
    assert http_server.connections == opened, "a later read must reuse the open connection"


def test_http_tail_is_one_suffix_request(dataset_dir, http_server):
    data = (dataset_dir / PART).read_bytes()
    http_server.reset()
    source = open_source(f"{http_server.url}/{PART}")
    size, tail = source.read_tail(4096)
    assert (size, tail) == (len(data), data[-4096:])
    assert [(r.method, r.range) for r in http_server.log] == [("GET", "bytes=-4096")]


def test_a_remote_source_holds_to_the_version_planning_saw(dataset_dir, http_server):
    data = (dataset_dir / PART).read_bytes()
    url = f"{http_server.url}/{PART}"
    seen = open_source(url)
    assert seen.read_tail(8) == (len(data), data[-8:])
    version = seen.version
    assert version.size == len(data) and version.etag and version.last_modified
    http_server.reset()
    pinned = open_source(url, version=version)
    assert pinned.size() == len(data) and http_server.log == []  # its size asks nothing
    assert pinned.read_range(4, 10) == data[4:14]
    for changed, what in ((version._replace(etag='"older"'), r"etag '\"older\"' -> "),
                          (version._replace(size=len(data) + 1),
                           f"size {len(data) + 1} -> {len(data)}")):
        with pytest.raises(FileChangedError, match=f"{PART} changed since it was planned "
                                                   f"\\({what}") as caught:
            open_source(url, version=changed).read_range(4, 10)
        assert caught.value.path == url
        assert pickle.loads(pickle.dumps(caught.value)).path == url  # from a worker
    bare = open_source(f"{http_server.url}/novalidator/{PART}")
    bare.read_range(0, 4)
    assert bare.version == RemoteVersion(len(data)) and not bare.version.validated


def test_a_server_whose_etag_moves_is_read_with_check_version_off(dataset_dir, http_server):
    data = (dataset_dir / PART).read_bytes()
    url = f"{http_server.url}/unstable-etag/{PART}"
    checked = open_source(url)
    checked.read_range(0, 4)
    with pytest.raises(FileChangedError, match="check_version=False"):
        checked.read_range(4, 4)
    trusting = open_source(url, storage_options(check_version=False))
    assert trusting.read_range(0, 4) == data[0:4]
    first = trusting.version
    assert [trusting.read_range(i, 4) for i in (4, 8)] == [data[4:8], data[8:12]]
    assert trusting.version == first  # the first answer's; the others were not checked


def test_a_source_confirms_its_version_with_one_head(dataset_dir, http_server):
    """What KvikIO's reads, which check no answer, rely on once their bytes are in."""
    url = f"{http_server.url}/{PART}"
    seen = open_source(url)
    seen.read_range(0, 4)
    http_server.reset()
    open_source(url, version=seen.version).confirm_version()
    assert [r.method for r in http_server.log] == ["HEAD"]
    older = seen.version._replace(etag='"older"')
    with pytest.raises(FileChangedError, match=f"{PART} changed since it was planned"):
        open_source(url, version=older).confirm_version()
    open_source(url, storage_options(check_version=False), older).confirm_version()


@pytest.fixture
def no_proxies(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                 "ALL_PROXY", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)


def test_kvikio_opens_plain_http_urls_alone(dataset_dir, http_server, monkeypatch, no_proxies):
    """KvikIO's libcurl sends none of the read's headers or logins and goes through no proxy of
    the environment's: such URLs keep to gpuframe's own requests (Source.kvikio_args None)."""
    size = (dataset_dir / PART).stat().st_size
    url = f"{http_server.url}/{PART}"
    assert open_source(url, version=RemoteVersion(size)).kvikio_args() == KvikioOpen(
        "open_http", {"url": url, "nbytes": size}, StorageOptions().timeout)
    bearer = storage_options(http_headers={"Authorization": "Bearer t"})
    assert open_source(url, bearer).kvikio_args() is None
    assert open_source(url.replace("//", "//user:pw@")).kvikio_args() is None
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:1")
    monkeypatch.setenv("no_proxy", "")
    assert open_source(url).kvikio_args() is None
    https = "https://files.invalid/part.parquet"
    assert open_source(https, version=RemoteVersion(10)).kvikio_args().kwargs == {
        "url": https, "nbytes": 10}
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/site-ca.pem")  # a site's own authority
    assert open_source(https, version=RemoteVersion(10)).kvikio_args() is None


def test_http_errors_name_the_url(http_server, closed_port):
    with pytest.raises(SourceNotFoundError, match=r"127\.0\.0\.1.*nothere\.parquet.*404"):
        open_source(f"{http_server.url}/nothere.parquet").read_tail(10)
    with pytest.raises(AccessDeniedError, match=f"forbidden/{PART}"):
        open_source(f"{http_server.url}/forbidden/{PART}").read_range(0, 10)
    http_server.reset()
    with pytest.raises(RangeNotSupportedError, match=f"norange/{PART}"):
        open_source(f"{http_server.url}/norange/{PART}").read_range(0, 10)
    url = f"http://127.0.0.1:{closed_port}/{PART}"
    with pytest.raises(UnreachableError, match=f"127.0.0.1:{closed_port}") as info:
        open_source(url).read_range(0, 10)
    assert isinstance(info.value, (GpuframeError, OSError))
    slow = f"{http_server.url}/shaped-1000ms-1MBps/{PART}"
    with pytest.raises(UnreachableError, match=f"shaped-1000ms-1MBps/{PART}: no answer in 0.2 s"):
        open_source(slow, storage_options(timeout=0.2)).read_range(0, 10)


def test_an_answer_of_other_bytes_than_asked_is_refused(dataset_dir, http_server):
    """'/wrongrange/' sends bytes from the file's start, whatever the Range: its Content-Range
    says so, and the bytes would otherwise be read as those asked."""
    data = (dataset_dir / PART).read_bytes()
    source = open_source(f"{http_server.url}/wrongrange/{PART}")
    assert source.read_range(0, 10) == data[:10]
    refused = r"answered 'Range: bytes=100-109' with 'Content-Range: bytes 0-9/\d+', other bytes"
    with pytest.raises(RangeNotSupportedError, match=f"wrongrange/{PART}: the server {refused}"):
        source.read_range(100, 10)
    with pytest.raises(RangeNotSupportedError, match=refused):
        source.read_range_into(100, memoryview(bytearray(10)))


def test_errors_and_reprs_never_show_a_urls_password(http_server, closed_port):
    login = http_server.url.replace("http://", "http://reader:s3cr%40t@")
    source = open_source(f"{login}/nothere.parquet")
    assert "s3cr" not in repr(source) and "reader:***@" in repr(source)
    with pytest.raises(SourceNotFoundError, match=r"reader:\*\*\*@127") as missing:
        source.read_tail(10)
    with pytest.raises(UnreachableError) as unreachable:
        open_source(f"http://reader:s3cr%40t@127.0.0.1:{closed_port}/{PART}").read_range(0, 10)
    for error in (missing.value, unreachable.value):
        assert "s3cr" not in str(error), error


def test_http_goes_through_the_environments_proxy(dataset_dir, http_server, closed_port,
                                                  monkeypatch):
    """As through requests: the proxy ``http_proxy`` names unless ``no_proxy`` covers the host,
    and a proxy's or a file's ``user:password@`` as Basic authentication to it."""
    data = (dataset_dir / PART).read_bytes()
    monkeypatch.setenv("http_proxy", http_server.url.replace("//", "//agent:proxy%20pass@"))
    monkeypatch.setenv("no_proxy", "")
    http_server.reset()
    url = f"http://reader:s3cret@files.invalid/{PART}"
    assert open_source(url).read_range(10, 20) == data[10:30]
    [get] = http_server.log
    assert get.path == f"http://files.invalid/{PART}"  # the absolute form a proxy is asked
    assert get.proxy_authorization == "Basic " + base64.b64encode(b"agent:proxy pass").decode()
    assert get.authorization == "Basic " + base64.b64encode(b"reader:s3cret").decode()
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{closed_port}")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    assert open_source(f"{http_server.url}/{PART}").read_range(10, 20) == data[10:30]


def test_http_headers_go_with_every_request(dataset_dir, http_server):
    """'/bearer/...' answers 401 without the token: every request must carry it."""
    data = (dataset_dir / PART).read_bytes()
    url = f"{http_server.url}/bearer/{PART}"
    with pytest.raises(AccessDeniedError, match=f"bearer/{PART} \\(HTTP 401\\): give "
                                                "credentials as http_headers="):
        open_source(url).size()
    with pytest.raises(AccessDeniedError, match=r"check the http_headers sent \(Authorization\)"
                       ) as info:
        open_source(url, storage_options(http_headers={"Authorization": "Bearer wrong-one"})
                    ).read_range(0, 10)
    assert "wrong-one" not in str(info.value)
    token = {"Authorization": f"Bearer {http_server.token}"}
    http_server.reset()
    source = open_source(url, storage_options(http_headers=token))
    assert source.size() == len(data)
    assert read_ranges(source, [(0, 4), (1000, 3000)], max_in_flight=2, request_size=1024) == [
        data[:4], data[1000:4000]]
    buffer = bytearray(len(data))
    read_ranges_into([(source, [(100, 8)], memoryview(buffer))], max_in_flight=1)
    assert buffer[100:108] == data[100:108] and source.read_tail(16) == (len(data), data[-16:])
    assert {r.method for r in http_server.log} == {"HEAD", "GET"} and len(http_server.log) == 7
    assert {(r.status // 100, r.authorization) for r in http_server.log} == {
        (2, token["Authorization"])}
    login = url.replace("//", "//reader:s3cret@")  # the header replaces the URL's login
    assert open_source(login, storage_options(http_headers=token)).read_range(0, 4) == data[:4]
    assert http_server.log[-1].authorization == token["Authorization"]


class _Redirecting(BaseHTTPRequestHandler):
    """'/away' redirects to 'localhost' (another host than 127.0.0.1 to a client), '/near' to
    127.0.0.1, '/land' answers any Range with 8 bytes; each request's headers are kept."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, dict[str, str]]]

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.seen.append((self.path, dict(self.headers)))
        port = self.server.server_address[1]
        host = {"/away": "localhost", "/near": "127.0.0.1"}.get(self.path)
        if host:
            self.send_response(302)
            self.send_header("Location", f"http://{host}:{port}/land")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(206)
        self.send_header("Content-Range", "bytes 0-7/8")
        self.send_header("Content-Length", "8")
        self.end_headers()
        self.wfile.write(b"landed!!")


def test_http_headers_stay_off_another_host_a_url_redirects_to():
    """Like Authorization (urllib3 drops it), a token in any header must not reach a CDN or a
    presigned URL's store another host serves."""
    handler = type("Handler", (_Redirecting,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        options = storage_options(http_headers={"X-Api-Key": "api-key", "Authorization": "t"})
        base = f"http://127.0.0.1:{server.server_address[1]}"
        for start in ("away", "near"):
            assert open_source(f"{base}/{start}", options).read_range(0, 8) == b"landed!!"
    finally:
        server.shutdown()
        server.server_close()
    sent = [(path, {name for name in headers if name in ("X-Api-Key", "Authorization")})
            for path, headers in handler.seen]
    both = {"X-Api-Key", "Authorization"}
    assert sent == [("/away", both), ("/land", set()), ("/near", both), ("/land", both)]


def test_http_headers_reach_the_workers(engine, dataset_dir, http_server):
    names = ["flat/part-0.parquet", "flat/part-1.parquet"]
    frame = gpuframe.read_parquet([f"{http_server.url}/bearer/{name}" for name in names],
                                  columns=["id", "name"], partition_bytes=1,
                                  http_headers={"Authorization": f"Bearer {http_server.token}"})
    assert frame.npartitions > 1
    pd.testing.assert_frame_equal(frame.to_pandas().reset_index(drop=True),
                                  pd.read_parquet(dataset_dir / "flat", columns=["id", "name"]))


def test_https_verifies_the_servers_certificate(dataset_dir, https_server, monkeypatch):
    """As through requests: a certificate from an authority the store lacks is refused, and
    trusted once ``REQUESTS_CA_BUNDLE`` names the authority."""
    data = (dataset_dir / PART).read_bytes()
    url = f"{https_server.url}/{PART}"
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    with pytest.raises(UnreachableError, match="CERTIFICATE_VERIFY_FAILED"):
        open_source(url).read_range(0, 10)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(https_server.certificate))
    source = open_source(url)
    assert source.size() == len(data) and source.read_range(10, 20) == data[10:30]


def test_a_body_that_breaks_off_names_the_range(http_server):
    url = f"{http_server.url}/brokenoff/{PART}"
    with pytest.raises(RemoteError, match=r"brokenoff/flat/part-0.parquet: the response to "
                                          r"'Range: bytes=100-4195' broke off"):
        open_source(url).read_range(100, 4096)
    with pytest.raises(RemoteError, match=r"'Range: bytes=100-4195' broke off"):
        open_source(url).read_range_into(100, memoryview(bytearray(4096)))


@pytest.mark.timeout(30)
def test_a_body_that_drips_is_given_up_within_its_time(http_server):
    """200 bytes/s never trips the socket's timeout (each wait gets bytes); the read still
    ends, once its bytes at slowest_rate and the timeout have passed."""
    import time

    options = storage_options(timeout=1, slowest_rate=1000, check_version=False)
    url = f"{http_server.url}/drip-200Bps/{PART}"
    for read in (lambda s: s.read_range(0, 2000),
                 lambda s: s.read_range_into(0, memoryview(bytearray(2000)))):
        started = time.monotonic()
        with pytest.raises(RemoteError, match=r"'Range: bytes=0-1999' \(2000 bytes\) took "
                                              r"over 3 s, slower than slowest_rate=1000"):
            read(open_source(url, options))
        assert time.monotonic() - started < 6


def test_later_concurrent_reads_reuse_the_open_connections(dataset_dir, http_server):
    data = (dataset_dir / PART).read_bytes()
    source = open_source(f"{http_server.url}/{PART}")
    ranges = [(i * 1000, 1000) for i in range(8)]
    assert read_ranges(source, ranges, max_in_flight=4) == [data[o:o + n] for o, n in ranges]
    opened = http_server.connections
    assert read_ranges(source, ranges, max_in_flight=4) == [data[o:o + n] for o, n in ranges]
    buffer = bytearray(len(data))
    for _ in range(2):  # a read that kept its connections makes the next one open others
        read_ranges_into([(source, ranges, memoryview(buffer))], max_in_flight=4)
    assert buffer[:8000] == data[:8000]
    assert http_server.connections == opened, "each read's new threads opened new connections"
