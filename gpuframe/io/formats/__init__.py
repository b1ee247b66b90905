"""The file formats a dataset may be in, one module each behind one class.

- :mod:`.base`: :class:`~.base.FileFormat`, what planning and reading ask of a format, and the
  :class:`~.base.Fetcher` its Arrow reader fetches bytes through;
- :mod:`.parquet`, :mod:`.orc`, :mod:`.csv`: the formats: row groups, stripes, line-aligned
  byte ranges;
- :mod:`.pages`: Parquet page by page (page index, page selection, one-column files), over the
  compact-protocol codec of :mod:`.thrift`;
- :mod:`.orc_tail`: the ORC tail's stripes and statistics, which Arrow does not expose.

:func:`format_for` picks a format by name.
"""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq

from ...errors import OptionError
from .base import FileFormat
from .csv import CsvFormat, CsvMetadata
from .orc import OrcFormat, OrcMetadata
from .parquet import ParquetFormat

FileMetadata = pq.FileMetaData | OrcMetadata | CsvMetadata
"""What :meth:`~.base.FileFormat.read_metadata` gives, by format."""


def format_for(format: str | FileFormat, **options: Any) -> FileFormat:
    """The :class:`~.base.FileFormat` called ``format`` ('parquet', 'orc', 'csv') with
    ``options``."""
    if isinstance(format, FileFormat):
        if options:
            raise OptionError(f"options {sorted(options)} given with a {format!r} object")
        return format
    kinds = {"parquet": ParquetFormat, "orc": OrcFormat, "csv": CsvFormat}
    if format not in kinds:
        raise OptionError(f"format={format!r} is not one of " + ", ".join(kinds))
    return kinds[format](**options)
