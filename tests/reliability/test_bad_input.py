"""Bad input, one table: each kind of broken file, store or server tried on local files, HTTP and
S3, with what a read answers and how soon.

A read never returns a partial frame: it gives the files' rows, or raises one of gpuframe's
errors (gpuframe/errors.py, gpuframe/io/errors.py) whose message names what is at fault: the file
or URL, and the row, byte range, unit or column where it can tell. Each case runs a real read on
the session's cluster against real files and the servers of tests/served_datasets.py, and must
end within its bound, so a read that hangs fails here too. A case whose file changes after
planning reads the plan made before the change (``read_plan``), as a run's tasks would.

Kinds tested in depth elsewhere (tests/io/readers/test_failures.py for every store and unit,
tests/io/storage/test_http.py and test_s3.py, tests/io/formats/test_csv.py) appear here once,
so that the table lists every kind.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from pyarrow import orc
from served_datasets import HttpServer, S3Server, sample_table

import gpuframe
from gpuframe.errors import GpuframeError, OptionError
from gpuframe.io.errors import (
    AccessDeniedError,
    CorruptFileError,
    FileChangedError,
    NotARegularFileError,
    RangeNotSupportedError,
    RemoteError,
    SchemaMismatchError,
    SourceNotFoundError,
    TruncatedFileError,
    UnreachableError,
)
from gpuframe.io.formats import format_for
from gpuframe.io.planning.plan import plan_fragments

PLANNED_IN_A_PROCESS = 15.0
"""The bound of a case planned in a process of its own, which imports gpuframe first."""
SETUP_SECONDS = 60
"""What a case's timeout allows beyond its bound: the first case starts the session's cluster
and servers."""
ROWS = 2000
UNRESOLVABLE = "no-such-host.invalid"
"""A host name no resolver knows: '.invalid' is reserved never to resolve (RFC 6761)."""
TABLE = sample_table(0, ROWS)
READERS = {"parquet": gpuframe.read_parquet, "orc": gpuframe.read_orc, "csv": gpuframe.read_csv}


@dataclass
class Read:
    """What a case reads, and what its outcome's message is checked with."""

    format: str
    source: str | list[str]
    names: dict[str, str]
    """What a case's words name, by placeholder ('{file}', '{other}')."""
    storage: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    """The format's (CSV's ``encoding=``)."""
    change: Callable[[], None] | None = None
    """Done to the files between planning and reading."""
    expected: pd.DataFrame | None = None
    """The rows a read that succeeds must give."""
    bound_by_permissions: bool = False
    """Planned alone, in a process that file permissions bind (tests run as root)."""
    environment: dict[str, str] = field(default_factory=dict)
    """Variables of the client's and the workers' processes during the read."""


@dataclass
class Stage:
    """One case's files: a local folder, served over HTTP(S) under its name and copied to S3
    under the same prefix on demand."""

    folder: Path
    http: HttpServer
    https: HttpServer
    s3: S3Server
    s3_client: object
    closed_port: int
    dripping_s3: str
    """An S3 endpoint in front of ``s3``'s that drips its answers' bodies."""

    def write(self, name: str, data: bytes | str | pa.Table, kind: str = "") -> Path:
        """``data`` as ``name``: bytes or text as they are, a table :func:`encoded` as
        ``kind``."""
        path = self.folder / name
        if isinstance(data, str):
            path.write_text(data)
        else:
            path.write_bytes(data if isinstance(data, bytes) else encoded(data, kind))
        return path

    def at(self, where: str, name: str, via: str = "") -> str:
        """``name``'s path or URL ``where`` (local, http, https, s3: uploaded first); ``via``:
        a prefix of the HTTP server's that makes it misbehave."""
        if where == "local":
            return str(self.folder / name)
        if where == "https":
            return f"{self.https.url}{via}/{self.folder.name}/{name}"
        if where == "http":
            return f"{self.http.url}{via}/{self.folder.name}/{name}"
        key = f"{self.folder.name}/{name}"
        path = self.folder / name
        if path.is_file():
            self.s3_client.put_object(Bucket=self.s3.bucket, Key=key, Body=path.read_bytes())
        return self.s3.url(key)

    def storage(self, where: str, **overrides) -> dict:
        """Storage options of a read from ``where``: S3's endpoint and key, fixed requests in
        flight (no probe of the store)."""
        base = self.s3.options() if where == "s3" else {}
        return {**base, "requests_in_flight": 2, **overrides}

    def rewrite_s3(self, name: str, data: bytes) -> None:
        self.s3_client.put_object(Bucket=self.s3.bucket, Key=f"{self.folder.name}/{name}",
                                  Body=data)

    def delete_s3(self, name: str) -> None:
        self.s3_client.delete_object(Bucket=self.s3.bucket, Key=f"{self.folder.name}/{name}")


# --- Broken bytes -------------------------------------------------------------------------------

def encoded(table: pa.Table, kind: str, **options: object) -> bytes:
    """``table`` as a file of ``kind`` (parquet, orc, csv), in row groups or stripes of a
    quarter of its rows; Parquet written with ``options``."""
    sink = pa.BufferOutputStream()
    if kind == "parquet":
        pq.write_table(table, sink, row_group_size=max(1, table.num_rows // 4), **options)
    elif kind == "orc":
        orc.write_table(table, sink, stripe_size=4096, batch_size=max(1, table.num_rows // 4))
    else:
        pacsv.write_csv(table, sink)
    return sink.getvalue().to_pybytes()


def parquet_footer_length(data: bytes) -> int:
    return int.from_bytes(data[-8:-4], "little")


def zeroed(data: bytes, start: int, end: int) -> bytes:
    return data[:start] + bytes(end - start) + data[end:]


def last_chunk_cut(data: bytes) -> bytes:
    """A Parquet file whose data ends 100 bytes early, its footer whole: the last column chunk
    lies past the data."""
    data_end = len(data) - parquet_footer_length(data) - 8
    return data[:data_end - 100] + data[data_end:]


def footer_length_too_long(data: bytes) -> bytes:
    return data[:-8] + (len(data) * 2).to_bytes(4, "little") + data[-4:]


def footer_garbled(data: bytes) -> bytes:
    length = parquet_footer_length(data)
    return data[:-8 - length] + b"\xff" * length + data[-8:]


def orc_tail_garbled(data: bytes) -> bytes:
    return data[:-60] + b"\xfe" * 60


CSV_SMALL = "a,b,c\n1,2,x\n3,4,y\n"
LATE = 80_000
"""Rows past which a CSV file is more than the 1 MiB sample that planning parses."""


def csv_with(line: str, at: int, rows: int = ROWS) -> str:
    """A CSV file of columns a, b, c and ``rows`` rows, ``line`` in place of row ``at`` (the
    file's line ``at + 2``)."""
    lines = [f"{i},{i * 2},name-{i % 7}\n" for i in range(rows)]
    lines[at] = line
    return "a,b,c\n" + "".join(lines)


# --- Reads of each case -------------------------------------------------------------------------

def one_file(kind: str, data: bytes | str | pa.Table, where: str = "local", via: str = "",
             storage: dict | None = None, options: dict | None = None, login: str = ""
             ) -> Callable[[Stage], Read]:
    """A read of one file of ``kind`` holding ``data``, from ``where`` (local, http, https,
    s3), with ``storage`` options over the stage's and the format's ``options``; ``login``:
    an HTTP URL's 'user:password'."""
    def make(stage: Stage) -> Read:
        name = f"file.{kind}"
        stage.write(name, data, kind)
        source = stage.at(where, name, via)
        if login:
            source = source.replace("://", f"://{login}@")
        return Read(kind, source, {"file": source}, stage.storage(where, **(storage or {})),
                    dict(options or {}))
    return make


def two_files(kind: str, first: pa.Table, second: pa.Table, where: str = "local",
              succeeds: bool = False) -> Callable[[Stage], Read]:
    """A read of two files of ``kind``, '{file}' and '{other}'; where it ``succeeds``, giving
    both tables' rows."""
    def make(stage: Stage) -> Read:
        sources = []
        for name, table in (("a", first), ("b", second)):
            stage.write(f"{name}.{kind}", table, kind)
            sources.append(stage.at(where, f"{name}.{kind}"))
        expected = (pa.concat_tables([first, second], promote_options="permissive").to_pandas()
                    if succeeds else None)
        return Read(kind, sources, {"file": sources[0], "other": sources[1]},
                    stage.storage(where), expected=expected)
    return make


def changed_after_planning(kind: str, where: str, change: Callable[[Stage, Path, str], None]
                           ) -> Callable[[Stage], Read]:
    """A read of one good file of ``kind`` that ``change(stage, path, name)`` alters once the
    read is planned."""
    def make(stage: Stage) -> Read:
        name = f"file.{kind}"
        path = stage.write(name, TABLE, kind)
        source = stage.at(where, name)
        return Read(kind, source, {"file": source}, stage.storage(where),
                    change=lambda: change(stage, path, name))
    return make


def no_data_files(where: str) -> Callable[[Stage], Read]:
    """A folder (prefix) holding only a marker file."""
    def make(stage: Stage) -> Read:
        stage.write("_SUCCESS", b"")
        stage.at(where, "_SUCCESS")
        source = str(stage.folder) if where == "local" else stage.s3.url(stage.folder.name)
        return Read("parquet", source, {"file": source}, stage.storage(where))
    return make


def in_folders(*files: str) -> Callable[[Stage], Read]:
    """A read of the stage's folder holding TABLE as Parquet at each of ``files`` (relative
    paths), '{file}' and '{other}' the first two; a name that does not end in '.parquet' holds
    text."""
    def make(stage: Stage) -> Read:
        paths = []
        for name in files:
            (stage.folder / name).parent.mkdir(parents=True, exist_ok=True)
            paths.append(str(stage.write(name, TABLE if name.endswith(".parquet")
                                         else "a stray note\n", "parquet")))
        return Read("parquet", str(stage.folder), {"file": paths[0], "other": paths[-1]},
                    stage.storage("local"))
    return make


def hidden_by_permissions(locked: str, read: str) -> Callable[[Stage], Read]:
    """TABLE as Parquet in a/ and b/, ``locked`` (a file or folder) made unreadable to all, and
    ``read`` ('' the stage's folder) read where permissions bind."""
    def make(stage: Stage) -> Read:
        for name in ("a/part.parquet", "b/part.parquet"):
            (stage.folder / name).parent.mkdir()
            stage.write(name, TABLE, "parquet")
        (stage.folder / locked).chmod(0)
        source = str(stage.folder / read)
        return Read("parquet", source, {"file": source, "locked": str(stage.folder / locked)},
                    bound_by_permissions=True)
    return make


def dangling_link(stage: Stage) -> Read:
    link = stage.folder / "file.parquet"
    link.symlink_to(stage.folder / "gone.parquet")
    return Read("parquet", str(stage.folder), {"file": str(link)})


def fifo(stage: Stage) -> Read:
    stage.write("a.parquet", TABLE, "parquet")
    os.mkfifo(stage.folder / "b.parquet")
    return Read("parquet", str(stage.folder), {"file": str(stage.folder / "b.parquet")})


def nowhere(where: str, name: str = "missing.parquet", **storage: object
            ) -> Callable[[Stage], Read]:
    """A read of what is not there: a file ``where`` (local, http, s3), a glob's match, a list's
    files, an ftp:// server, a closed port's ('{port}' in an option's text, as in the words,
    is its number), or an unresolvable host's."""
    def make(stage: Stage) -> Read:
        source: str | list[str]
        if where == "glob":
            source = str(stage.folder / "*.parquet")
        elif where == "list":
            source = []
        elif where == "ftp":
            source = f"ftp://127.0.0.1/{name}"
        elif where == "closed":
            source = f"http://127.0.0.1:{stage.closed_port}/{name}"
        elif where == "unresolvable":
            source = f"http://{UNRESOLVABLE}/{name}"
        else:
            source = stage.at(where, name)
        overrides = {key: value.format(port=stage.closed_port) if isinstance(value, str)
                     else value for key, value in storage.items()}
        return Read("parquet", source, {"file": str(source), "port": str(stage.closed_port)},
                    stage.storage(where, **overrides))
    return make


def https_misnamed(stage: Stage) -> Read:
    """The HTTPS server's certificate trusted (``REQUESTS_CA_BUNDLE``, as requests takes it),
    the file asked of it as localhost: the certificate names 127.0.0.1 alone."""
    read = one_file("parquet", PARQUET, "https")(stage)
    read.source = read.names["file"] = str(read.source).replace("127.0.0.1", "localhost")
    read.environment = {"REQUESTS_CA_BUNDLE": str(stage.https.certificate)}
    return read


def s3_dripped(stage: Stage) -> Read:
    """An object read through :attr:`Stage.dripping_s3`, ``timeout=1``, ``slowest_rate=50000``."""
    read = one_file("parquet", PARQUET, "s3", storage={"timeout": 1, "slowest_rate": 50_000})(stage)
    read.storage["endpoint"] = read.names["endpoint"] = stage.dripping_s3
    return read


def s3_bucket_missing(stage: Stage) -> Read:
    source = f"s3://no-such-bucket/{stage.folder.name}/file.parquet"
    return Read("parquet", source, {"file": source}, stage.storage("s3"))


def correct(kind: str, data: bytes | str | pa.Table, where: str = "local", via: str = "",
            options: dict | None = None) -> Callable[[Stage], Read]:
    """:func:`one_file`, whose read must give the rows pyarrow reads from the local file."""
    def make(stage: Stage) -> Read:
        planned = one_file(kind, data, where, via, options=options)(stage)
        path = stage.folder / f"file.{kind}"
        encoding = planned.options.get("encoding", "utf8")
        table = (pq.read_table(path) if kind == "parquet" else orc.read_table(path)
                 if kind == "orc" else pacsv.read_csv(path, pacsv.ReadOptions(encoding=encoding)))
        planned.expected = table.to_pandas()
        return planned
    return make


def grow(stage: Stage, path: Path, name: str) -> None:
    """Written again with twice the rows, the first ones the same."""
    stage.write(name, pa.concat_tables([TABLE, TABLE]), path.suffix[1:])


def delete(stage: Stage, path: Path, name: str) -> None:
    path.unlink()


def cut(stage: Stage, path: Path, name: str) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)


def zero_some(stage: Stage, path: Path, name: str) -> None:
    """The same size, other bytes (a rewrite in place)."""
    path.write_bytes(zeroed(path.read_bytes(), 100, 400))


def s3_zero_some(stage: Stage, path: Path, name: str) -> None:
    """The object put again at once: the same size and, within the second, the same
    LastModified; only its ETag differs."""
    stage.rewrite_s3(name, zeroed(path.read_bytes(), 100, 400))


def s3_grow(stage: Stage, path: Path, name: str) -> None:
    stage.rewrite_s3(name, path.read_bytes() + b"\0" * 10)


def s3_delete(stage: Stage, path: Path, name: str) -> None:
    stage.delete_s3(name)


def other_types(**types: pa.DataType) -> pa.Table:
    """TABLE with columns cast to ``types``."""
    return TABLE.cast(pa.schema([pa.field(f.name, types.get(f.name, f.type))
                                 for f in TABLE.schema]))


NULL_NAMES = TABLE.set_column(2, "name", pa.nulls(ROWS))


@dataclass(frozen=True)
class Case:
    """One row of the table: what is wrong, and what a read of it must answer within
    ``within`` seconds: ``error`` with each of ``words`` in its message ({file}, {other}:
    the read's files), or the file's rows where ``error`` is None."""

    id: str
    storage: str
    wrong: str
    make: Callable[[Stage], Read]
    error: type[Exception] | None
    words: tuple[str, ...] = ()
    within: float = 5.0


PARQUET, ORC_BYTES = encoded(TABLE, "parquet"), encoded(TABLE, "orc")
UNCOMPRESSED_WITH_CRC = encoded(TABLE, "parquet", compression="none", use_dictionary=False,
                                write_page_checksum=True)
"""Its pages' values are stored as they are: zeroed bytes decode, into other values, unless
their checksums are checked."""

CASES = [
    # Parquet, local
    Case("parquet-empty", "local", "a zero-byte file", one_file("parquet", b""),
         CorruptFileError, ("{file} is empty",)),
    Case("parquet-garbage", "local", "bytes that are not Parquet",
         one_file("parquet", b"id,x\n1,2\n" * 50), CorruptFileError,
         ("{file} is not a Parquet file",)),
    Case("parquet-head-magic", "local", "the first 4 bytes (magic) overwritten, footer whole",
         correct("parquet", b"XXXX" + PARQUET[4:]), None),
    Case("parquet-tail-magic", "local", "the last 4 bytes (magic) overwritten",
         one_file("parquet", PARQUET[:-4] + b"XXXX"), TruncatedFileError,
         ("{file} is truncated",)),
    Case("parquet-cut-footer", "local", "cut inside its footer",
         one_file("parquet", PARQUET[:-100]), TruncatedFileError, ("{file} is truncated",)),
    Case("parquet-cut-half", "local", "cut in half (its footer gone)",
         one_file("parquet", PARQUET[:len(PARQUET) // 2]), TruncatedFileError,
         ("{file} is truncated",)),
    Case("parquet-cut-chunk", "local", "a truncated page: the last column chunk 100 bytes "
         "short, footer whole",
         one_file("parquet", last_chunk_cut(PARQUET)), TruncatedFileError,
         ("{file} is truncated or corrupt", "row group 3", "past the data's end")),
    Case("parquet-footer-length", "local", "footer length larger than the file",
         one_file("parquet", footer_length_too_long(PARQUET)), CorruptFileError,
         ("corrupt footer in {file}",)),
    Case("parquet-footer-garbage", "local", "footer bytes garbage",
         one_file("parquet", footer_garbled(PARQUET)), CorruptFileError,
         ("corrupt footer in {file}",)),
    Case("parquet-page-zeroed", "local", "data pages zeroed, footer whole",
         one_file("parquet", zeroed(PARQUET, 100, 400)), CorruptFileError,
         ("{file} (row group 0) cannot be decoded",)),
    Case("parquet-page-crc", "local", "an uncompressed page zeroed, the file written with page "
         "checksums", one_file("parquet", zeroed(UNCOMPRESSED_WITH_CRC, 200, 260)),
         CorruptFileError, ("{file} (row group 0) cannot be decoded", "CRC checksum")),
    Case("parquet-type-conflict", "local", "column int64 in one file, string in the other",
         two_files("parquet", TABLE, other_types(id=pa.string())), SchemaMismatchError,
         ("{file} and {other} disagree on column 'id': int64 vs string",)),
    Case("parquet-column-missing", "local", "a column missing from one file",
         two_files("parquet", TABLE, TABLE.drop_columns(["name"])), SchemaMismatchError,
         ("{file} and {other} disagree on column 'name': string vs missing",)),
    Case("parquet-column-order", "local", "the files' columns in another order",
         two_files("parquet", TABLE, TABLE.select(["name", "id", "x"])), SchemaMismatchError,
         ("{file} and {other} order their columns differently",)),
    Case("parquet-all-null", "local", "a column all-null in one file, string in the other",
         two_files("parquet", NULL_NAMES, TABLE, succeeds=True), None),
    Case("parquet-no-rows", "local", "a file of no rows (no row groups)",
         correct("parquet", TABLE.slice(0, 0)), None),
    Case("parquet-no-data-files", "local", "a directory with no data files",
         no_data_files("local"), SourceNotFoundError, ("no data files in directory {file}",)),
    Case("parquet-missing", "local", "no such file", nowhere("local"), SourceNotFoundError,
         ("no such file: {file}",)),
    Case("parquet-empty-list", "local", "an empty list of files", nowhere("list"),
         OptionError, ("source= is an empty list",)),
    Case("parquet-ftp", "local", "a URL of a scheme no store serves (ftp://)", nowhere("ftp"),
         OptionError, ("unsupported URL scheme 'ftp'",)),
    Case("parquet-glob-empty", "local", "a glob that matches nothing", nowhere("glob"),
         SourceNotFoundError, ("no file matches {file}",)),
    Case("parquet-dangling-link", "local", "a symbolic link to no file among the files",
         dangling_link, SourceNotFoundError, ("no such file: {file}",)),
    Case("parquet-stray-file", "local", "a text file among the data files",
         in_folders("a.parquet", "notes.txt"), CorruptFileError,
         ("{other} is not a Parquet file",)),
    Case("parquet-hive-keys-differ", "local", "hive folders with other keys (year=2023/ and "
         "a plain folder)", in_folders("misc/a.parquet", "year=2023/b.parquet"),
         SchemaMismatchError, ("hive folders differ: {file} has keys []", "{other} has "
                               "['year']")),
    Case("parquet-hive-key-is-column", "local", "a hive key that is also a column of the files",
         in_folders("id=1/a.parquet"), SchemaMismatchError,
         ("hive key 'id' is also a column of {file}",)),
    Case("parquet-unreadable", "local", "a file no one may read (mode 000)",
         hidden_by_permissions("a/part.parquet", "a/part.parquet"), AccessDeniedError,
         ("cannot open {file}: permission denied",), within=PLANNED_IN_A_PROCESS),
    Case("parquet-folder-unsearchable", "local", "a folder above the file no one may search",
         hidden_by_permissions("a", "a/part.parquet"), AccessDeniedError,
         ("cannot reach {file}: permission denied to a folder above it",),
         within=PLANNED_IN_A_PROCESS),
    Case("parquet-subfolder-unlistable", "local", "a folder of the dataset no one may list",
         hidden_by_permissions("b", ""), AccessDeniedError,
         ("cannot list {locked}, a folder of the dataset: permission denied",),
         within=PLANNED_IN_A_PROCESS),
    Case("parquet-fifo", "local", "a FIFO among the files", fifo, NotARegularFileError,
         ("{file} is not a regular file (a FIFO)",)),
    Case("parquet-deleted", "local", "file deleted between planning and reading",
         changed_after_planning("parquet", "local", delete), SourceNotFoundError,
         ("no such file: {file}",)),
    Case("parquet-cut-after-plan", "local", "file cut between planning and reading",
         changed_after_planning("parquet", "local", cut), TruncatedFileError,
         ("{file} (row group", "the file ends at byte")),
    Case("parquet-rewritten", "local", "rewritten in place, same size, between planning and "
         "reading", changed_after_planning("parquet", "local", zero_some), CorruptFileError,
         ("{file} (row group 0) cannot be decoded",)),
    Case("parquet-grown", "local", "rewritten with twice the rows between planning and reading",
         changed_after_planning("parquet", "local", grow), CorruptFileError,
         ("{file} (row group 0) cannot be decoded",)),
    # ORC, local
    Case("orc-empty", "local", "a zero-byte file", one_file("orc", b""), CorruptFileError,
         ("{file} is empty",)),
    Case("orc-garbage", "local", "bytes that are not ORC", one_file("orc", b"id,x\n1,2\n" * 50),
         CorruptFileError, ("{file} is not an ORC file",)),
    Case("orc-cut", "local", "cut in half", one_file("orc", ORC_BYTES[:len(ORC_BYTES) // 2]),
         TruncatedFileError, ("{file} is truncated",)),
    Case("orc-tail-garbage", "local", "postscript and footer garbage",
         one_file("orc", orc_tail_garbled(ORC_BYTES)), TruncatedFileError,
         ("{file} is truncated or its tail is corrupt",)),
    Case("orc-stripe-zeroed", "local", "a stripe's data zeroed",
         one_file("orc", zeroed(ORC_BYTES, 100, 400)), CorruptFileError,
         ("{file} (stripe 0) cannot be decoded",)),
    Case("orc-type-conflict", "local", "column double in one file, string in the other",
         two_files("orc", TABLE, other_types(x=pa.string())), SchemaMismatchError,
         ("{file} and {other} disagree on column 'x': double vs string",)),
    Case("orc-grown", "local", "rewritten with twice the rows between planning and reading",
         changed_after_planning("orc", "local", grow), FileChangedError,
         ("{file} changed since it was planned (size",)),
    Case("orc-column-missing", "local", "a column missing from one file",
         two_files("orc", TABLE, TABLE.drop_columns(["x"])), SchemaMismatchError,
         ("{file} and {other} disagree on column 'x': double vs missing",)),
    Case("orc-deleted", "local", "file deleted between planning and reading",
         changed_after_planning("orc", "local", delete), SourceNotFoundError,
         ("no such file: {file}",)),
    # CSV, local
    Case("csv-empty", "local", "a zero-byte file", one_file("csv", b""), CorruptFileError,
         ("{file} is empty",)),
    Case("csv-bom-crlf", "local", "a UTF-8 byte order mark and CRLF line ends",
         correct("csv", b"\xef\xbb\xbf" + CSV_SMALL.replace("\n", "\r\n").encode()), None),
    Case("csv-header-only", "local", "a header and no rows", correct("csv", "a,b,c\n"), None),
    Case("csv-binary", "local", "binary bytes (an ORC file)", one_file("csv", ORC_BYTES),
         CorruptFileError, ("{file} cannot be read as CSV",)),
    Case("csv-columns-row-12", "local", "row 12 has 4 fields, the header 3",
         one_file("csv", csv_with("1,2,3,4\n", 10)), CorruptFileError,
         ("{file} cannot be read as CSV", "the row at byte 121 (line 12): Expected 3 columns, "
          "got 4: 1,2,3,4")),
    Case("csv-columns-late", "local", "a row past the first MiB has 4 fields",
         one_file("csv", csv_with("1,2,3,4\n", LATE + 5, LATE + 10)), CorruptFileError,
         ("{file} bytes 6-", "the row at byte 1533441: Expected 3 columns, got 4: 1,2,3,4")),
    Case("csv-unterminated-quote", "local", "row 12 opens a quote in its middle column, never "
         "closed",
         one_file("csv", csv_with('1,"2,3\n', 10)), CorruptFileError,
         ("{file} cannot be read as CSV", "the row at byte 121 (line 12): Expected 3 columns, "
          'got 2: 1,"2,3', "newlines_in_values=True")),
    Case("csv-quote-open-at-end", "local", "the last row opens a quote never closed",
         one_file("csv", csv_with('1,2,"name\n', ROWS - 1)), CorruptFileError,
         ("{file}: the row at byte 32324 (line 2001) opens a quote that is not closed by byte "
          "32334",)),
    Case("csv-quote-swallows-rows", "local", "newlines_in_values=True, row 12 opens a quote "
         "never closed (the rows after it would be one value)",
         one_file("csv", csv_with('1,2,"name\n', 10), options={"newlines_in_values": True}),
         CorruptFileError, ("{file}: the row at byte 121 opens a quote that is not closed",)),
    Case("csv-quote-open-early", "local", "newlines_in_values=True, a 1.5 MB file whose row 7 "
         "opens a quote never closed (each later newline is inside it)",
         one_file("csv", csv_with('1,2,"name\n', 5, LATE), options={"newlines_in_values": True}),
         CorruptFileError, ("{file} bytes 6-1533339: the row at byte 61 opens a quote that is "
                            "not closed",)),
    Case("csv-not-utf8", "local", "Latin-1 bytes read as UTF-8",
         one_file("csv", "a,b,c\n1,café,2\n".encode("latin-1")), CorruptFileError,
         ("{file}: byte 11", "is not UTF-8", "encoding=")),
    Case("csv-latin1", "local", "Latin-1 bytes read with encoding='latin-1'",
         correct("csv", "a,b,c\n1,café,2\n".encode("latin-1"), options={"encoding": "latin-1"}),
         None),
    Case("csv-type-late", "local", "a value past the first MiB breaks the sampled type",
         one_file("csv", csv_with("oops,1,x\n", LATE + 5, LATE + 10)), CorruptFileError,
         ("{file} bytes 6-", "the row at byte 1533441: CSV conversion error to int64: invalid "
          "value 'oops'", "schema=")),
    Case("csv-type-conflict", "local", "column int64 in one file, string in the other",
         two_files("csv", TABLE, other_types(id=pa.string()).set_column(
             0, "id", pa.array([f"#{i}" for i in range(ROWS)]))), SchemaMismatchError,
         ("{file} and {other} disagree on column 'id'",)),
    Case("csv-column-renamed", "local", "a column named otherwise in one file",
         two_files("csv", TABLE, TABLE.rename_columns(["id", "y", "name"])),
         SchemaMismatchError, ("{file} and {other} disagree on column 'x'",)),
    Case("csv-cut-after-plan", "local", "file cut between planning and reading",
         changed_after_planning("csv", "local", cut), TruncatedFileError,
         ("{file} (bytes", "ends at byte")),
    Case("csv-grown", "local", "rewritten with twice the rows between planning and reading",
         changed_after_planning("csv", "local", grow), FileChangedError,
         ("{file} changed since it was planned (size",)),
    # HTTP(S)
    Case("http-404", "http", "no such file (404)", nowhere("http"), SourceNotFoundError,
         ("no such file: {file} (HTTP 404)",)),
    Case("http-403", "http", "access forbidden (403)",
         one_file("parquet", PARQUET, "http", "/forbidden"), AccessDeniedError,
         ("access denied to {file} (HTTP 403)",)),
    Case("http-401", "http", "a token wanted and not given (401)",
         one_file("parquet", PARQUET, "http", "/bearer"), AccessDeniedError,
         ("access denied to {file} (HTTP 401)", "http_headers=")),
    Case("http-wrong-login", "http", "a wrong user:password@ for a server that wants a token "
         "(401)", one_file("parquet", PARQUET, "http", "/bearer", login="reader:wrong"),
         AccessDeniedError, ("(HTTP 401): check the URL's user:password@",)),
    Case("http-empty", "http", "a zero-byte file", one_file("parquet", b"", "http"),
         CorruptFileError, ("{file} is empty",)),
    Case("http-500", "http", "server error (500)",
         one_file("parquet", PARQUET, "http", "/status-500"), RemoteError,
         ("{file} failed: HTTP 500",)),
    Case("http-no-range", "http", "server ignores Range, sends the whole file (200)",
         one_file("parquet", PARQUET, "http", "/norange"), RangeNotSupportedError,
         ("{file}: the server ignored 'Range: bytes=-65536' (HTTP 200)",)),
    Case("http-wrong-range", "http", "server answers a Range with other bytes (206, its "
         "Content-Range says so)", one_file("parquet", PARQUET, "http", "/wrongrange"),
         RangeNotSupportedError, ("{file}: the server answered 'Range: bytes=4-", "other bytes "
                                  "than asked")),
    Case("http-broken-off", "http", "server closes the connection mid-body",
         one_file("parquet", PARQUET, "http", "/brokenoff"), RemoteError,
         ("{file}: the response to 'Range: bytes=-65536' broke off",)),
    Case("http-drip", "http", "server drips 2000 bytes/s (a deadline: 1 s + bytes at "
         "slowest_rate=50000)",
         one_file("parquet", PARQUET, "http", "/drip-2000Bps",
                  storage={"timeout": 1, "slowest_rate": 50_000}), RemoteError,
         ("{file}: the response to 'Range: bytes=-65536'", "slower than slowest_rate=50000"),
         within=4),
    Case("http-no-answer", "http", "server answers after 3 s, timeout=0.5",
         one_file("parquet", PARQUET, "http", "/shaped-3000ms-100MBps",
                  storage={"timeout": 0.5}), UnreachableError,
         ("{file}: no answer in 0.5 s",), within=3),
    Case("http-refused", "http", "connection refused (nothing listens)", nowhere("closed"),
         UnreachableError, ("cannot reach {file}",)),
    Case("https-untrusted", "http", "TLS certificate from an unknown authority",
         one_file("parquet", PARQUET, "https"), UnreachableError,
         ("cannot reach {file}", "CERTIFICATE_VERIFY_FAILED")),
    Case("https-wrong-name", "http", "a trusted TLS certificate for another host name",
         https_misnamed, UnreachableError,
         ("cannot reach {file}", "Hostname mismatch, certificate is not valid for 'localhost'")),
    Case("http-no-such-host", "http", "a host name that does not resolve",
         nowhere("unresolvable"), UnreachableError,
         ("cannot reach {file}", f"Failed to resolve '{UNRESOLVABLE}'")),
    Case("http-redirect", "http", "redirect (302) to the file's path",
         correct("parquet", PARQUET, "http", "/redirect"), None),
    Case("http-redirect-loop", "http", "redirect (302) to itself, for ever",
         one_file("parquet", PARQUET, "http", "/redirect-loop"), RemoteError,
         ("GET {file} was redirected more than 30 times",)),
    Case("http-unstable-etag", "http", "another ETag in every answer for one file",
         one_file("parquet", PARQUET, "http", "/unstable-etag"), FileChangedError,
         ("{file} changed since it was planned", "check_version=False")),
    Case("http-rewritten", "http", "rewritten in place, same size, between planning and reading "
         "(ETag changes)", changed_after_planning("parquet", "http", zero_some),
         FileChangedError, ("{file} changed since it was planned (etag",)),
    Case("http-csv-cut", "http", "a CSV file cut between planning and reading",
         changed_after_planning("csv", "http", cut), FileChangedError,
         ("{file} changed since it was planned (size",)),
    Case("http-deleted", "http", "file deleted between planning and reading",
         changed_after_planning("parquet", "http", delete), SourceNotFoundError,
         ("no such file: {file}",)),
    Case("http-parquet-cut", "http", "a Parquet file cut in half",
         one_file("parquet", PARQUET[:len(PARQUET) // 2], "http"), TruncatedFileError,
         ("{file} is truncated",)),
    Case("http-csv-columns", "http", "a CSV row with 4 fields, the header 3",
         one_file("csv", csv_with("1,2,3,4\n", 10), "http"), CorruptFileError,
         ("{file} cannot be read as CSV", "the row at byte 121 (line 12)")),
    Case("http-folder", "http", "a folder URL (HTTP has no listing)", nowhere("http", ""),
         OptionError, ("HTTP has no directory listing",)),
    # S3
    Case("s3-wrong-secret", "s3", "wrong secret key",
         one_file("parquet", PARQUET, "s3", storage={"secret": "wrong"}), AccessDeniedError,
         ("access denied to {file}", "check key=/secret=")),
    Case("s3-unknown-key", "s3", "an access key the store does not know",
         one_file("parquet", PARQUET, "s3", storage={"key": "AKIAUNKNOWN"}),
         AccessDeniedError, ("access denied to {file}",)),
    Case("s3-wrong-token", "s3", "temporary credentials with a wrong session token",
         one_file("parquet", PARQUET, "s3", storage={"session_token": "not-the-token"}),
         AccessDeniedError, ("access denied to {file}", "session_token=")),
    Case("s3-anonymous", "s3", "no credentials (anonymous) for a private bucket",
         one_file("parquet", PARQUET, "s3", storage={"anonymous": True, "key": None,
                                                      "secret": None}),
         AccessDeniedError, ("access denied to {file}",)),
    Case("s3-empty", "s3", "a zero-byte object", one_file("parquet", b"", "s3"),
         CorruptFileError, ("{file} is empty",)),
    Case("s3-no-bucket", "s3", "no such bucket", s3_bucket_missing, SourceNotFoundError,
         ("no such bucket 'no-such-bucket': {file}",)),
    Case("s3-no-key", "s3", "no such key", nowhere("s3"), SourceNotFoundError,
         ("no such object or prefix: {file}",)),
    Case("s3-no-data-files", "s3", "a prefix with no data files", no_data_files("s3"),
         SourceNotFoundError, ("no data files under {file}",)),
    Case("s3-refused", "s3", "endpoint refuses connections",
         nowhere("s3", endpoint="http://127.0.0.1:{port}", timeout=2.0), UnreachableError,
         ("cannot reach the S3 endpoint http://127.0.0.1:{port} for {file}",)),
    Case("s3-no-such-host", "s3", "an endpoint whose host name does not resolve",
         nowhere("s3", endpoint=f"http://{UNRESOLVABLE}", timeout=2.0), UnreachableError,
         (f"cannot reach the S3 endpoint http://{UNRESOLVABLE} for {{file}}",
          f"Could not resolve host: {UNRESOLVABLE}")),
    Case("s3-drip", "s3", "endpoint drips 2000 bytes/s (a deadline: 1 s + bytes at "
         "slowest_rate=50000)", s3_dripped, RemoteError,
         ("{file}: the read of bytes", "slower than slowest_rate=50000")),
    Case("s3-rewritten", "s3", "object put again between planning and reading, same size, "
         "within the second (ETag changes)", changed_after_planning("parquet", "s3", s3_zero_some),
         FileChangedError, ("{file} changed since it was planned (etag",)),
    Case("s3-grown", "s3", "object put again between planning and reading, 10 bytes longer",
         changed_after_planning("parquet", "s3", s3_grow), FileChangedError,
         ("{file} changed since it was planned (size",)),
    Case("s3-deleted", "s3", "object deleted between planning and reading",
         changed_after_planning("parquet", "s3", s3_delete), SourceNotFoundError,
         ("no such object: {file}",)),
    Case("s3-parquet-cut", "s3", "a Parquet object cut in half",
         one_file("parquet", PARQUET[:len(PARQUET) // 2], "s3"), TruncatedFileError,
         ("{file} is truncated",)),
    Case("s3-orc-garbage", "s3", "an ORC object of garbage bytes",
         one_file("orc", b"id,x\n1,2\n" * 50, "s3"), CorruptFileError,
         ("{file} is not an ORC file",)),
    Case("s3-type-conflict", "s3", "column int64 in one object, string in the other",
         two_files("parquet", TABLE, other_types(id=pa.string()), "s3"), SchemaMismatchError,
         ("{file} and {other} disagree on column 'id'",)),
    Case("s3-csv-not-utf8", "s3", "Latin-1 bytes read as UTF-8",
         one_file("csv", "a,b,c\n1,café,2\n".encode("latin-1"), "s3"), CorruptFileError,
         ("{file}: byte 11", "is not UTF-8")),
]


@pytest.fixture(scope="session")
def s3_client(s3_server):
    import boto3

    return boto3.client("s3", endpoint_url=s3_server.endpoint, aws_access_key_id=s3_server.key,
                        aws_secret_access_key=s3_server.secret, region_name="us-east-1")


@pytest.fixture
def stage(request, http_server, https_server, s3_server, s3_client, closed_port,
          dripping_s3_endpoint):
    folder = http_server.root / f"bad-input-{request.node.callspec.id}"
    folder.mkdir()
    return Stage(folder, http_server, https_server, s3_server, s3_client, closed_port,
                 dripping_s3_endpoint)


def run(read: Read, engine, read_plan, request) -> pd.DataFrame:
    """The read's rows: through the format's reader, or, where the files change after planning,
    the plan made before the change; where permissions must bind, its plan's error alone."""
    if read.bound_by_permissions:
        request.getfixturevalue("plan_bound_by_permissions")(read.source, read.format)
        raise AssertionError(f"{read.source} was planned where permissions hide it")
    if read.change is None:
        frame = READERS[read.format](read.source, storage=read.storage, engine=engine,
                                     **read.options)
        return frame.to_pandas().reset_index(drop=True)
    plan = plan_fragments(read.source, format=format_for(read.format, **read.options),
                          workers=engine.workers, storage=read.storage)
    read.change()
    return read_plan(plan, engine).to_pandas()


def swap_environment(variables: Mapping[str, str | None]) -> dict[str, str | None]:
    """``variables`` set in this process's environment (None: unset); what they were."""
    before = {name: os.environ.get(name) for name in variables}
    for name, value in variables.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    return before


@contextlib.contextmanager
def environment(engine, variables: Mapping[str, str]) -> Iterator[None]:
    """``variables`` in the client's and the workers' processes (planning reads footers on the
    workers), as a cluster started with them has them."""
    if not variables:
        yield
        return
    here = swap_environment(variables)
    there = engine.client.run(swap_environment, variables)
    try:
        yield
    finally:
        swap_environment(here)
        for worker, before in there.items():
            engine.client.run(swap_environment, before, workers=[worker])


@pytest.mark.parametrize("case", [
    pytest.param(case, id=case.id, marks=pytest.mark.timeout(case.within + SETUP_SECONDS))
    for case in CASES])
def test_bad_input(case, stage, engine, read_plan, request):
    """The case's outcome within its bound; a read that hangs is stopped by the test's
    timeout."""
    read = case.make(stage)
    with environment(engine, read.environment):
        started = time.monotonic()
        if case.error is None:
            got = run(read, engine, read_plan, request)
            elapsed = time.monotonic() - started
            pd.testing.assert_frame_equal(got, read.expected, check_dtype=False)
        else:
            with pytest.raises(case.error) as caught:
                run(read, engine, read_plan, request)
            elapsed = time.monotonic() - started
            assert isinstance(caught.value, GpuframeError)
            for words in case.words:
                assert words.format(**read.names) in str(caught.value)
    assert elapsed < case.within, f"{case.id}: {elapsed:.1f} s, over its {case.within} s"


def test_the_table_tries_every_store_and_format():
    assert {case.storage for case in CASES} == {"local", "http", "s3"}
    assert {case.id.split("-")[0] for case in CASES if case.storage == "local"} == {
        "parquet", "orc", "csv"}
    assert len({case.id for case in CASES}) == len(CASES) >= 40
