"""A bounded, ordered window of tasks on the cluster: the backpressure Dask lacks.

At most ``window`` tasks are outstanding; results come back in submission
order, and each future is released once read. Consuming in a fixed order is
what makes the same seed give the same batches whether an epoch is
featurised live or read from the cache; prediction and evaluation use the
same window to write their output in input order.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from ..reconnect import connection_lost, reconnected, scattered_data_lost


class OrderedWindow:
    """Submit ``task(job)`` for each job with at most ``window`` in flight;
    iterate results in submission order, releasing each future once read.

    When the client loses its scheduler and reconnects, Dask cancels every
    future: the jobs not yet read are submitted again, with ``renew()``'s
    keyword arguments when given (scattered data must be scattered again).
    With ``renew``, the same happens when every worker holding the scattered
    data died and Dask cancelled the tasks that needed it."""

    def __init__(self, client: Any, task: Callable, jobs: list, window: int,
                 renew: Callable[[], dict] | None = None, **kwargs: Any):
        self.client, self.task, self.jobs, self.window, self.kwargs = client, task, jobs, max(1, window), kwargs
        self.renew = renew

    def _submit(self, job: tuple) -> Any:
        return self.client.submit(self.task, *job, **self.kwargs, pure=False)

    def __iter__(self) -> Iterator[Any]:
        pending: list = []      # (job, future), oldest first
        jobs = iter(self.jobs)

        def top_up() -> None:
            while len(pending) < self.window:
                try:
                    job = next(jobs)
                except StopIteration:
                    return
                pending.append((job, self._submit(job)))

        top_up()
        renewals = 0
        while pending:
            job, fut = pending[0]
            try:
                result = fut.result()
            except Exception as exc:
                if renewals >= 5 or not self._renewable(exc):
                    raise
                renewals += 1
                if self.renew is not None:
                    self.kwargs = self.renew()
                pending = [(j, self._submit(j)) for j, _ in pending]
                continue
            pending.pop(0)
            fut.release()
            top_up()  # only now: the popped task counted towards the window until it finished
            yield result

    def _renewable(self, exc: BaseException) -> bool:
        if connection_lost(exc):
            reconnected(self.client)   # or SchedulerLost: the jobs cannot run without it
            return True
        return self.renew is not None and scattered_data_lost(exc)
