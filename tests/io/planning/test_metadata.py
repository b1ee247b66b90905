"""Each file's metadata read for planning, and kept for later plans while the file is
unchanged: local files by their stamp, remote ones by the version their store says."""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.parquet as pq

from gpuframe.io.formats.base import FOOTER_PROBE
from gpuframe.io.formats.csv import CsvFormat
from gpuframe.io.formats.orc import OrcFormat
from gpuframe.io.formats.parquet import ParquetFormat
from gpuframe.io.planning.metadata import PLANNED_METADATA, MetadataCache, file_stamp
from gpuframe.io.planning.plan import (
    plan_fragments,
)

WORKERS = ["tcp://w0", "tcp://w1"]
FIXED = {"requests_in_flight": 4}


def _counting_reads(monkeypatch, format_class):
    read = []
    original = format_class.read_metadata
    monkeypatch.setattr(format_class, "read_metadata",
                        lambda self, source, budget: read.append(source.path)
                        or original(self, source, budget))
    return read


def test_unchanged_local_files_are_planned_again_without_reading_their_metadata(
        tmp_path, monkeypatch):
    read = _counting_reads(monkeypatch, ParquetFormat)
    plain = {"row_group_size": 25, "compression": "none", "use_dictionary": False}
    for i in range(3):
        pq.write_table(pa.table({"id": list(range(i * 100, i * 100 + 100))}),
                       tmp_path / f"part-{i}.parquet", **plain)
    first = plan_fragments(str(tmp_path), filters=[("id", ">=", 150)], workers=WORKERS)
    assert sorted(read) == sorted(first.files)
    again = plan_fragments(str(tmp_path), filters=[("id", ">=", 150)], workers=WORKERS)
    assert sorted(read) == sorted(first.files)  # nothing read a second time
    assert again.fragments == first.fragments
    assert all(again.footers[p].equals(first.footers[p]) for p in first.files)

    # rewritten: other row groups and statistics, and a file of the same size whose values
    # moved (a stale footer would prune by old statistics, silently dropping rows)
    changed, same_size = tmp_path / "part-0.parquet", tmp_path / "part-1.parquet"
    time.sleep(0.05)  # past a tick of a coarse file system clock (see FileStamp)
    pq.write_table(pa.table({"id": list(range(1000, 1010))}), changed)
    size = same_size.stat().st_size
    pq.write_table(pa.table({"id": list(range(200, 300))}), same_size, **plain)
    assert same_size.stat().st_size == size
    read.clear()
    third = plan_fragments(str(tmp_path), filters=[("id", ">=", 150)], workers=WORKERS)
    assert sorted(read) == [str(changed), str(same_size)]
    assert pq.read_table(changed).num_rows == 10
    kept = {(f.path, f.units) for f in third.fragments}
    assert (str(changed), (0,)) in kept
    assert (str(same_size), (0, 1, 2, 3)) in kept  # every row group now holds ids >= 200


def test_a_file_seen_differently_here_is_read_again(tmp_path, monkeypatch):
    """A worker on another host may read another file of the same path: its stamp differs."""
    read = _counting_reads(monkeypatch, ParquetFormat)
    path = tmp_path / "one.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3]}), path)
    plan = plan_fragments(str(path))
    stat = path.stat()
    PLANNED_METADATA.put(str(path), ParquetFormat(), (stat.st_size, stat.st_mtime_ns,
                                                      stat.st_ino + 1), plan.footers[str(path)])
    plan_fragments(str(path))
    assert read == [str(path)] * 2


def test_csv_metadata_is_read_every_time(tmp_path, monkeypatch):
    csv_read = _counting_reads(monkeypatch, CsvFormat)
    (tmp_path / "a.csv").write_text("x,y\n1,2\n")
    for _ in range(2):
        plan_fragments(str(tmp_path / "a.csv"), format="csv")
    assert len(csv_read) == 2  # its metadata depends on the options and the partition budget


def test_remote_metadata_is_kept_where_the_store_says_its_version(dataset_dir, http_server):
    """A server that sends ETag and Last-Modified: the footer is read once, and later plans
    carry the version it was read at, which the read checks. One that sends neither: read
    every time, since a rewrite of the same size would go unseen."""
    url = f"{http_server.url}/flat/part-0.parquet"
    bare = f"{http_server.url}/novalidator/flat/part-0.parquet"
    http_server.reset()
    first, again, _bare_first, bare_again = (plan_fragments(u, storage=FIXED)
                                            for u in (url, url, bare, bare))
    assert [(r.path, r.range) for r in http_server.log] == [
        ("/flat/part-0.parquet", f"bytes=-{FOOTER_PROBE}"),
        ("/novalidator/flat/part-0.parquet", f"bytes=-{FOOTER_PROBE}"),
        ("/novalidator/flat/part-0.parquet", f"bytes=-{FOOTER_PROBE}")]
    size = (dataset_dir / "flat" / "part-0.parquet").stat().st_size
    assert first.versions[url].size == size and first.versions[url].validated
    assert again.versions == first.versions and again.reused == {url} and not first.reused
    assert not bare_again.reused and bare_again.versions[bare] == (size, None, None)
    assert again.fragments == first.fragments


def test_s3_footers_are_kept_by_the_objects_last_modified(dataset_dir, s3_server):
    """Arrow gives an S3 object's LastModified: its footer is read once, as over HTTP."""
    url = s3_server.url("flat/part-1.parquet")
    PLANNED_METADATA.forget([url])
    storage = {**s3_server.options(), **FIXED}
    first, again = (plan_fragments(url, storage=storage) for _ in range(2))
    assert first.versions[url].last_modified and not first.reused
    assert again.reused == {url} and again.versions == first.versions


def test_orc_tails_are_reused_like_footers(dataset_dir, monkeypatch):
    read = _counting_reads(monkeypatch, OrcFormat)
    PLANNED_METADATA.clear()
    orc_dir = dataset_dir / "orc"
    first = plan_fragments(str(orc_dir), format="orc")
    again = plan_fragments(str(orc_dir), format="orc")
    assert sorted(read) == sorted(first.files) and again.fragments == first.fragments


def test_the_metadata_cache_keeps_the_most_recently_planned_files(tmp_path):
    cache = MetadataCache(capacity=2)
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"{i}.parquet")
        pq.write_table(pa.table({"id": [i]}), paths[-1])
    fmt = ParquetFormat()
    stamps = {p: (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ino) for p in paths}
    m0, m1, m2 = (pq.ParquetFile(p).metadata for p in paths)
    cache.put(str(paths[0]), fmt, stamps[paths[0]], m0)
    cache.put(str(paths[1]), fmt, stamps[paths[1]], m1)
    assert cache.get(str(paths[0]), fmt) == (m0, stamps[paths[0]])  # now the most recent
    cache.put(str(paths[2]), fmt, stamps[paths[2]], m2)
    assert [(cache.get(str(p), fmt) or [None])[0] for p in paths] == [m0, None, m2]
    cache.put(str(paths[1]), CsvFormat(), stamps[paths[1]], "csv")
    assert cache.get(str(paths[1]), CsvFormat()) is None
    cache.forget([str(paths[0])])
    assert cache.get(str(paths[0]), fmt) is None and cache.get(str(paths[2]), fmt)


def test_the_metadata_cache_keeps_at_most_its_bytes_of_footers(tmp_path):
    """Footers are charged as the files hold them: a wide file's alone can outweigh many."""
    fmt = ParquetFormat()
    footers = {}
    for name, columns in (("narrow-0", 1), ("narrow-1", 1), ("wide", 300)):
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({f"c{i}": [1, 2] for i in range(columns)}), path)
        footers[str(path)] = pq.ParquetFile(path).metadata
    narrow = [p for p in footers if "narrow" in p]
    wide = next(p for p in footers if "wide" in p)
    small = sum(footers[p].serialized_size for p in narrow)
    assert footers[wide].serialized_size > small
    cache = MetadataCache(max_bytes=small + 1)
    stamps = {p: file_stamp(p) for p in footers}
    for path in narrow:
        cache.put(path, fmt, stamps[path], footers[path])
    assert all(cache.get(path, fmt) for path in narrow)
    cache.put(wide, fmt, stamps[wide], footers[wide])  # alone over the budget: nothing is left
    assert [cache.get(p, fmt) for p in footers] == [None, None, None]
    cache.put(narrow[0], fmt, stamps[narrow[0]], footers[narrow[0]])
    cache.put(narrow[0], fmt, stamps[narrow[0]], footers[narrow[0]])  # again: charged once
    cache.put(narrow[1], fmt, stamps[narrow[1]], footers[narrow[1]])
    assert all(cache.get(path, fmt) for path in narrow)
