"""TPC-H data as Parquet, made by DuckDB's ``dbgen`` and kept by scale factor.

DuckDB cannot download its tpch extension offline, so the extension is loaded from the
``duckdb-extension-tpch`` package's folder. Each table is a folder of a few files, so that reads
fan out over the workers. Decimals are written as doubles and dates as timestamps, as dataframe
benchmarks (PDS-H) hold them: pandas has no decimal arithmetic, and reads Parquet dates as Python
objects.

  python benchmarks/tpch/datagen.py --sf 1 --dir /tmp/tpch
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

TABLES = ("customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier")


def tpch_extension() -> Path:
    """The extension file the ``duckdb-extension-tpch`` package ships."""
    spec = importlib.util.find_spec("duckdb_extension_tpch")
    if spec is None or spec.origin is None:
        raise RuntimeError("the package duckdb-extension-tpch is not installed "
                           "(pip install duckdb-extension-tpch==1.5.5)")
    found = sorted(Path(spec.origin).parent.rglob("tpch.duckdb_extension"))
    if not found:
        raise RuntimeError(f"no tpch.duckdb_extension under {Path(spec.origin).parent}")
    return found[-1]


def connect_tpch():
    """A DuckDB connection with the tpch extension loaded."""
    import duckdb

    connection = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    connection.execute(f"LOAD '{tpch_extension()}'")
    return connection


def dataset_dir(root: Path, sf: float) -> Path:
    return Path(root) / f"sf{sf:g}"


def generate(root: Path, sf: float, files_per_table: int = 4) -> Path:
    """The folder of SF ``sf``'s tables under ``root`` (one folder per table), generated on first
    use; a ``_done`` marker says a folder is complete, so an interrupted run starts again."""
    out = dataset_dir(root, sf)
    if (out / "_done").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    connection = connect_tpch()
    connection.execute(f"CALL dbgen(sf={sf})")
    for table in TABLES:
        rows = connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        folder = out / table
        folder.mkdir(exist_ok=True)
        for old in folder.glob("*.parquet"):
            old.unlink()
        columns = ", ".join(_as_written(name, kind) for name, kind, *_ in
                            connection.execute(f"DESCRIBE {table}").fetchall())
        # Few-row tables stay one file; others are cut into row ranges of about equal size.
        pieces = files_per_table if rows >= 10_000 else 1
        step = -(-rows // pieces)
        for i in range(pieces):
            connection.execute(
                f"COPY (SELECT {columns} FROM {table} "
                f"WHERE rowid >= {i * step} AND rowid < {(i + 1) * step}) "
                f"TO '{folder / f'part-{i}.parquet'}' (FORMAT parquet)")
    connection.close()
    (out / "_done").touch()
    return out


def _as_written(name: str, kind: str) -> str:
    if kind.startswith("DECIMAL"):
        return f"CAST({name} AS DOUBLE) AS {name}"
    if kind == "DATE":
        return f"CAST({name} AS TIMESTAMP) AS {name}"
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1)")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/gpuframe-tpch"),
                        help="root folder; the data goes to <dir>/sf<SF>/<table>/")
    parser.add_argument("--files", type=int, default=4, help="files per large table")
    args = parser.parse_args()
    print(generate(args.dir, args.sf, args.files))


if __name__ == "__main__":
    main()
