"""The loaded runs one process keeps between tasks, within a byte budget.

A worker serving two commands for two runs at once (``evaluate A`` and
``predict B`` on one ``--scheduler``) gets their tasks interleaved: keeping
only the last run loaded read each ``model.safetensors`` again on nearly
every task. :class:`HeldRuns` keeps several, each at its planned size
(:func:`run_bytes`, the figure the memory plan gives the loaded run), and
drops the least recently used ones before another loads, so what stays
loaded never passes :func:`room_for_runs`. A run folder written again (a new
stamp) replaces its older copy.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ..dataflow.plan import THRESHOLDS
from .linear_scores import linear_shapes
from .loading import read_run_json
from .weights_size import loaded_bytes


def run_bytes(run: str, storage_options: dict | None = None) -> int:
    """What loading ``run`` holds at its peak, as the memory plan counts it (nothing loaded)."""
    meta, _ = read_run_json(run, storage_options)
    return loaded_bytes(run, storage_options, torch_network=linear_shapes(meta) is None)


def worker_memory() -> tuple[int, float] | None:
    """The memory limit of the Dask worker this runs on and the line kept runs stay under (a
    fraction of it): the lower of its own spill and pause lines (Dask's default pause where it
    pauses never). Spilling would move the tasks' results to disk while the runs stay, and a
    worker held past pause by runs it keeps would never run a task again: the spill line leaves
    the pause line a margin for a run's size misjudged. None outside a worker or without a limit."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return None
    manager = getattr(worker, "memory_manager", None)
    limit = getattr(manager, "memory_limit", None)
    if not limit:
        return None
    pause = float(getattr(manager, "memory_pause_fraction", None) or THRESHOLDS["pause"])
    spill = getattr(manager, "memory_spill_fraction", None)
    return int(limit), min(pause, float(spill)) if spill else pause


def room_for_runs(own: int, memory: tuple[int, float] | None) -> int:
    """The bytes a process may keep in loaded runs while it serves a run of ``own`` bytes.
    The plan sizes partitions so a worker's base, its tasks and ``own`` stay under Dask's
    target line of its limit; the band from there to ``memory``'s line (:func:`worker_memory`:
    spill, or pause where sooner) holds the other runs (a worker whose line is lower keeps fewer).
    Without a known limit (``memory`` None: this process, a worker without one): ``own`` alone."""
    if not memory:
        return own
    limit, line = memory
    return own + max(int(limit * (line - THRESHOLDS["target"])), 0)


class HeldRuns:
    """Loaded runs by (run, stamp), least recently used first, with the bytes each holds."""

    def __init__(self) -> None:
        self._held: OrderedDict[tuple[str, str], tuple[Any, int]] = OrderedDict()

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._held

    def __iter__(self):
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)

    @property
    def bytes(self) -> int:
        """What the kept runs hold together."""
        return sum(size for _, size in self._held.values())

    def get(self, key: tuple[str, str]) -> Any:
        """The run kept under ``key``, now the most recently used; KeyError when none."""
        self._held.move_to_end(key)
        return self._held[key][0]

    def make_room(self, run: str, size: int, budget: int) -> None:
        """Drop what must go before ``run`` (``size`` bytes) loads: its older copies (another
        stamp), then the least recently used runs until it fits ``budget`` beside those kept.
        Dropped first, loaded after: the process never holds the dropped and the new at once
        (a task still running keeps its own reference)."""
        for key in [k for k in self._held if k[0] == run]:
            del self._held[key]
        while self._held and self.bytes + size > budget:
            self._held.popitem(last=False)

    def put(self, key: tuple[str, str], value: Any, size: int) -> None:
        """Keep ``value`` under ``key`` as the most recently used (call :meth:`make_room` first)."""
        self._held[key] = (value, size)

    def clear(self) -> None:
        """Drop every kept run."""
        self._held.clear()


__all__ = ["HeldRuns", "room_for_runs", "run_bytes", "worker_memory"]
