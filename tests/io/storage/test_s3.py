"""S3 range reads and listings against the session's moto S3 server."""

from __future__ import annotations

import pytest

from gpuframe.errors import OptionError
from gpuframe.io.errors import (
    AccessDeniedError,
    FileChangedError,
    SourceNotFoundError,
    UnreachableError,
)
from gpuframe.io.storage import open_source
from gpuframe.io.storage.base import (
    KvikioOpen,
    RemoteVersion,
    storage_options,
)
from gpuframe.io.storage.ranges import read_ranges
from gpuframe.io.storage.s3 import kvikio_s3_args, list_s3

PART = "flat/part-0.parquet"


def test_an_s3_source_confirms_its_version_by_asking_again(s3_server):
    import boto3

    key = "confirm/part.bin"
    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint, aws_access_key_id=s3_server.key,
                      aws_secret_access_key=s3_server.secret, region_name="us-east-1")
    s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"x" * 100)
    try:
        source = open_source(s3_server.url(key), storage_options(s3_server.options()))
        source.confirm_version()
        # The same size, most often within the second: LastModified (whole seconds) may not
        # change, the ETag does.
        s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"y" * 100)
        with pytest.raises(FileChangedError, match=f"{key} changed .*etag"):
            source.confirm_version()
        planned = open_source(s3_server.url(key), storage_options(s3_server.options()),
                              source.version)
        with pytest.raises(FileChangedError, match=f"{key} changed .*etag"):
            planned.read_range(0, 10)  # its first read asks the version first
        s3.put_object(Bucket=s3_server.bucket, Key=key, Body=b"x" * 101)
        with pytest.raises(FileChangedError, match=f"{key} changed .*size 100 -> 101"):
            source.confirm_version()
        s3.delete_object(Bucket=s3_server.bucket, Key=key)
        with pytest.raises(SourceNotFoundError, match=key):
            source.confirm_version()
    finally:
        s3.delete_object(Bucket=s3_server.bucket, Key=key)


def test_kvikio_signs_s3_reads_with_the_reads_key(dataset_dir, s3_server, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    size = (dataset_dir / PART).stat().st_size
    url = s3_server.url(PART)
    options = storage_options(s3_server.options())
    assert open_source(url, options).kvikio_args() == KvikioOpen("open_s3_url", {
        "url": url, "nbytes": size, "aws_region_name": "us-east-1",
        "aws_access_key_id": s3_server.key, "aws_secret_access_key": s3_server.secret,
        "aws_session_token": None, "aws_endpoint_url": s3_server.endpoint}, options.timeout)
    for cannot in ({"anonymous": True}, {"virtual_addressing": True}, {"region": None},
                   {"key": None, "secret": None}):  # a profile's or the role's key
        assert kvikio_s3_args(url, size, storage_options(s3_server.options(**cannot))) is None
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-env")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    env = kvikio_s3_args(url, size, storage_options(s3_server.options(key=None, secret=None,
                                                                      region=None)))
    assert env.kwargs["aws_access_key_id"] is None  # KvikIO reads the environment's
    assert env.kwargs["aws_region_name"] == "eu-west-1"
    bare_host = storage_options(endpoint="minio:9000", key="k", secret="s", region="r")
    assert kvikio_s3_args(url, size, bare_host).kwargs["aws_endpoint_url"] == "https://minio:9000"


def test_s3_ranges_and_errors(dataset_dir, s3_server, closed_port):
    data = (dataset_dir / PART).read_bytes()
    options = storage_options(s3_server.options())
    source = open_source(s3_server.url(PART), options)
    assert source.size() == len(data)
    assert read_ranges(source, [(5, 100), (2000, 50)], 2) == [data[5:105], data[2000:2050]]
    assert source.bytes_read == 150
    with pytest.raises(SourceNotFoundError, match="s3://data/flat/nothere.parquet"):
        open_source(s3_server.url("flat/nothere.parquet"), options)
    wrong = storage_options(s3_server.options(secret="wrong-secret"))
    with pytest.raises(AccessDeniedError, match=f"{PART}.*{s3_server.endpoint}"):
        open_source(s3_server.url(PART), wrong).read_range(0, 10)
    unreachable = storage_options(s3_server.options(endpoint=f"http://127.0.0.1:{closed_port}",
                                                    timeout=5.0))
    with pytest.raises(UnreachableError, match=f"127.0.0.1:{closed_port}"):
        open_source(s3_server.url(PART), unreachable)


def test_an_s3_object_of_another_size_than_planned_is_changed(dataset_dir, s3_server):
    size = (dataset_dir / PART).stat().st_size
    options = storage_options(s3_server.options())
    seen = open_source(s3_server.url(PART), options).version
    assert seen.size == size and seen.last_modified and seen.validated
    planned = open_source(s3_server.url(PART), options, RemoteVersion(size + 1))
    with pytest.raises(FileChangedError, match=f"{PART} changed .*size {size + 1} -> {size}"):
        planned.read_range(0, 4)  # opened (a HEAD) at its first read


def test_s3_temporary_credentials_need_their_session_token(dataset_dir, s3_server):
    """moto checks an assumed role's session token as AWS does."""
    data = (dataset_dir / PART).read_bytes()
    key, secret, token = s3_server.temporary
    options = storage_options(s3_server.temporary_options())
    assert open_source(s3_server.url(PART), options).read_range(10, 20) == data[10:30]
    assert token not in repr(options) and secret not in repr(options)
    without = storage_options(s3_server.options(key=key, secret=secret))
    with pytest.raises(AccessDeniedError, match=f"{PART} at endpoint {s3_server.endpoint}: "
                                                "check key=/secret=/session_token=") as info:
        open_source(s3_server.url(PART), without)
    wrong = storage_options(s3_server.temporary_options(session_token="not-the-token"))
    with pytest.raises(AccessDeniedError, match=f"{PART} at endpoint {s3_server.endpoint}: "
                                                "HTTP 400, most often an expired or wrong "
                                                "session_token=") as wrong_info:
        open_source(s3_server.url(PART), wrong)
    for error in (info.value, wrong_info.value):
        assert token not in str(error) and secret not in str(error)
    alone = storage_options(s3_server.options(key=None, secret=None, session_token=token))
    with pytest.raises(OptionError, match="session_token= needs the key= and secret="):
        open_source(s3_server.url(PART), alone)


def test_s3_virtual_addressing_puts_the_bucket_in_the_host_name(dataset_dir, s3_server):
    """moto takes the bucket from the host name of an endpoint that is no IP and not plain
    'localhost' (curl resolves '*.localhost' to loopback): path-style requests then ask for a
    bucket 's3', virtual-hosted ones for the bucket in the URL."""
    data = (dataset_dir / PART).read_bytes()
    named = s3_server.endpoint.replace("127.0.0.1", "s3.localhost")
    path_style = storage_options(s3_server.options(endpoint=named))
    with pytest.raises(SourceNotFoundError, match=f"s3://data/{PART}"):
        open_source(s3_server.url(PART), path_style)
    virtual = storage_options(s3_server.options(endpoint=named, virtual_addressing=True))
    assert open_source(s3_server.url(PART), virtual).read_range(10, 20) == data[10:30]


def test_s3_listing(s3_server):
    options = storage_options(s3_server.options())
    assert list_s3(s3_server.url("flat"), options) == [
        s3_server.url("flat/_SUCCESS"), s3_server.url("flat/part-0.parquet"),
        s3_server.url("flat/part-1.parquet")]
    with pytest.raises(SourceNotFoundError, match="no such object or prefix: s3://data/nowhere"):
        list_s3(s3_server.url("nowhere"), options)
    with pytest.raises(SourceNotFoundError, match="no such bucket 'nothere': s3://nothere/a"):
        list_s3("s3://nothere/a", options)
