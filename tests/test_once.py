"""A process's one-time work: made once when two first callers ask at once, a failure made
again, the function's own name and text kept."""

import threading
import time

import pytest

from gpuframe.once import Once


def test_two_first_callers_make_it_once_and_both_get_it():
    """The client and a worker's plugin in one process may both ask first (sealing cuDF's
    transfers; the pinned pool): ``functools.cache`` would run it twice."""
    runs = []

    @Once
    def made() -> list[int]:
        """Slow enough for the other caller to arrive meanwhile."""
        runs.append(threading.get_ident())
        time.sleep(0.2)
        return [len(runs)]

    got = []
    callers = [threading.Thread(target=lambda: got.append(made())) for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(timeout=30)
    assert len(runs) == 1 and len(got) == 2 and got[0] is got[1]
    assert made.made and made() is got[0]
    assert made.__name__ == "made" and made.__doc__.startswith("Slow enough")


def test_a_failure_is_made_again():
    calls = []

    @Once
    def failing_once() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("not yet")
        return "made"

    with pytest.raises(OSError, match="not yet"):
        failing_once()
    assert not failing_once.made
    assert failing_once() == "made" and calls == [1, 1]
