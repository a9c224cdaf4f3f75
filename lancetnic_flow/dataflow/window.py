"""A bounded, ordered window of tasks on the cluster: the backpressure Dask lacks.

At most ``window`` tasks are outstanding; results come back in submission
order, and each future is released once read. Consuming in a fixed order is
what makes the same seed give the same batches whether an epoch is
featurised live or read from the cache; prediction and evaluation use the
same window to write their output in input order.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator


class OrderedWindow:
    """Submit ``task(job)`` for each job with at most ``window`` in flight;
    iterate results in submission order, releasing each future once read."""

    def __init__(self, client: Any, task: Callable, jobs: list, window: int, **kwargs: Any):
        self.client, self.task, self.jobs, self.window, self.kwargs = client, task, jobs, max(1, window), kwargs

    def __iter__(self) -> Iterator[Any]:
        pending: list = []
        jobs = iter(self.jobs)

        def top_up() -> None:
            while len(pending) < self.window:
                try:
                    job = next(jobs)
                except StopIteration:
                    return
                pending.append(self.client.submit(self.task, *job, **self.kwargs, pure=False))

        top_up()
        while pending:
            fut = pending.pop(0)
            result = fut.result()
            fut.release()
            top_up()  # only now: the popped task counted towards the window until it finished
            yield result
