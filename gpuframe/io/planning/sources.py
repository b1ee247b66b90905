"""A dataset's files: a path, glob, directory, URL or list of them expanded into files, and each
file's hive values, the ``key=value`` folders it lies under, typed as pyarrow types them.
"""

from __future__ import annotations

import fnmatch
import glob as globbing
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import unquote

import pyarrow as pa

from ...errors import OptionError
from ..errors import (
    AccessDeniedError,
    NotARegularFileError,
    SchemaMismatchError,
    SourceNotFoundError,
)
from ..statistics import HiveValue
from ..storage.base import StorageOptions, scheme_of
from ..storage.s3 import list_s3

DatasetSource = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""What a read is given: a path, glob, directory or URL, or a list of them."""
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
"""The folder value that hive writers give a null."""
_GLOB_CHARS = "*?["


def expand_source(source: DatasetSource, storage: StorageOptions
                  ) -> list[tuple[str, str | None]]:
    """(file, base folder of its hive folders or None) for every data file of ``source``.

    Directories are walked recursively, skipping names that start with '_' or '.' (like
    ``_SUCCESS``), as pyarrow does; globs and directories must match at least one file.
    """
    if isinstance(source, (list, tuple)):
        if not source:
            raise OptionError("source= is an empty list")
        found: dict[str, str | None] = {}
        for item in source:
            for path, base in expand_source(item, storage):
                found.setdefault(path, base)
        return list(found.items())
    if not isinstance(source, (str, os.PathLike)):
        raise OptionError(f"source= must be a path, URL or list of them, not {type(source)!r}")
    path = os.fspath(source)
    scheme = scheme_of(path)
    if scheme in ("http", "https"):
        if any(c in path.split("?", 1)[0] for c in _GLOB_CHARS) or path.endswith("/"):
            raise OptionError(f"{path}: HTTP has no directory listing; name each file's URL")
        return [(path, None)]
    if scheme == "s3":
        return _expand_s3(path, storage)
    if path.startswith("file://"):
        path = unquote(path[len("file://"):])
    if any(c in path for c in _GLOB_CHARS):
        matches = sorted(check_regular(p) for p in globbing.glob(path, recursive=True)
                         if not os.path.isdir(p))
        if not matches:
            raise SourceNotFoundError(f"no file matches {path}")
        return [(p, _glob_base(path)) for p in matches]
    if os.path.isdir(path):
        files: list[str] = []
        for folder, dirs, names in os.walk(path, onerror=_refuse_unlisted):
            dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
            files.extend(os.path.join(folder, n) for n in sorted(names)
                         if not n.startswith(("_", ".")))
        if not files:
            raise SourceNotFoundError(f"no data files in directory {path}")
        return [(check_regular(f), path) for f in files]
    try:
        os.stat(path)
    except FileNotFoundError as exc:
        raise SourceNotFoundError(f"no such file: {path}") from exc
    except PermissionError as exc:  # os.path.exists says False
        raise AccessDeniedError(f"cannot reach {path}: permission denied to a folder above "
                                "it") from exc
    return [(check_regular(path), None)]


def _refuse_unlisted(exc: OSError) -> None:
    """A folder of a dataset that cannot be listed would leave its files out of the read."""
    if isinstance(exc, PermissionError):
        raise AccessDeniedError(f"cannot list {exc.filename}, a folder of the dataset: "
                                "permission denied") from exc
    raise SourceNotFoundError(f"cannot list {exc.filename}, a folder of the dataset: "
                              f"{exc.strerror}") from exc


def check_regular(path: str) -> str:
    """``path``, where it is a regular file (a link to one too); :class:`NotARegularFileError`
    names it where it is a FIFO, socket or device, whose reads could block forever."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError as exc:  # a dangling link
        raise SourceNotFoundError(f"no such file: {path}") from exc
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise NotARegularFileError(f"{path} is not a regular file ({_kind(mode)}): refused, as "
                                   f"reading it could block")
    return path


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a file"


def _glob_base(pattern: str) -> str:
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if any(c in part for c in _GLOB_CHARS):
            return "/".join(parts[:i])
    return os.path.dirname(pattern)


def _expand_s3(url: str, storage: StorageOptions) -> list[tuple[str, str | None]]:
    if not any(c in url for c in _GLOB_CHARS):
        listed = list_s3(url, storage)
        if listed == [url]:
            return [(url, None)]
        files = [u for u in listed if not _hidden(u[len(url):])]
        if not files:
            raise SourceNotFoundError(f"no data files under {url}")
        return [(u, url.rstrip("/")) for u in files]
    base = _glob_base(url)
    files = [u for u in list_s3(base, storage)
             if fnmatch.fnmatchcase(u, url) and not _hidden(u[len(base):])]
    if not files:
        raise SourceNotFoundError(f"no object matches {url}")
    return [(u, base) for u in files]


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/") if part)


def hive_values_of(found: Iterable[tuple[str, str | None]]
                   ) -> dict[str, dict[str, HiveValue]]:
    """Each file's hive values ``{key: value}``, typed as pyarrow's hive discovery types them:
    int32 when every value of a key is an integer that fits, else string;
    ``__HIVE_DEFAULT_PARTITION__`` is null."""
    raw: dict[str, dict[str, str | None]] = {}
    for path, base in found:
        if base is None:
            continue
        relative = path[len(base):].strip("/").split("/")[:-1]
        values = {}
        for part in relative:
            if "=" in part:
                key, value = part.split("=", 1)
                value = unquote(value)
                values[unquote(key)] = None if value == HIVE_NULL else value
        raw[path] = values
    if not raw:
        return {}
    keys = next(iter(raw.values())).keys()
    first = next(iter(raw))
    for path, values in raw.items():
        if values.keys() != keys:
            raise SchemaMismatchError(
                f"hive folders differ: {first} has keys {sorted(keys)}, "
                f"{path} has {sorted(values.keys())}")
    typed = {key: _hive_type([v[key] for v in raw.values()]) for key in keys}
    return {path: {k: (None if v is None else int(v) if typed[k] == pa.int32() else v)
                   for k, v in values.items()}
            for path, values in raw.items()}


def _hive_type(values: list[str | None]) -> pa.DataType:
    present = [v for v in values if v is not None]
    try:
        if present and all(-2**31 <= int(v) < 2**31 for v in present):
            return pa.int32()
    except ValueError:
        pass
    return pa.string()


def hive_schema_of(hive_values: Mapping[str, Mapping[str, HiveValue]]) -> pa.Schema:
    """The columns the files' hive values make, typed as :func:`hive_values_of` typed them."""
    if not hive_values:
        return pa.schema([])
    columns: dict[str, list[HiveValue]] = {}
    for values in hive_values.values():
        for key, value in values.items():
            columns.setdefault(key, []).append(value)
    return pa.schema([(k, pa.int32() if any(isinstance(v, int) for v in vs) else pa.string())
                      for k, vs in columns.items()])
