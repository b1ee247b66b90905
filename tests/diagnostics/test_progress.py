import pandas as pd
import pytest

import gpuframe
from gpuframe.diagnostics.progress import stage_group


def frames():
    orders = pd.DataFrame({"k": range(10_000), "v": range(10_000)})
    return (gpuframe.from_pandas(orders).persist(),
            gpuframe.from_pandas(orders.head(5_000)).persist())


def test_progress_bars_are_grouped_by_stage():
    assert stage_group("gpuframe-join-0123456789abcdef0123456789abcdef-0") == "join"
    assert stage_group("getitem-0123456789abcdef0123456789abcdef") == "getitem"


def test_terminal_bar_follows_a_frame(engine, capsys):
    left, right = frames()
    gpuframe.progress(left.merge(right, on="k", broadcast_bytes=0), notebook=False)
    assert "100% Completed" in capsys.readouterr().out


def test_terminal_bar_follows_a_join_while_it_runs(engine, capsys):
    left, right = frames()
    with gpuframe.progress(notebook=False) as bars:
        joined = left.merge(right, on="k", broadcast_bytes=0).persist()
    assert len(joined) == 5_000
    workers = len(engine.workers)
    # one send task per worker and side, not one per partition and bucket
    assert "split" not in bars.totals
    assert bars.totals["send"] == 2 * workers
    assert bars.totals["join"] == workers
    assert "load" not in bars.totals  # the frames were made before the block
    assert set(bars.remaining.values()) == {0}
    assert "100% Completed" in capsys.readouterr().out


def test_notebook_widget_has_a_bar_per_stage(engine):
    pytest.importorskip("ipywidgets", reason="the Jupyter widget needs ipywidgets")
    left, right = frames()
    with gpuframe.progress(notebook=True) as bars:
        left.merge(right, on="k", broadcast_bytes=0).persist()
    assert set(bars._widget.bars) == set(bars.totals) >= {"send", "join"}
    assert all(bar.value == 1.0 and bar.bar_style == "success"
               for bar in bars._widget.bars.values())
