import pandas as pd

from gpuframe.demo import run_demo, same_rows


def test_demo_job_matches_pandas(engine):
    result = run_demo(engine, rows=20_000)
    assert result.matches_pandas
    assert result.rows_out == 20_000
    assert set(result.partitions_per_worker) <= set(engine.workers)
    assert list(result.revenue_by_segment.index) == ["online", "partner", "retail", "wholesale"]
    assert set(result.seconds) == {"write parquet", "ingest", "join", "aggregate", "gather"}


def test_same_rows_sees_a_wrong_join():
    good = pd.DataFrame({"order_id": [1, 2], "amount": [1.0, 2.0], "segment": ["a", "b"]})
    assert same_rows(good.iloc[::-1], good)
    assert not same_rows(good.assign(amount=[1.0, 2.5]), good)
    assert not same_rows(good.iloc[:1], good)
