"""Real files and real servers for the tests that read them (tests/io, tests/reliability),
made once per session on 127.0.0.1: a plugin of tests/conftest.py.

``dataset_dir`` holds Parquet files written by pyarrow (several row groups with statistics,
several files, hive folders, and broken files), and the same rows as ORC (stripes of
``ROWS_PER_GROUP`` rows) and CSV files, with broken ones of each; ``http_server`` serves that
folder with Range support and logs every request (and, under ``/shaped-<ms>ms-<MB>MBps/``, adds
that latency and throttles each response to that rate: a store with known numbers for the
Little's-law tests; other prefixes make it misbehave, see :class:`_RangeHandler`);
``https_server`` serves it over TLS with a certificate no store trusts; ``s3_server`` is a moto
S3 server holding the same files in a bucket, with IAM authentication on, so wrong credentials
are refused as by AWS, and temporary (STS) credentials are checked whole: key, secret and
session token; ``dripping_s3_endpoint`` passes requests on to it and drips its answers' bodies.
"""

from __future__ import annotations

import contextlib
import datetime
import http.client
import ipaddress
import itertools
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from pyarrow import orc

ROWS_PER_GROUP = 1000
GROUPS_PER_FILE = 4
BLOB_BYTES = 2 * 2**20
"""blob/2mib.bin: random bytes, large enough to time transfers (HTTP only, not in S3)."""

os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")


def sample_table(start: int, rows: int) -> pa.Table:
    """Sorted ``id`` (so row-group statistics prune), a float, a string with some nulls."""
    ids = np.arange(start, start + rows, dtype="int64")
    names = pa.array([None if i % 97 == 0 else f"name-{i % 13}" for i in ids], pa.string())
    return pa.table({"id": ids, "x": ids * 0.5, "name": names})


def write_dataset(root: Path) -> None:
    """flat/ (2 files x 4 row groups), hive/year=/city=/ (3 files x 2 row groups), bad/."""
    rows = ROWS_PER_GROUP * GROUPS_PER_FILE
    flat = root / "flat"
    flat.mkdir()
    for i in range(2):
        pq.write_table(sample_table(i * rows, rows), flat / f"part-{i}.parquet",
                       row_group_size=ROWS_PER_GROUP)
    (flat / "_SUCCESS").write_text("")
    hive = root / "hive"
    for n, (year, city) in enumerate([(2023, "ams"), (2023, "oslo"), (2024, "ams")]):
        folder = hive / f"year={year}" / f"city={city}"
        folder.mkdir(parents=True)
        pq.write_table(sample_table(n * 2000, 2000), folder / "part.parquet",
                       row_group_size=ROWS_PER_GROUP)
    bad = root / "bad"
    mismatch = bad / "mismatch"
    mismatch.mkdir(parents=True)
    pq.write_table(sample_table(0, 100), mismatch / "a.parquet")
    table = sample_table(100, 100)
    pq.write_table(table.set_column(1, "x", table["x"].cast(pa.string())), mismatch / "b.parquet")
    good = (flat / "part-0.parquet").read_bytes()
    (bad / "truncated.parquet").write_bytes(good[: len(good) // 2])
    footer_length = int.from_bytes(good[-8:-4], "little")
    corrupt = bytearray(good)
    corrupt[-8 - footer_length:-8] = b"\xff" * footer_length
    (bad / "corrupt_footer.parquet").write_bytes(bytes(corrupt))
    (bad / "not_parquet.parquet").write_bytes(b"id,x\n1,2\n" * 10)
    (bad / "empty.parquet").write_bytes(b"")
    write_orc_and_csv(root)
    blob = root / "blob"
    blob.mkdir()
    (blob / "2mib.bin").write_bytes(np.random.default_rng(0).bytes(BLOB_BYTES))


def write_orc_and_csv(root: Path) -> None:
    """orc/ and csv/: flat/'s rows, 2 files each; bad_orc/ and bad_csv/: broken files."""
    rows = ROWS_PER_GROUP * GROUPS_PER_FILE
    for kind in ("orc", "csv", "bad_orc", "bad_csv"):
        (root / kind).mkdir()
    for i in range(2):
        table = sample_table(i * rows, rows)
        orc.write_table(table, root / "orc" / f"part-{i}.orc", stripe_size=ROWS_PER_GROUP,
                        batch_size=ROWS_PER_GROUP)
        pacsv.write_csv(table, root / "csv" / f"part-{i}.csv")
    good_orc = (root / "orc" / "part-0.orc").read_bytes()
    (root / "bad_orc" / "truncated.orc").write_bytes(good_orc[: len(good_orc) // 2])
    (root / "bad_orc" / "not_orc.orc").write_bytes(b"id,x\n1,2\n" * 10)
    table = sample_table(0, 100)
    orc.write_table(table.set_column(1, "x", table["x"].cast(pa.string())),
                    root / "bad_orc" / "other_types.orc")
    (root / "bad_csv" / "renamed.csv").write_text("id,y,name\n1,2.0,a\n")
    (root / "bad_csv" / "typed.csv").write_text("id,x,name\n1,abc,a\n")
    (root / "bad_csv" / "empty.csv").write_bytes(b"")
    (root / "bad_csv" / "binary.csv").write_bytes(good_orc[:3000])


@pytest.fixture(name="sample_table")
def _sample_table():
    """The table maker behind the dataset, for tests that write files of their own."""
    return sample_table


@pytest.fixture(scope="session")
def dataset_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("datasets")
    write_dataset(root)
    return root


@dataclass
class ServedRequest:
    method: str
    path: str
    range: str | None
    status: int
    nbytes: int
    authorization: str | None = None
    proxy_authorization: str | None = None


@dataclass
class HttpServer:
    """The running test server: its base URL and the requests it answered."""

    url: str
    root: Path
    certificate: Path | None = None
    """The certificate an https server presents, signed by its own key."""
    log: list[ServedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    connections: int = 0
    token: str = "gpuframe-test-token"
    """What '/bearer/...' wants as 'Authorization: Bearer <token>'."""
    answers: Iterator[int] = field(default_factory=itertools.count)
    """Numbers the ETags of '/unstable-etag/...'."""

    def reset(self) -> None:
        with self.lock:
            self.log.clear()
            self.connections = 0

    def bytes_served(self, name: str | None = None) -> int:
        with self.lock:
            return sum(r.nbytes for r in self.log if name is None or r.path.endswith(name))

    def whole_file_gets(self) -> int:
        with self.lock:
            return sum(1 for r in self.log if r.method == "GET" and r.status == 200)


class _RangeHandler(BaseHTTPRequestHandler):
    """Static files with Range support and, as nginx sends them, each file's ETag and
    Last-Modified ('/novalidator/...': neither; '/unstable-etag/...': another ETag in every
    answer, as the servers of some web farms); '/norange/...' ignores Range, '/forbidden/...'
    is 403, '/status-500/...' is 500, '/redirect/...' is 302 to the file's own path,
    '/redirect-loop/...' is 302 to itself, '/wrongrange/...' answers a Range with as many bytes
    from the file's start (and a Content-Range that says so),
    '/brokenoff/...' sends half the body it announced and closes the connection,
    '/shaped-<ms>ms-<MB>MBps/...' waits <ms> before answering and sends at <MB> MB/s,
    '/drip-<B>Bps/...' sends at <B> bytes/s (a server that never stops nor finishes),
    '/bearer/...' is 401 without the state's token as 'Authorization: Bearer'. A target
    in absolute form ('http://host/flat/...', what a proxy is asked) names the same file."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: avoid 40 ms ACK stalls
    state: HttpServer

    def setup(self) -> None:
        super().setup()
        with self.state.lock:
            self.state.connections += 1

    def log_message(self, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, body: bool) -> None:
        path = urlsplit(self.path).path
        shaped = re.match(r"^/shaped-(\d+)ms-(\d+)MBps(/.*)$", path)
        dripped = re.match(r"^/drip-(\d+)Bps(/.*)$", path)
        self._shape = None
        if shaped:
            self._shape = (int(shaped.group(1)) / 1e3, int(shaped.group(2)) * 1e6)
            path = shaped.group(3)
            time.sleep(self._shape[0])
        elif dripped:
            self._shape = (0.0, float(dripped.group(1)))
            path = dripped.group(2)
        honour_range = not path.startswith("/norange/")
        self._broken_off = path.startswith("/brokenoff/")
        prefixes = ("norange|forbidden|brokenoff|bearer|novalidator|unstable-etag|status-500|"
                    "redirect|redirect-loop|wrongrange")
        target = self.state.root / re.sub(rf"^/({prefixes})/", "/", path).lstrip("/")
        if path.startswith("/forbidden/"):
            return self._reply(403, b"forbidden", body)
        if path.startswith("/status-500/"):
            return self._reply(500, b"internal error", body)
        if path.startswith(("/redirect/", "/redirect-loop/")):
            location = path if path.startswith("/redirect-loop/") else target.relative_to(
                self.state.root).as_posix()
            return self._reply(302, b"", body, {"Location": "/" + location.lstrip("/")})
        if (path.startswith("/bearer/")
                and self.headers.get("Authorization") != f"Bearer {self.state.token}"):
            return self._reply(401, b"unauthorized", body, {"WWW-Authenticate": "Bearer"})
        if self.state.root.resolve() not in target.resolve().parents or not target.is_file():
            return self._reply(404, b"not found", body)
        stat = target.stat()
        data = target.read_bytes()
        size = len(data)
        validators = {} if path.startswith("/novalidator/") else {
            "ETag": f'"{stat.st_mtime_ns:x}-{size:x}"',
            "Last-Modified": formatdate(stat.st_mtime, usegmt=True)}
        if path.startswith("/unstable-etag/"):
            validators = {"ETag": f'"{next(self.state.answers)}"'}
        spec = self.headers.get("Range") if honour_range else None
        if spec is None:
            return self._reply(200, data, body, {**validators, **(
                {"Accept-Ranges": "bytes"} if honour_range else {})})
        match = re.fullmatch(r"bytes=(\d*)-(\d*)", spec.strip())
        if not match or match.groups() == ("", ""):
            return self._reply(400, b"bad range", body)
        first, last = match.groups()
        if first == "":
            start, end = max(0, size - int(last)), size - 1
        else:
            start, end = int(first), min(size - 1, int(last) if last else size - 1)
        if start >= size or start > end:
            return self._reply(416, b"", body, {"Content-Range": f"bytes */{size}"})
        if path.startswith("/wrongrange/"):
            start, end = 0, end - start
        return self._reply(206, data[start:end + 1], body,
                           {"Content-Range": f"bytes {start}-{end}/{size}",
                            "Accept-Ranges": "bytes", **validators})

    def _reply(self, status: int, data: bytes, body: bool,
               headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        with self.state.lock:  # logged before sending, so a client that has it sees it logged
            self.state.log.append(ServedRequest(self.command, self.path, self.headers.get("Range"),
                                                status, len(data) if body else 0,
                                                self.headers.get("Authorization"),
                                                self.headers.get("Proxy-Authorization")))
        self.end_headers()
        if body and self._shape:
            _send_at(self, data, self._shape[1])
        elif body and self._broken_off:
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif body:
            self.wfile.write(data)


def _send_at(handler: BaseHTTPRequestHandler, data: bytes, rate: float) -> None:
    """``data`` as a body at ``rate`` bytes/s, 10 ms of it (at least a byte) at a time, until
    the client gives up."""
    step = max(1, int(rate / 100))
    start = time.perf_counter()
    for offset in range(0, len(data), step):
        try:
            handler.wfile.write(data[offset:offset + step])
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True
            return
        ahead = (offset + step) / rate - (time.perf_counter() - start)
        if ahead > 0:
            time.sleep(ahead)


class _DripProxy(BaseHTTPRequestHandler):
    """Passes each GET and HEAD on to ``upstream`` as it came, its Host header too (S3's
    signatures cover it), and answers with the reply, its body sent at ``rate`` bytes/s."""

    protocol_version = "HTTP/1.1"
    upstream: tuple[str, int]
    rate: float

    def log_message(self, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._forward()

    def do_GET(self) -> None:
        self._forward()

    def _forward(self) -> None:
        upstream = http.client.HTTPConnection(*self.upstream, timeout=30)
        upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for name, value in self.headers.items():
            upstream.putheader(name, value)
        upstream.endheaders()
        answer = upstream.getresponse()
        data = answer.read()
        upstream.close()
        self.send_response_only(answer.status, answer.reason)
        for name, value in answer.getheaders():
            if name.lower() not in ("connection", "keep-alive", "transfer-encoding",
                                    "content-length"):
                self.send_header(name, value)
        head = self.command == "HEAD"
        self.send_header("Content-Length", answer.getheader("Content-Length", "0") if head
                         else str(len(data)))
        self.end_headers()
        if not head:
            _send_at(self, data, self.rate)


@contextlib.contextmanager
def _listening(handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None
               ) -> Iterator[str]:
    """A server of ``handler`` on 127.0.0.1 (over TLS with ``tls``): its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    scheme = "http" if tls is None else "https"
    thread = threading.Thread(target=server.serve_forever, name=f"test-{scheme}-server",
                              daemon=True)
    thread.start()
    try:
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _serve(state: HttpServer, tls: ssl.SSLContext | None = None):
    """Serve ``state.root`` on 127.0.0.1 (over TLS with ``tls``) until the generator is closed."""
    with _listening(type("Handler", (_RangeHandler,), {"state": state}), tls) as url:
        state.url = url
        yield state


@pytest.fixture(scope="session")
def http_server(dataset_dir):
    yield from _serve(HttpServer(url="", root=dataset_dir))


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """(certificate, key) for 127.0.0.1, the certificate signed by its own key: an authority
    no certificate store holds, trusted only where a test names it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuframe test server")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certificate_path, key_path = folder / "certificate.pem", folder / "key.pem"
    certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return certificate_path, key_path


@pytest.fixture(scope="session")
def https_server(dataset_dir, tmp_path_factory):
    certificate, key = _self_signed(tmp_path_factory.mktemp("tls"))
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(certificate, key)
    yield from _serve(HttpServer(url="", root=dataset_dir, certificate=certificate), tls)


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    key: str
    secret: str
    temporary: tuple[str, str, str]
    """Key, secret and session token of a role assumed through STS, allowed the same."""

    def url(self, relative: str) -> str:
        return f"s3://{self.bucket}/{relative}"

    def options(self, **overrides) -> dict:
        return {"endpoint": self.endpoint, "key": self.key, "secret": self.secret,
                "region": "us-east-1", **overrides}

    def temporary_options(self, **overrides) -> dict:
        key, secret, token = self.temporary
        return {**self.options(key=key, secret=secret, session_token=token), **overrides}


@pytest.fixture(scope="session")
def s3_server(dataset_dir):
    """moto's S3 on loopback with the dataset uploaded; IAM auth is on once the data is in."""
    import boto3
    import requests
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        session = boto3.Session(aws_access_key_id="setup", aws_secret_access_key="setup",
                                region_name="us-east-1")
        iam = session.client("iam", endpoint_url=endpoint)
        s3_all = ('{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", '
                  '"Action": "s3:*", "Resource": "*"}]}')
        iam.create_user(UserName="reader")
        iam.put_user_policy(UserName="reader", PolicyName="s3-all", PolicyDocument=s3_all)
        access = iam.create_access_key(UserName="reader")["AccessKey"]
        role = iam.create_role(RoleName="reader", AssumeRolePolicyDocument="{}")["Role"]
        iam.put_role_policy(RoleName="reader", PolicyName="s3-all", PolicyDocument=s3_all)
        temporary = session.client("sts", endpoint_url=endpoint).assume_role(
            RoleArn=role["Arn"], RoleSessionName="reader")["Credentials"]
        s3 = session.client("s3", endpoint_url=endpoint)
        s3.create_bucket(Bucket="data")
        for path in sorted(dataset_dir.rglob("*")):
            if path.is_file() and path.parent.name != "blob":
                s3.put_object(Bucket="data", Key=path.relative_to(dataset_dir).as_posix(),
                              Body=path.read_bytes())
        # From here on every request must be signed with the IAM user's or the role's key.
        requests.post(f"{endpoint}/moto-api/reset-auth", data=b"0", timeout=10)
        yield S3Server(endpoint, "data", access["AccessKeyId"], access["SecretAccessKey"],
                       (temporary["AccessKeyId"], temporary["SecretAccessKey"],
                        temporary["SessionToken"]))
    finally:
        requests.post(f"{endpoint}/moto-api/reset-auth", data=b"inf", timeout=10)
        server.stop()


@pytest.fixture(scope="session")
def dripping_s3_endpoint(s3_server) -> Iterator[str]:
    """An endpoint in front of ``s3_server`` that sends its answers' bodies at 2000 bytes a
    second: fast enough for Arrow's S3 client (curl gives up under a byte a second), so only
    gpuframe's own deadline (``slowest_rate``) ends a read from it."""
    upstream = urlsplit(s3_server.endpoint)
    handler = type("Handler", (_DripProxy,), {"upstream": (upstream.hostname, upstream.port),
                                              "rate": 2000})
    with _listening(handler) as url:
        yield url


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
