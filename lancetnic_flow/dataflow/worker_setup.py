"""Run in every local worker process as it starts (a Dask preload).

Ctrl-C in a terminal signals the whole foreground process group: the
trainer and the LocalCluster's worker processes alike. The trainer owns the
shutdown (it finishes the batch, writes a checkpoint, then closes the
cluster), so its workers ignore SIGINT instead of dying mid-task with a
traceback each.

A worker also imports the featurisation code and loads its compiled kernels
in the background as it starts, while the trainer is still importing torch
and planning: the first task does not wait for them.
"""
from __future__ import annotations

import signal
import threading
from typing import Any


def _warm() -> None:
    try:
        from ..features import kernels
        from . import shards  # noqa: F401  (the tasks' modules: readers, features)

        kernels.warm()
    except Exception:  # only a head start: the first task loads them anyway
        pass


def dask_setup(worker: Any) -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_warm, name="lancetnic-warm", daemon=True).start()
