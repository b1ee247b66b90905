"""Fixtures the operators' tests share."""

import pytest

import gpuframe
from gpuframe.runtime.runner import Job


@pytest.fixture
def speculating(monkeypatch) -> list[bool]:
    """Whether each job started from here on speculates (an action's second run does not)."""
    started: list[bool] = []
    start = Job.__init__

    def starting(self: Job, *args, **kwargs):
        start(self, *args, **kwargs)
        started.append(self.speculates)

    monkeypatch.setattr(Job, "__init__", starting)
    return started


@pytest.fixture(scope="module")
def one_worker():
    """A one-worker pandas cluster over TCP for a module's tests; pass it as ``engine=``."""
    with pytest.warns(gpuframe.CpuFallbackWarning):
        engine = gpuframe.start_cluster(n_workers=1, protocol="tcp",
                                        dashboard_address="127.0.0.1:0")
    with engine:
        yield engine
