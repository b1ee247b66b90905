"""A read's filters as one libcudf expression: literals of each column's own type, pyarrow's
null rules, and the terms an expression cannot write exactly computed term by term."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest
from filter_cases import FILTER_CASES, parsed, table_with_nulls

from gpuframe.io.readers.device_filters import arrow_literal


@pytest.mark.parametrize("kind, value, expected", [
    (pa.int32(), 7, pa.scalar(7, pa.int32())),
    (pa.uint8(), 200, pa.scalar(200, pa.uint8())),
    (pa.int64(), 2.5, None),
    (pa.int64(), True, None),
    (pa.float64(), 3, pa.scalar(3.0)),
    (pa.float64(), 0.25, pa.scalar(0.25)),
    (pa.float64(), 2**60 + 1, None),
    (pa.bool_(), True, pa.scalar(True)),
    (pa.bool_(), 1, None),
    (pa.string(), "MAIL", pa.scalar("MAIL")),
    (pa.string(), 3, None),
    (pa.timestamp("s"), datetime.date(1994, 1, 1),
     pa.scalar(datetime.datetime(1994, 1, 1), pa.timestamp("s"))),
    (pa.timestamp("us"), datetime.datetime(1994, 1, 1, 0, 0, 0, 5),
     pa.scalar(datetime.datetime(1994, 1, 1, 0, 0, 0, 5), pa.timestamp("us"))),
    (pa.timestamp("s"), datetime.datetime(1994, 1, 1, 0, 0, 0, 5), None),
    (pa.timestamp("ms"), datetime.datetime(1994, 1, 1, tzinfo=datetime.timezone.utc), None),
    (pa.timestamp("ms"), "1994-01-01", None),
])
def test_a_literal_has_the_columns_type_or_is_refused_where_it_would_compare_otherwise(
        kind, value, expected):
    got = arrow_literal(kind, value)
    assert got == expected and (got is None or got.type == kind)


def _cudf_frame(table: pa.Table):
    """cuDF reads a Parquet date as a timestamp: the date column as it arrives from a read."""
    import cudf

    return cudf.DataFrame.from_arrow(table.set_column(3, "d", table["d"].cast(pa.timestamp("s"))))


def _counting(monkeypatch):
    """How many expressions are evaluated and how many terms go term by term."""
    import pylibcudf as plc

    from gpuframe.io.readers import device_filters

    calls = {"expressions": 0, "terms": 0}
    evaluate, term = plc.transform.compute_column, device_filters.term_kept

    def counted_evaluate(*args, **kwargs):
        calls["expressions"] += 1
        return evaluate(*args, **kwargs)

    def counted_term(*args, **kwargs):
        calls["terms"] += 1
        return term(*args, **kwargs)

    monkeypatch.setattr(plc.transform, "compute_column", counted_evaluate)
    monkeypatch.setattr(device_filters, "term_kept", counted_term)
    return calls


def _check(frame, table, dnf):
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from gpuframe.io.readers.device_filters import kept_rows

    expression = pq.filters_to_expression(dnf)
    expected = table.filter(expression)
    got = kept_rows(frame, dnf)
    assert 0 < len(got) < len(frame)
    positions = table.append_column("at", pa.array(range(len(table)))).filter(expression)["at"]
    assert got.index.to_pandas().tolist() == positions.to_pylist()  # the frame's own index
    got = got.to_arrow(preserve_index=False)
    assert got.drop_columns("d").to_pylist() == expected.drop_columns("d").to_pylist()
    assert pc.cast(got["d"], pa.date32()).to_pylist() == expected["d"].to_pylist()


@pytest.mark.gpu
@pytest.mark.parametrize("filters", FILTER_CASES, ids=[str(f) for f in FILTER_CASES])
def test_kept_rows_are_those_pyarrow_keeps_in_one_expression(filters, monkeypatch):
    calls = _counting(monkeypatch)
    table = table_with_nulls()
    _check(_cudf_frame(table), table, parsed(filters, table.schema))
    assert calls == {"expressions": 1, "terms": 0}


@pytest.mark.gpu
def test_terms_an_expression_cannot_write_go_term_by_term_in_the_same_expression(monkeypatch):
    """A decimal column, a float bound on an integer column and a long ``in`` list, each
    combined with written terms under Kleene's rules."""
    calls = _counting(monkeypatch)
    table = table_with_nulls()
    table = table.append_column("m", pa.array(
        [None if v is None else decimal.Decimal(v) / 4 for v in table["i"].to_pylist()],
        pa.decimal128(12, 2)))
    dnf = parsed([[("m", ">", decimal.Decimal("0.25")), ("f", "<", 0.5)],
                  [("i", "<", -2.5), ("s", "==", "a")],
                  [("i", "in", tuple(range(3, 40)))]], table.schema)
    _check(_cudf_frame(table), table, dnf)
    assert calls == {"expressions": 1, "terms": 3}
