"""benchmarks/tpch at SF 0.01: every query's answer equals DuckDB's on the same Parquet files,
on the pandas stand-in of gpuframe's API now, on dask.dataframe through the same API (the dask
baseline), and on gpuframe itself once its frames can group; and the answer check says no to wrong
answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import gpuframe
from gpuframe import DistributedFrame

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from tpch import dask_engine, pandas_engine  # noqa: E402
from tpch.check import DuckDB, compare  # noqa: E402
from tpch.datagen import generate  # noqa: E402
from tpch.queries import QUERIES  # noqa: E402
from tpch.run import answer, parse_queries, table  # noqa: E402

NUMBERS = list(range(1, 23))


@pytest.fixture(scope="session")
def tpch_root(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("tpch"), 0.01)


@pytest.fixture(scope="session")
def duckdb_answers(tpch_root):
    duck = DuckDB(tpch_root)
    answers = {number: duck.answer(number) for number in NUMBERS}
    duck.close()
    return answers


@pytest.fixture(scope="session")
def pandas_read(tpch_root):
    tables: dict[str, pandas_engine.PandasFrame] = {}

    def read(table: str) -> pandas_engine.PandasFrame:
        if table not in tables:
            tables[table] = pandas_engine.read_parquet(tpch_root / table)
        return tables[table]

    return read


def test_the_data_is_tpch_at_the_scale_asked(tpch_root):
    assert pd.read_parquet(tpch_root / "lineitem").shape == (60175, 16)
    assert len(list((tpch_root / "lineitem").glob("*.parquet"))) == 4
    orders = pd.read_parquet(tpch_root / "orders")
    assert len(orders) == 15000 and orders.o_orderdate.dtype.kind == "M"
    assert orders.o_totalprice.dtype == "float64"
    assert generate(tpch_root.parent, 0.01) == tpch_root  # kept, not generated again


@pytest.mark.parametrize("number", NUMBERS, ids=[f"q{n}" for n in NUMBERS])
def test_query_on_the_pandas_stand_in_equals_duckdb(number, pandas_read, duckdb_answers):
    got = answer(QUERIES[number](pandas_read))
    expected = duckdb_answers[number]
    verdict = compare(number, got, expected)
    assert verdict.ok, verdict
    assert list(got.columns) == list(expected.columns)


@pytest.fixture(scope="module")
def dask_client():
    """A two-process dask.distributed cluster on loopback for the dask baseline's queries; made
    current only in the tests that ask for it, so gpuframe's engine stays the default client."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster,
                                                                 set_as_default=False) as client:
        yield client


@pytest.mark.parametrize("number", NUMBERS, ids=[f"q{n}" for n in NUMBERS])
def test_query_on_dask_dataframe_equals_duckdb(number, dask_client, tpch_root, duckdb_answers):
    def read(table: str) -> dask_engine.DaskFrame:
        return dask_engine.read_parquet(tpch_root / table)

    with dask_client.as_current():
        got = answer(QUERIES[number](read))
    expected = duckdb_answers[number]
    verdict = compare(number, got, expected)
    assert verdict.ok, verdict
    assert list(got.columns) == list(expected.columns)


def gpuframe_verdict(number: int, engine, tpch_root, duckdb_answers):
    """Query ``number`` on ``engine`` against DuckDB's answer."""
    def read(table: str) -> DistributedFrame:
        return gpuframe.read_parquet(str(tpch_root / table), engine=engine)

    return compare(number, answer(QUERIES[number](read)), duckdb_answers[number])


@pytest.mark.parametrize("number", NUMBERS, ids=[f"q{n}" for n in NUMBERS])
def test_query_on_gpuframe_cpu_equals_duckdb(number, engine, tpch_root, duckdb_answers):
    verdict = gpuframe_verdict(number, engine, tpch_root, duckdb_answers)
    assert verdict.ok, verdict


@pytest.mark.gpu
@pytest.mark.parametrize("number", NUMBERS, ids=[f"q{n}" for n in NUMBERS])
def test_query_on_gpuframe_gpus_equals_duckdb(number, gpu_engine, tpch_root, duckdb_answers):
    verdict = gpuframe_verdict(number, gpu_engine, tpch_root, duckdb_answers)
    assert verdict.ok, verdict


@pytest.fixture
def q3(duckdb_answers):
    return duckdb_answers[3]


def test_the_check_refuses_wrong_answers(q3):
    assert compare(3, q3.copy(), q3).ok
    changed = q3.copy()
    changed.loc[4, "revenue"] *= 1.001
    assert "column 'revenue' differs" in compare(3, changed, q3).reason
    assert "rows" in compare(3, q3.head(9), q3).reason
    assert "columns" in compare(3, q3.iloc[:, :3], q3).reason
    reversed_rows = q3.iloc[::-1]
    assert "ORDER BY column 'revenue'" in compare(3, reversed_rows, q3).reason
    other_key = q3.copy()
    other_key.loc[0, "l_orderkey"] += 1
    assert not compare(3, other_key, q3).ok


def test_the_check_takes_ties_in_any_order_and_float_noise():
    duck = pd.DataFrame({"k": [2, 1, 1], "name": ["a", "b", "c"], "v": [1e6, 0.5, 0.25]})
    ours = pd.DataFrame({"key": [2, 1, 1], "n": ["a", "c", "b"],
                         "v": [1e6 + 0.005, 0.25, 0.5 * (1 + 1e-9)]})
    assert compare(4, ours, duck).ok  # q4 orders by its first column: ties in any order
    assert not compare(4, ours.iloc[[1, 0, 2]], duck).ok
    ours.loc[2, "v"] = 0.5001
    assert "column 'v' differs" in compare(4, ours, duck).reason


def test_the_check_compares_decimals_with_floats_and_times_of_any_unit():
    from decimal import Decimal

    import pyarrow as pa

    duck = pd.DataFrame({"d": pd.to_datetime(["1995-03-15", "1996-01-02"]).as_unit("us"),
                         "v": [Decimal("10.25"), Decimal("3.50")]})
    ours = pd.DataFrame({"d": pd.to_datetime(["1995-03-15", "1996-01-02"]).as_unit("ns"),
                         "v": pd.array([Decimal("10.25"), Decimal("3.50")],
                                       dtype=pd.ArrowDtype(pa.decimal128(12, 2)))})
    assert compare(4, ours, duck).ok
    assert compare(4, ours.assign(v=[10.25, 3.5]), duck).ok
    assert not compare(4, ours.assign(v=[10.25, 3.6]), duck).ok
    assert not compare(4, ours.assign(d=ours.d + pd.Timedelta(days=1)), duck).ok


def test_the_runner_reads_query_lists_and_prints_one_table():
    assert parse_queries("1-3,9") == [1, 2, 3, 9]
    with pytest.raises(SystemExit, match="1 to 22"):
        parse_queries("0-2")
    from tpch.check import Verdict

    rows = [{"query": 1, "cold": 2.0, "best": 1.0, "duckdb": 2.0, "rows": 4,
             "check": Verdict(True)},
            {"query": 2, "cold": 1.0, "best": 0.5, "duckdb": 0.25, "rows": 3,
             "check": Verdict(False, "3 rows, DuckDB's 4")}]
    text = table(rows, ["duckdb"])
    assert "| q1 | 2.000 | 1.000 | 2.000 | 2.00x | 4 | OK |" in text
    assert "| q2 | 1.000 | 0.500 | 0.250 | 0.50x | 3 | FAIL: 3 rows, DuckDB's 4 |" in text
    assert "geomean 1.00x" in text and "1/2 OK" in text


def test_the_runner_checks_gpuframe_and_times_the_baselines(tpch_root):
    """DuckDB, pandas, dask.dataframe on a cluster shaped as gpuframe's, and gpuframe with its
    task exchange, each timed in its own column (and checked: a wrong answer is no time)."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "tpch" / "run.py"), "--sf", "0.01",
         "--dir", str(tpch_root.parent), "--queries", "4,13", "--repeat", "1", "--workers", "2",
         "--dashboard", "127.0.0.1:0", "--baselines", "duckdb,pandas,dask,tasks"],
        capture_output=True, text=True, timeout=240, check=False)
    out = done.stdout
    lines = out.splitlines()
    head = next((line for line in lines if line.startswith("| query |")), "")
    assert head, out + done.stderr[-3000:]
    cells = [cell.strip() for cell in head.split("|")]
    rows = [line.split("|") for line in lines if line.startswith(("| q4 |", "| q13 |"))]
    assert len(rows) == 2, out
    for name in ("duckdb", "pandas", "dask", "tasks"):
        column = cells.index(f"{name} s")
        assert all(row[column].strip() != "-" for row in rows), (name, out)
    assert done.returncode == 0 and "2/2 OK" in out, out
