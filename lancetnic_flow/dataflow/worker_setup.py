"""Run in every local worker process as it starts (a Dask preload).

Ctrl-C in a terminal signals the whole foreground process group: the
trainer and the LocalCluster's worker processes alike. The trainer owns the
shutdown (it finishes the batch, writes a checkpoint, then closes the
cluster), so its workers ignore SIGINT instead of dying mid-task with a
traceback each.
"""
from __future__ import annotations

import signal
import threading
from typing import Any


def dask_setup(worker: Any) -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
