"""A Dask worker's own housekeeping, slowed while a rank trains on it.

Every worker runs periodic callbacks on its event loop: the statistical
profiler samples every thread's stack every 10 ms, the loop measures its own
responsiveness every 20 ms, the memory monitor reads the process's RSS every
100 ms. Each wakes a thread that takes the GIL and a core. With one rank per
core (``--ddp 2`` on two cores) there is no idle core for them: they preempt
the ranks' compiled steps, and cost two ranks several per cent of their
epoch rate (docs/benchmarks.md, "A quiet worker"). While a rank's task runs
it holds its worker's thread for the whole segment, so the profile would
show one frame and the loop has nothing to answer but heartbeats.

:func:`quiet_worker` stops the profiler and slows the two others for the
task's duration, and puts every callback back as it found it when the task
ends, fails or is cancelled. The heartbeat (the scheduler's view of the
worker, and our dashboard's memory column through it), the system monitor
and the nanny's own memory limit are left as they are.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

# name → the interval (ms) it runs at while a rank trains; None: stopped.
QUIET_MS: dict[str, float | None] = {
    "profile": None,
    "profile-cycle": None,
    "tick": 1000.0,             # under distributed's 3 s "event loop was unresponsive" line
    "memory_monitor": 500.0,    # spill and pause still act, within half a second
}


def _on_loop(worker: Any, fn) -> None:
    """Run ``fn`` on the worker's event loop (Tornado's callbacks are not
    thread-safe; a task runs in the worker's executor) and wait for it."""
    done = threading.Event()

    def call() -> None:
        try:
            fn()
        finally:
            done.set()

    worker.loop.add_callback(call)
    done.wait(5.0)   # a loop this busy is not worth waiting on: the change lands when it can


def _set(worker: Any, wanted: dict[str, tuple[float, bool]]) -> None:
    for name, (ms, running) in wanted.items():
        pc = worker.periodic_callbacks.get(name)
        if pc is None:
            continue
        pc.stop()
        pc.callback_time = ms
        if running:
            pc.start()


@contextlib.contextmanager
def quiet_worker(worker: Any, quiet: dict[str, float | None] = QUIET_MS) -> Iterator[dict]:
    """Slow ``worker``'s housekeeping (``quiet``: name → interval in ms, or None
    to stop it) for the ``with`` block; yields what was changed, name → the
    interval and running state it is restored to. A worker without an event
    loop (not a Dask worker) is left alone."""
    callbacks = getattr(worker, "periodic_callbacks", None)
    if not callbacks or getattr(worker, "loop", None) is None:
        yield {}
        return
    before = {n: (pc.callback_time, pc.is_running()) for n, pc in callbacks.items() if n in quiet}
    slowed = {n: (quiet[n] if quiet[n] is not None else ms, quiet[n] is not None and running)
              for n, (ms, running) in before.items()}
    _on_loop(worker, lambda: _set(worker, slowed))
    try:
        yield before
    finally:
        _on_loop(worker, lambda: _set(worker, before))
