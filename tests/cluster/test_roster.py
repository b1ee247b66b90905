import time

from distributed import LocalCluster
from scheduler_calls import calls_answered

from gpuframe.cluster.engine import connect
from gpuframe.cluster.roster import Roster


def test_the_workers_come_from_the_roster_without_asking_the_scheduler(cpu_engine):
    scheduler = cpu_engine.cluster.scheduler
    with calls_answered(scheduler, "identity") as calls:
        workers = cpu_engine.workers
    assert calls == []
    names = {address: state.name for address, state in scheduler.workers.items()}
    assert workers == sorted(names, key=lambda address: names[address])


def test_the_roster_follows_workers_that_join_and_leave():
    with LocalCluster(n_workers=1, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=":0") as cluster:
        engine = connect(cluster.scheduler_address)
        try:
            assert engine.roster is not None and len(engine.workers) == 1
            cluster.scale(3)
            _until(lambda: len(engine.workers) == 3)
            assert engine.workers == sorted(cluster.scheduler.workers,
                                            key=lambda a: cluster.scheduler.workers[a].name)
            cluster.scale(1)
            _until(lambda: len(engine.workers) == 1)
            assert engine.workers == list(cluster.scheduler.workers)
        finally:
            engine.close()


def test_without_a_roster_the_scheduler_is_asked(cpu_engine, monkeypatch):
    monkeypatch.setattr(cpu_engine, "roster", None)
    with calls_answered(cpu_engine.cluster.scheduler, "identity") as calls:
        workers = cpu_engine.workers
    assert len(calls) == 1 and len(workers) == 2


def test_an_older_roster_never_replaces_a_newer_one():
    roster = Roster()
    roster.update({"changes": 4, "workers": [["tcp://a:1", 0], ["tcp://b:1", 1]]})
    roster.update({"changes": 3, "workers": [["tcp://a:1", 0]]})
    assert roster.names == {"tcp://a:1": 0, "tcp://b:1": 1}
    roster.update({"changes": 5, "workers": [["tcp://b:1", 1]]})
    assert roster.names == {"tcp://b:1": 1}


def _until(condition, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the roster did not follow in time"
        time.sleep(0.05)
