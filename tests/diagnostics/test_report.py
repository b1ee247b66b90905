import pytest
from chromium import page_state

import gpuframe
from gpuframe.diagnostics.figures import rate_text
from gpuframe.diagnostics.report import ReportError


def test_report_holds_dasks_report_and_the_engines_figures(shuffle_join):
    html = shuffle_join["path"].read_text()
    metrics = shuffle_join["report"].metrics
    assert "Dask Performance Report" in html and "Task Stream" in html
    assert "gpuframe-engine" in html and "gpuframe-pairs" in html
    for stage in ("send", "transfer", "join"):
        assert f'"{stage}"' in html
    for pair in metrics.pairs:
        assert f"{pair['bytes'] / 1e6:.1f} MB, {rate_text(pair['rate'])}" in html
    assert f"memcpy {rate_text(metrics.typical_limits['memcpy'])}" in html


def test_report_renders_in_chromium(shuffle_join, chromium, artifacts):
    state, png = chromium.render(shuffle_join["path"].as_uri(), page_state("Task Stream"))
    (artifacts / "join-report.png").write_bytes(png)
    metrics = shuffle_join["report"].metrics
    stages = state["sources"]["gpuframe-stages"]
    assert set(stages["stage"]) == set(metrics.stages)
    assert sorted(state["sources"]["gpuframe-pairs"]["bytes"]) == sorted(
        p["bytes"] for p in metrics.pairs)
    assert "Task Stream" in state["text"] and "gpuframe engine" in state["text"]


def test_unwritable_report_path_raises_naming_it(engine, tmp_path):
    target = tmp_path / "missing" / "job.html"
    with pytest.raises(ReportError, match="missing/job.html"), gpuframe.report(target):
        len(gpuframe.from_pandas(__import__("pandas").DataFrame({"a": [1, 2]})))
