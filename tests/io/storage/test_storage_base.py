"""Storage options, layered from defaults, the environment and the call, and the backend
chosen by a path's scheme."""

from __future__ import annotations

import pickle

import pytest

from gpuframe.errors import OptionError
from gpuframe.io.storage import open_source
from gpuframe.io.storage.base import (
    StorageOptions,
    storage_options,
)

PART = "flat/part-0.parquet"


def test_storage_options_layers(monkeypatch):
    monkeypatch.setenv("GPUFRAME_TASK_SIZE", "1024")
    monkeypatch.setenv("GPUFRAME_ANONYMOUS", "true")
    monkeypatch.setenv("GPUFRAME_ENDPOINT", "http://from-env:9000")
    chosen = storage_options({"endpoint": "http://127.0.0.1:1"}, secret="hidden")
    assert chosen.task_size == 1024 and chosen.anonymous is True
    assert chosen.endpoint == "http://127.0.0.1:1"
    assert "hidden" not in repr(chosen)
    assert storage_options(chosen, task_size=7).task_size == 7
    monkeypatch.setenv("GPUFRAME_PROBE_MIN_BYTES", "0")
    assert storage_options().probe_min_bytes == 0
    monkeypatch.delenv("GPUFRAME_TASK_SIZE")
    assert storage_options().task_size is StorageOptions().task_size is None  # measured


def test_storage_options_errors(monkeypatch):
    with pytest.raises(OptionError, match="requests_in_fligh"):
        storage_options(requests_in_fligh=3)
    with pytest.raises(OptionError, match="requests_in_flight=0"):
        storage_options(requests_in_flight=0)
    with pytest.raises(OptionError, match="probe_min_bytes=-1"):
        storage_options(probe_min_bytes=-1)
    monkeypatch.setenv("GPUFRAME_ANONYMOUS", "maybe")
    with pytest.raises(OptionError, match="GPUFRAME_ANONYMOUS"):
        storage_options()
    with pytest.raises(OptionError, match="ftp"):
        open_source("ftp://host/file.parquet")


def test_http_headers_come_from_the_environment_as_json_and_stay_secret(monkeypatch):
    monkeypatch.setenv("GPUFRAME_HTTP_HEADERS", '{"Authorization": "Bearer env-token"}')
    assert storage_options().http_headers == (("Authorization", "Bearer env-token"),)
    chosen = storage_options(http_headers={"X-Api-Key": "call-key"}, session_token="sts-token")
    assert chosen.http_headers == (("X-Api-Key", "call-key"),)  # the call's replace the env's
    assert storage_options(chosen, timeout=5.0).http_headers == chosen.http_headers
    for secret in ("call-key", "X-Api-Key", "sts-token"):
        assert secret not in repr(chosen)
    travelled = pickle.loads(pickle.dumps(chosen))  # as into the workers' tasks
    assert travelled == chosen and hash(travelled) == hash(chosen)
    assert travelled.session_token == "sts-token"
    monkeypatch.setenv("GPUFRAME_HTTP_HEADERS", "none")
    assert storage_options().http_headers == ()


@pytest.mark.parametrize("headers, message", [
    ({"Authorization": "Bearer s3cret\r\nX-Injected: 1"},
     "the value of 'Authorization' holds a line break.* at position 13"),
    ({"Authorization: Bearer s3cret": ""}, r"a header name \(starting 'Authorization'\)"),
    ({"Authorization": 5}, "the value of 'Authorization' must be a str, not int"),
    ({"Range": "bytes=0-"}, "'Range' is set by gpuframe's range reads"),
    ([("X-Key", "s3cret"), ("x-key", "s3cret")], "'x-key' is given twice"),
    (["Authorization: Bearer s3cret"], "must map header names to values"),
    ('{"Authorization": "Bearer s3cret"', "not a JSON object .*at character 33"),
    ('["Authorization", "Bearer s3cret"]', "not a JSON list"),
])
def test_bad_http_headers_name_the_option_not_the_secret(headers, message):
    with pytest.raises(OptionError, match="http_headers.*" + message) as info:
        storage_options(http_headers=headers)
    assert "s3cret" not in str(info.value) and info.value.__cause__ is None
