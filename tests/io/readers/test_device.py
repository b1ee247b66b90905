"""Copies of remote files in device memory: staged through reused buffers, or read by KvikIO,
byte for byte the planned and known bytes, in batches bounded by their gaps."""

from __future__ import annotations

import sys
import threading
import types

import pandas as pd
import pytest

from gpuframe.io.errors import (
    FileChangedError,
    RemoteError,
)
from gpuframe.io.planning.plan import plan_fragments
from gpuframe.io.readers import device
from gpuframe.io.readers.cudf import copy_layouts
from gpuframe.io.readers.device import (
    COPY_SLACK,
    copy_batches,
    fetch_device_copies,
    fetch_staged,
)
from gpuframe.io.readers.fetch import FileFetcher, fetch_sparse_copies
from gpuframe.io.readers.task import READERS
from gpuframe.io.storage import open_source
from gpuframe.io.tasks import fragment_tasks
from gpuframe.io.tuning.budget import NodeBudget


@pytest.mark.parametrize("budgeted", [False, True], ids=["own", "host-budget"])
@pytest.mark.parametrize("name", ["flat/part-0.parquet", "orc/part-0.orc"])
def test_staged_fetch_builds_what_fetching_in_place_builds(dataset_dir, http_server, name,
                                                           budgeted, tmp_path):
    """The GPU copies' fetch (:func:`fetch_staged`) with host buffers standing in for pinned
    staging and device memory: requests of at most 4 KiB, through two reused staging buffers,
    place byte for byte the copies that :func:`fetch_sparse_copies` builds; with a host's
    budget of 8 requests too, by as many threads as buffers (no token held by a thread waiting
    for one), every token given back."""
    kind = name.split("/")[0].replace("flat", "parquet")
    remote = plan_fragments(f"{http_server.url}/{name}", ["name", "id"], format=kind,
                            partition_bytes=1, storage={"requests_in_flight": 2})
    fetchers = [FileFetcher(task) for task in fragment_tasks(remote)]
    jobs = copy_layouts(fragment_tasks(remote), fetchers)
    expected = [copy.getvalue() for copy in fetch_sparse_copies(jobs, 2, None)]
    staging: list[memoryview] = []
    copies = [bytearray(length) for _, _, length, _ in jobs]
    fetched = []  # lengths of what came through the staging buffers (not the known bytes)

    def two_buffers(pieces: int, size: int) -> list[memoryview]:
        assert pieces > 4 and size <= 4096
        staging.extend(memoryview(bytearray(size)) for _ in range(2))
        return staging

    budget = NodeBudget("http/staged", 8, str(tmp_path)) if budgeted else None
    tokens_held = []

    def place(job: int, offset: int, data: memoryview) -> None:
        copies[job][offset:offset + len(data)] = data
        if any(data.obj is buffer.obj for buffer in staging):
            fetched.append(len(data))
            if budget is not None:
                tokens_held.append(budget.held())

    fetch_staged(jobs, 8 if budgeted else 2, 4096, two_buffers, place, budget)
    assert copies == expected
    assert budget is None or (budget.held() == 0 and 1 <= max(tokens_held) <= len(staging)), \
        "a thread waiting for a staging buffer holds no token"
    assert len(fetched) > 4 * len(staging) and max(fetched) <= 4096
    for fetcher in fetchers:
        fetcher.source.close()


def test_copy_batches_bound_the_device_memory_of_one_cudf_call():
    def jobs(*shapes: tuple[int, int]) -> list:  # (bytes fetched, copy length) per file
        return [(None, [(0, fetched)], length, {}) for fetched, length in shapes]

    gib = 2**30
    # every column read: the copies are about what is fetched, one call for every file
    assert copy_batches(jobs(*[(gib, gib + 100)] * 8)) == [list(range(8))]
    # one column of four: runs whose copies stay within twice all the fetched bytes
    few = copy_batches(jobs(*[(gib, 4 * gib)] * 8))
    assert few == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # a copy larger than the budget alone; small reads always one call
    assert copy_batches(jobs((gib, 5 * gib), (gib // 2, gib))) == [[0], [1]]
    assert copy_batches(jobs(*[(100, COPY_SLACK // 8)] * 8)) == [list(range(8))]


def test_a_short_answer_to_a_staged_fetch_names_the_file(tmp_path):
    path = tmp_path / "short.bin"
    path.write_bytes(b"x" * 10_000)
    with (open_source(str(path)) as source,
          pytest.raises(RemoteError, match=r"short.bin: bytes 8192-12288 ended after 1808")):
        fetch_staged([(source, [(0, 12_288)], 12_288, {})], 2, 4096,
                     lambda pieces, size: [memoryview(bytearray(size)) for _ in range(2)],
                     lambda job, offset, data: None)


@pytest.mark.gpu
@pytest.mark.parametrize("budgeted", [False, True], ids=["own", "host-budget"])
@pytest.mark.parametrize("kvikio", [True, False], ids=["kvikio", "staged"])
@pytest.mark.parametrize("name", ["flat/part-0.parquet", "orc/part-0.orc"])
def test_device_copies_hold_the_planned_and_known_bytes(dataset_dir, http_server, name, kvikio,
                                                        budgeted, monkeypatch, tmp_path):
    """What cuDF decodes on the GPU: every planned range and every known piece at its offset
    of the file's device buffer, read by KvikIO in tasks shorter than the ranges, or through
    staging smaller than them; with a host's budget too (KvikIO's threads leased, the staged
    requests each holding a token), every token given back."""
    if not kvikio:
        monkeypatch.setattr(device, "fetch_by_kvikio", lambda *args: False)
    kind = name.split("/")[0].replace("flat", "parquet")
    remote = plan_fragments(f"{http_server.url}/{name}", ["id"], format=kind,
                            partition_bytes=1,
                            storage={"requests_in_flight": 3, "task_size": 3000})
    tasks = fragment_tasks(remote)
    fetchers = [FileFetcher(task) for task in tasks]
    budget = NodeBudget("http/device", 6, str(tmp_path)) if budgeted else None
    copies = fetch_device_copies(copy_layouts(tasks, fetchers), 3, 3000, budget)
    assert budget is None or budget.held() == 0
    data = (dataset_dir / name).read_bytes()
    for task, fetcher, copy in zip(tasks, fetchers, copies, strict=True):
        length, known = task.format.sparse_layout(task.metadata, len(data))
        held = copy.copy_to_host()
        assert len(held) == length
        for offset, size in task.format.ranges(task.metadata, task.units, task.file_columns):
            assert bytes(held[offset:offset + size]) == data[offset:offset + size]
        for offset, piece in known.items():
            assert bytes(held[offset:offset + len(piece)]) == piece
        fetcher.source.close()


@pytest.mark.gpu
def test_a_file_rewritten_under_kvikios_reads_is_named(http_server):
    """KvikIO checks no answer's ETag: the version asked once its bytes are in does."""
    tasks = fragment_tasks(plan_fragments(f"{http_server.url}/unstable-etag/flat/part-0.parquet",
                                          storage={"requests_in_flight": 2}))
    with pytest.raises(FileChangedError, match="unstable-etag/flat/part-0.parquet changed"):
        READERS["cudf"]().read("k", tasks)


@pytest.mark.gpu
def test_remote_reads_kvikio_cannot_make_or_fails_go_through_gpuframes_requests(
        dataset_dir, http_server, monkeypatch, caplog):
    import kvikio

    name = "flat/part-0.parquet"
    expected, _ = READERS["pandas"]().read("k", fragment_tasks(plan_fragments(
        str(dataset_dir / name))))

    def refused(*args: object, **kwargs: object) -> None:
        raise RuntimeError("curl: (7) refused")

    monkeypatch.setattr(kvikio.RemoteFile, "open_http", refused)
    tasks = fragment_tasks(plan_fragments(f"{http_server.url}/{name}"))
    got, _ = READERS["cudf"]().read("k", tasks)
    pd.testing.assert_frame_equal(got.to_pandas(), expected.to_pandas())
    assert f"KvikIO could not read {http_server.url}/{name} (curl: (7) refused)" in caplog.text

    def not_for_these(*args: object, **kwargs: object) -> None:
        raise AssertionError("KvikIO would send no Authorization header")

    monkeypatch.setattr(kvikio.RemoteFile, "open_http", not_for_these)
    bearer = {"http_headers": {"Authorization": f"Bearer {http_server.token}"}}
    tasks = fragment_tasks(plan_fragments(f"{http_server.url}/bearer/{name}", storage=bearer))
    got, _ = READERS["cudf"]().read("k", tasks)
    pd.testing.assert_frame_equal(got.to_pandas(), expected.to_pandas())


@pytest.fixture
def kvikio_defaults(monkeypatch):
    """A stand-in for ``kvikio.defaults`` holding a thread count and a task size, which records
    each ``set`` and counts the reads in flight when it came."""
    held = {"num_threads": 8, "task_size": 2**24}
    calls: list[tuple[dict, int]] = []
    settings = device.KvikioSettings()

    def setting(changed: dict) -> None:
        calls.append((dict(changed), settings._users))
        held.update(changed)

    defaults = types.SimpleNamespace(get=held.__getitem__, set=setting)
    package = types.ModuleType("kvikio")
    package.defaults = defaults  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kvikio", package)
    monkeypatch.setitem(sys.modules, "kvikio.defaults", defaults)
    return settings, held, calls


def test_kvikio_is_set_only_where_its_settings_change(kvikio_defaults):
    """A read sets KvikIO's thread count and task size; setting a thread count starts a new
    pool of threads, so a setting KvikIO already holds is not set again."""
    settings, _, calls = kvikio_defaults
    for threads in (8, 16, 16):
        with settings.using({"num_threads": threads, "task_size": 2**24}, wait=False):
            pass
    assert calls == [({"num_threads": 16}, 0)]


def test_kvikio_settings_never_change_under_a_read_in_flight(kvikio_defaults):
    """A new thread count drains KvikIO's pool, which hung a read on another worker thread: a
    local read that finds one in flight reads with the settings in force, and a remote read
    (``wait``) waits for the other to finish, then sets its own."""
    settings, held, calls = kvikio_defaults
    inside, release = threading.Event(), threading.Event()

    def first_read() -> None:
        with settings.using({"num_threads": 32, "task_size": 2**24}, wait=False):
            inside.set()
            release.wait(10)

    reading = threading.Thread(target=first_read)
    reading.start()
    assert inside.wait(10)
    with settings.using({"num_threads": 4, "task_size": 2**20}, wait=False):
        assert held == {"num_threads": 32, "task_size": 2**24}

    waited: list[dict] = []

    def remote_read() -> None:
        with settings.using({"num_threads": 64, "task_size": 2**24}, wait=True):
            waited.append(dict(held))

    remote = threading.Thread(target=remote_read)
    remote.start()
    remote.join(0.2)
    assert remote.is_alive() and not waited  # held back while the first read is in flight
    release.set()
    reading.join(10)
    remote.join(10)
    assert waited == [{"num_threads": 64, "task_size": 2**24}]
    assert calls == [({"num_threads": 32}, 0), ({"num_threads": 64}, 0)]
