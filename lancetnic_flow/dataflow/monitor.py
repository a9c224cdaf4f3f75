"""Memory, sampled: the trainer's RSS and the workers', with their peaks.

Local workers are measured as the RSS of this process's children (nannies
and workers, the whole tree); workers of an existing cluster through the
scheduler's per-worker metrics. A sampler thread emits ``memory`` events.
"""
from __future__ import annotations

import threading
from typing import Any

import psutil

from ..events import Events
from .cluster import workers_info


class MemoryMonitor:
    def __init__(self, events: Events, client: Any = None, local_workers: bool = True, interval: float = 0.5):
        self.events, self.client, self.local, self.interval = events, client, local_workers, interval
        self.proc = psutil.Process()
        self.trainer_peak = 0
        self.workers_peak = 0
        self.total_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lancetnic-memory", daemon=True)
        self._tick = 0

    def __enter__(self) -> "MemoryMonitor":
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop sampling, after a last sample; again, it does nothing (a run's last
        event, ``done``, comes after its last ``memory`` event)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except Exception:  # a vanished process between listing and reading
                pass

    def _children_rss(self) -> int:
        total = 0
        for child in self.proc.children(recursive=True):
            try:
                total += child.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return total

    def _dask_workers(self) -> list[dict] | None:
        """The scheduler's workers now; None where it was not asked or did not answer."""
        if self.client is None:
            return None
        try:
            workers = workers_info(self.client, wait=False)   # a sample to skip, not to wait for
        except Exception:
            return None
        out = []
        for addr, w in workers.items():
            m = w.get("metrics", {})
            out.append({"address": addr, "name": str(w.get("name", addr)), "limit": w.get("memory_limit", 0),
                        "rss": m.get("memory", 0), "managed": m.get("managed_bytes", 0),
                        "spilled": m.get("spilled_bytes", {}).get("disk", 0) if isinstance(m.get("spilled_bytes"), dict)
                        else m.get("spilled_bytes", 0) or 0})
        return out

    def sample(self) -> dict:
        trainer = self.proc.memory_info().rss
        self._tick += 1
        asked = self._dask_workers() if (self._tick % 2 == 1 or not self.local) else None
        workers = asked or []
        local = self._children_rss() if self.local else 0
        wtotal = local if self.local else sum(w["rss"] for w in workers)
        self.trainer_peak = max(self.trainer_peak, trainer)
        self.workers_peak = max(self.workers_peak, wtotal)
        self.total_peak = max(self.total_peak, trainer + (local if self.local else 0))
        sample = {"trainer_rss": trainer, "workers_rss": wtotal, "available": psutil.virtual_memory().available,
                  "workers": workers, "trainer_peak": self.trainer_peak, "workers_peak": self.workers_peak,
                  # The scheduler's answer, even an empty one (every worker gone): the views replace their rows.
                  "workers_asked": asked is not None}
        self.events.emit("memory", **sample)
        return sample
