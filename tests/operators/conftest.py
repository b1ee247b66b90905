"""Fixtures the operators' tests share."""

import pytest

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
