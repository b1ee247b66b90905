"""Where a dataset's bytes live, one module per backend behind one range-read contract.

- :mod:`.base`: :class:`~.base.StorageOptions`, a remote file's
  :class:`~.base.RemoteVersion`, and the contract every backend keeps,
  :class:`~.base.RangeSource` (one file's bytes by range, counted);
- :mod:`.local`, :mod:`.http`, :mod:`.s3`: local files, ``http(s)://`` URLs, ``s3://`` objects;
- :mod:`.ranges`: many ranges of a source fetched at once, and a file object over one.

:func:`open_source` picks the backend by the path's scheme, and :func:`open_store` the
:class:`~.base.DatasetStore` a dataset is written to.
"""

from __future__ import annotations

from ...errors import OptionError
from .base import (
    DatasetStore,
    RemoteVersion,
    Source,
    StorageOptions,
    scheme_of,
    storage_options,
)
from .http import HttpSource
from .local import LocalSource, LocalStore
from .s3 import S3Source, S3Store


def open_source(path: str, storage: StorageOptions | None = None,
                version: RemoteVersion | None = None) -> Source:
    """The :class:`~.base.Source` of a local path, ``file://``, ``http(s)://`` or ``s3://`` URL;
    ``version``: the remote file's as planning saw it (:class:`~.base.Source`)."""
    scheme = scheme_of(path)
    if scheme == "file":
        return LocalSource(path)
    storage = storage or storage_options()
    if scheme in ("http", "https"):
        return HttpSource(path, storage, version)
    return S3Source(path, storage, version)


def open_store(path: str, storage: StorageOptions | None = None) -> DatasetStore:
    """The :class:`~.base.DatasetStore` of a local path, ``file://`` or ``s3://`` URL."""
    scheme = scheme_of(path)
    if scheme == "file":
        return LocalStore()
    if scheme == "s3":
        return S3Store(storage or storage_options())
    raise OptionError(f"cannot write to {path}: HTTP has no writes; write to a local path or "
                      "an s3:// URL")
