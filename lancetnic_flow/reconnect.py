"""A trainer whose connection to the Dask scheduler drops for a while.

Dask's client reconnects by itself, but it cancels every future it held
(reason ``scheduler-connection-lost``), scattered data included. The work
those futures stood for is submitted again once the client is back:
:class:`~lancetnic_flow.dataflow.window.OrderedWindow` re-submits the tasks
not yet read, and whole stages (the fit pass, a shard repair) run again
through :func:`retrying`. Every task is idempotent (shards are written under
a temporary name and renamed), so a repeated task changes nothing.

A scheduler that does not come back within the wait (``--scheduler-wait``,
Dask's reconnect budget), or comes back with no worker, ends the work that
needed it with :class:`SchedulerLost`: one message, exit status 2, and in
training a checkpoint to ``--resume`` from (training/loop.py).
"""
from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

from .errors import UserError
from .plurals import counted

T = TypeVar("T")
LOST = "scheduler-connection-lost"
# How long the client tries to reach its scheduler again before giving up
# (Dask's default is its connect timeout, 10 s here, too short for a busy
# machine to see a dropped link come back); ``--scheduler-wait`` sets it.
RECONNECT_S = 60.0


class SchedulerLost(UserError):
    """The Dask scheduler went away and did not come back (with workers) within the wait."""

    def __init__(self, message: str, hint: str | None = None, *, address: str = "", **kwargs: Any):
        super().__init__(message, hint or ("start `dask scheduler` and its workers again, then run the same "
                                           "command: what was fitted or featurised is cached"), **kwargs)
        self.address = address


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is Dask giving up work because the client lost its scheduler."""
    return LOST in str(exc) or type(exc).__name__ in ("CommClosedError", "StreamClosedError")


def reconnect_wait(client: Any) -> float:
    """Seconds ``client`` keeps trying to reach its scheduler (what open_cluster set)."""
    t = getattr(client, "_timeout", None)
    return float(t) if isinstance(t, (int, float)) and t > 0 else RECONNECT_S


def scheduler_of(client: Any) -> str:
    return str(getattr(getattr(client, "scheduler", None), "address", None) or "its address")


def lost_why(client: Any, timeout: float | None = None) -> str | None:
    """Wait until ``client`` has its scheduler and a worker again: None, or why not.

    A scheduler started again at the same address has none of the old
    workers (Dask workers do not reconnect): tasks sent there would wait
    forever, so a worker must join within the same wait."""
    timeout = reconnect_wait(client) if timeout is None else timeout
    # Dask's own attempts end at its budget; a second more lets it say so first.
    deadline = time.monotonic() + timeout + 1.0
    while getattr(client, "status", "running") != "running":
        if client.status in ("closing", "closed", "failed") or time.monotonic() > deadline:
            return f"no connection for {timeout:.0f} s"
        time.sleep(0.2)
    try:
        client.wait_for_workers(1, timeout=max(1.0, deadline - time.monotonic()))
    except Exception:  # noqa: BLE001 - a timeout, or the connection lost again
        return f"it came back with no worker within {timeout:.0f} s"
    return None


def wait_reconnected(client: Any, timeout: float | None = None) -> bool:
    """Wait until ``client`` is connected again, with a worker; False if it gave up or time ran out."""
    return lost_why(client, timeout) is None


def reconnected(client: Any) -> None:
    """Wait for ``client`` to get its scheduler back; :class:`SchedulerLost` if it does not."""
    address = scheduler_of(client)   # now: a client that gives up forgets it
    why = lost_why(client)
    if why is not None:
        raise SchedulerLost(f"lost the Dask scheduler at {address}: {why}", address=address)


def retrying(client: Any, fn: Callable[..., T], *args: Any, attempts: int = 3, on_retry: Callable[[], None] | None = None,
             **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, run again (up to ``attempts`` times in all) when the
    scheduler connection was lost and the client got it back."""
    for attempt in range(attempts):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - only a lost connection is retried
            if not connection_lost(exc):
                raise
            reconnected(client)
            if attempt == attempts - 1:
                address = scheduler_of(client)
                raise SchedulerLost(f"lost the Dask scheduler at {address} {counted(attempts, 'time')} in a row",
                                    "check the network between this machine and the scheduler",
                                    address=address) from None
            if on_retry is not None:
                on_retry()
    raise AssertionError("unreachable")


def worker_lost_in_transfer(exc: BaseException) -> bool:
    """Whether a scatter failed because a worker it sent to left (a closed
    comm, "Can not use replicate", the scheduler no longer knowing the
    worker's address) or the client lost its scheduler."""
    return (connection_lost(exc) or (isinstance(exc, ValueError) and "replicate" in str(exc))
            or (isinstance(exc, KeyError) and "://" in str(exc)))


def scattered_data_lost(exc: BaseException) -> bool:
    """Whether a task was cancelled because data it depends on was lost: every
    worker holding a scattered value died (Dask cannot recompute scattered
    data, so it cancels the tasks that needed it)."""
    text = str(exc)
    return type(exc).__name__ in ("FutureCancelledError", "CancelledError") and (
        "lost dependencies" in text or "already forgotten" in text)


def share(client: Any, data: Any, *, attempts: int = 5, timeout: float = 60.0, **kwargs: Any) -> Any:
    """``data`` scattered to the cluster once, for every task to read: the
    future of one copy, from which each worker fetches it the first time a
    task there needs it, and keeps it while tasks wait on it.

    Not ``scatter(broadcast=True)``: its copy to every worker runs on the
    scheduler, which, when a worker dies during the copy, keeps trying to
    reach that worker for as long as the data is wanted, and blocks every
    later broadcast behind it: the run hangs. A single copy has no such
    step. The call is bounded (``scatter(timeout=...)`` bounds only the wait
    for workers to exist, not the transfer) and tried again when the worker
    it went to died (a closed comm, the scheduler no longer knowing the
    worker) or the client lost its scheduler and got it back. Should every
    worker holding the copy die later, the tasks needing it are cancelled:
    :class:`~lancetnic_flow.dataflow.window.OrderedWindow` shares it again
    (see :func:`scattered_data_lost`)."""
    if getattr(client, "in_process", False):   # tasks run here: they read the object itself
        return data
    for attempt in range(attempts):
        try:
            return client.sync(lambda: client.scatter(data, asynchronous=True, **kwargs), callback_timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - only a lost worker or connection is retried
            lost = worker_lost_in_transfer(exc) or isinstance(exc, TimeoutError)
            if attempt == attempts - 1 or not lost:
                raise
            if connection_lost(exc):
                reconnected(client)
            elif not wait_reconnected(client):
                raise
            time.sleep(0.5 * (attempt + 1))   # time for the scheduler to notice the dead worker
    raise AssertionError("unreachable")


__all__ = ["RECONNECT_S", "SchedulerLost", "connection_lost", "reconnect_wait", "reconnected", "retrying",
           "scattered_data_lost", "share", "wait_reconnected", "worker_lost_in_transfer"]
