import pandas as pd
import pytest

import gpuframe
from gpuframe.diagnostics.progress import stage_group


def test_progress_bars_are_grouped_by_stage():
    assert stage_group("gpuframe-join-0123456789abcdef0123456789abcdef-0") == "join"
    assert stage_group("getitem-0123456789abcdef0123456789abcdef") == "getitem"


def test_terminal_progress_bar_runs_to_completion(engine, capsys):
    orders = pd.DataFrame({"k": range(10_000), "v": range(10_000)})
    joined = gpuframe.from_pandas(orders).merge(gpuframe.from_pandas(orders), on="k",
                                                broadcast_bytes=0)
    gpuframe.progress(joined, notebook=False)
    assert "100% Completed" in capsys.readouterr().out


def test_notebook_progress_widget_shows_a_bar_per_stage(engine):
    pytest.importorskip("ipywidgets", reason="the Jupyter widget needs ipywidgets")
    frame = gpuframe.from_pandas(pd.DataFrame({"a": range(100)}))
    widget = gpuframe.progress(frame, notebook=True)
    assert widget.group_by is stage_group
