"""The dataflow's tasks in the calling process, for data too small to pay for a cluster.

:class:`InProcessClient` answers the part of ``distributed.Client`` the
dataflow uses (``submit``, ``map``, a future's ``result`` and ``release``,
``scheduler_info``), running each task on a pool of threads here. The
tasks are the same functions a worker runs (:mod:`.shards`,
:mod:`lancetnic_flow.features.fit`), so the features, the shards and the
trained model are the same as on a cluster; only where they run differs.
Their hot loops (compiled kernels, Arrow) release the GIL, so two threads
use two cores.

A task's arguments may hold futures of earlier tasks (the fit pass's
merge tree); a task is queued only after the ones it waits on (every
future is made before it is passed on), so with first-in-first-out
threads a waiting task never holds the thread its input needs.

Memory: at most ``threads`` tasks at once, each within the plan's
per-task peak (``TASK_BASE + PEAK_PER_BYTE × partition``), in the trainer's
own process: :func:`choose_where` takes this path only when that sum and
the trainer fit in the plan.
"""
from __future__ import annotations

import concurrent.futures as cf
import os
from typing import Any, Callable, Iterable, Iterator

from ..errors import UserError
from ..sizes import format_size
from .plan import MAX_PARTITION, PEAK_PER_BYTE, TASK_BASE, MemoryPlan

# Inputs up to this size (training and validation files together) are featurised
# in the calling process by default: a LocalCluster's start (a second or more)
# and its workers' imports cost more than the pass itself.
IN_PROCESS_MAX_BYTES = 64 * 2**20
WHERE = ("auto", "process", "cluster")


class InProcessFuture:
    """A task's result here, with the two calls the dataflow makes on a Dask future."""

    def __init__(self, fut: cf.Future):
        self._fut = fut

    def result(self, timeout: float | None = None) -> Any:
        return self._fut.result(timeout)

    def done(self) -> bool:
        return self._fut.done()

    def release(self) -> None:
        """Nothing to release: the result goes when the last reference does."""

    def cancel(self) -> bool:
        return self._fut.cancel()


def _resolved(value: Any) -> Any:
    if isinstance(value, InProcessFuture):
        return value.result()
    if isinstance(value, list):
        return [_resolved(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_resolved(v) for v in value)
    return value


def _call(fn: Callable, args: tuple, kwargs: dict) -> Any:
    return fn(*_resolved(args), **{k: _resolved(v) for k, v in kwargs.items()})


class InProcessClient:
    """Dask's client calls the dataflow makes, answered by a thread pool in this process."""

    in_process = True
    status = "running"
    dashboard_link = None

    def __init__(self, threads: int | None = None):
        self.threads = max(1, threads or os.cpu_count() or 1)
        self._pool = cf.ThreadPoolExecutor(self.threads, thread_name_prefix="lancetnic-task")

    def submit(self, fn: Callable, *args: Any, pure: bool = True, priority: int = 0, key: str | None = None,
               **kwargs: Any) -> InProcessFuture:
        return InProcessFuture(self._pool.submit(_call, fn, args, kwargs))

    def map(self, fn: Callable, *iterables: Iterable, pure: bool = True, **kwargs: Any) -> list[InProcessFuture]:
        return [self.submit(fn, *args, **kwargs) for args in zip(*iterables)]

    def as_completed(self, futures: list[InProcessFuture]) -> Iterator[InProcessFuture]:
        """``futures`` in the order they finish."""
        by_inner = {f._fut: f for f in futures}
        for inner in cf.as_completed(by_inner):
            yield by_inner[inner]

    def scheduler_info(self, **_: Any) -> dict:
        return {"workers": {}}

    def run(self, fn: Callable, *args: Any, **kwargs: Any) -> dict:
        return {}

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "InProcessClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def is_in_process(client: Any) -> bool:
    """Whether ``client`` runs tasks in this process (no workers, nothing to scatter)."""
    return getattr(client, "in_process", False)


# Compressed bytes stand for several times as much text.
COMPRESSED_RATIO = 5


def input_bytes(*sources: Any) -> int:
    """The text bytes of the planned sources (``SourcePlan``s; None entries skipped), compressed files scaled up."""
    return sum(f.size * (COMPRESSED_RATIO if f.compression else 1)
               for src in sources if src is not None for f in src.files)


def in_process_peak(plan: MemoryPlan, threads: int) -> int:
    """The featurising tasks' peak in this process: ``threads`` tasks at once, each at the plan's partition."""
    return threads * (TASK_BASE + PEAK_PER_BYTE * min(plan.partition, MAX_PARTITION))


def choose_where(where: str, *, input_bytes: int | None, needs_cluster: str | None, plan: MemoryPlan,
                 trainer_need: int, threads: int) -> tuple[bool, str]:
    """In this process or on a cluster, and why, in words the run prints.

    ``where``: the option (auto, process, cluster); ``input_bytes``: the
    inputs' size (None when unknown: a remote glob not listed yet);
    ``needs_cluster``: the option that needs one (an existing scheduler,
    --ddp, tune's trials), or None."""
    peak = in_process_peak(plan, threads)
    if needs_cluster:
        if where == "process":
            raise UserError(f"{{cluster.run_on}} process cannot hold this run: {needs_cluster}; "
                            "leave {cluster.run_on} at auto or cluster")
        return False, f"on a cluster: {needs_cluster}"
    if where == "cluster":
        return False, "on a LocalCluster (--run-on cluster)"
    if where == "process":
        return True, f"in this process, {threads} thread{'s' if threads > 1 else ''} (--run-on process)"
    if input_bytes is None:
        return False, "on a LocalCluster: the inputs' size is not known before reading them"
    if input_bytes > IN_PROCESS_MAX_BYTES:
        return False, (f"on a LocalCluster: the inputs ({format_size(input_bytes)}) are over "
                       f"{format_size(IN_PROCESS_MAX_BYTES)} (--run-on process keeps them here)")
    if trainer_need + peak > plan.trainer + plan.workers * plan.worker_limit:
        return False, "on a LocalCluster: the trainer and the featurising tasks together are over the plan"
    return True, (f"in this process, {threads} thread{'s' if threads > 1 else ''}: the inputs "
                  f"({format_size(input_bytes)}) are under {format_size(IN_PROCESS_MAX_BYTES)} "
                  "(--run-on cluster starts a LocalCluster)")
