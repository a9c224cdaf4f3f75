"""A worker's housekeeping slowed while a rank trains (training/ddp/quiet.py), on
a real Tornado event loop running in its own thread, as a Dask worker's does."""
from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from tornado.ioloop import IOLoop, PeriodicCallback

from lancetnic_flow.training.ddp.quiet import QUIET_MS, quiet_worker


@pytest.fixture
def worker():
    """A loop in a thread with a worker's periodic callbacks, each counting its calls."""
    started, holder = threading.Event(), {}

    def serve() -> None:
        loop = IOLoop()
        holder["loop"] = loop
        started.set()
        loop.start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    started.wait(5)
    loop = holder["loop"]
    calls: dict[str, int] = {}
    callbacks: dict[str, PeriodicCallback] = {}
    made = threading.Event()

    def make() -> None:
        for name, ms in (("profile", 10.0), ("profile-cycle", 1000.0), ("tick", 20.0), ("memory_monitor", 100.0),
                         ("heartbeat", 1000.0), ("find-missing", 1000.0)):
            calls[name] = 0
            callbacks[name] = PeriodicCallback(lambda n=name: calls.__setitem__(n, calls[n] + 1), ms)
            if name != "find-missing":   # one callback the worker had stopped itself
                callbacks[name].start()
        made.set()

    loop.add_callback(make)
    made.wait(5)
    yield SimpleNamespace(loop=loop, periodic_callbacks=callbacks, calls=calls)
    loop.add_callback(loop.stop)
    thread.join(5)


def _state(worker) -> dict:
    return {n: (pc.callback_time, pc.is_running()) for n, pc in worker.periodic_callbacks.items()}


def test_while_a_rank_trains_the_profiler_stops_and_the_loops_checks_slow_then_all_come_back(worker):
    before = _state(worker)
    with quiet_worker(worker) as changed:
        inside = _state(worker)
        worker.calls["profile"] = 0
        threading.Event().wait(0.15)
        assert worker.calls["profile"] == 0                    # stopped: no sample while the rank trains
    assert inside["profile"][1] is False and inside["profile-cycle"][1] is False
    assert inside["tick"] == (QUIET_MS["tick"], True) and inside["memory_monitor"] == (QUIET_MS["memory_monitor"], True)
    assert inside["heartbeat"] == before["heartbeat"]           # the scheduler still hears from the worker
    assert set(changed) == {"profile", "profile-cycle", "tick", "memory_monitor"}
    assert _state(worker) == before                             # every callback as it was, stopped one included
    threading.Event().wait(0.1)
    assert worker.calls["profile"] > 0                          # and the profiler samples again


def test_a_rank_that_fails_still_gives_its_worker_back_its_housekeeping(worker):
    before = _state(worker)
    with pytest.raises(RuntimeError, match="rank failed"), quiet_worker(worker):
        raise RuntimeError("rank failed")
    assert _state(worker) == before


def test_a_callback_the_worker_had_stopped_stays_stopped_and_one_it_lacks_is_skipped(worker):
    with quiet_worker(worker, {"find-missing": 5000.0, "no-such-callback": None}) as changed:
        assert _state(worker)["find-missing"] == (5000.0, False)   # slowed, but not started
    assert set(changed) == {"find-missing"}
    assert _state(worker)["find-missing"] == (1000.0, False)


def test_something_that_is_not_a_dask_worker_is_left_alone():
    plain = SimpleNamespace()
    with quiet_worker(plain) as changed:
        assert changed == {}
    assert vars(plain) == {}
