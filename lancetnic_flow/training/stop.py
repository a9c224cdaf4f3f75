"""Ctrl-C during training: finish the batch, write a checkpoint, say how to resume."""
from __future__ import annotations

import signal
import threading
from typing import Any


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during training: a checkpoint was written; ``str()`` says how to resume."""

    def __init__(self, run: str, epoch: int, batches: int):
        super().__init__(f"stopped in epoch {epoch}, after batch {batches}; checkpoint saved in {run}\n"
                         f"  resume with: lancetnic-flow train --resume {run}")
        self.run, self.epoch, self.batches = run, epoch, batches


class StopRequest:
    """The first Ctrl-C asks training to stop at the next batch boundary (a
    checkpoint is written there); a second one stops at once, as usual."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
