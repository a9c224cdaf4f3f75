"""Ctrl-C during training: finish the batch, write a checkpoint, say how to resume.

From the first batch to the end of the save the first Ctrl-C is a request
(:class:`StopRequest`): a batch boundary writes a checkpoint and stops
(:class:`TrainingInterrupted`); once the last batch is trained, what is left
(validation, calibration, the save: seconds) finishes and the command stops
with a run saved whole (:class:`StoppedAfterTraining`). A second Ctrl-C
stops at once (:class:`StoppedAtOnce` says what there is to go on from)."""
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


class StoppedAfterTraining(KeyboardInterrupt):
    """Ctrl-C after training's last batch: the run was finished and saved whole."""

    def __init__(self, run: str):
        super().__init__(f"Ctrl-C came after training's last batch, so the run was finished first: it is saved "
                         f"whole in {run}")
        self.run = run


class StoppedAtOnce(KeyboardInterrupt):
    """A second Ctrl-C after training began: what the run folder holds to go on from."""

    def __init__(self, run: str, *, whole: bool, checkpoint: bool):
        if whole:
            said = f"stopped at once; the run had already been saved whole in {run}"
        elif checkpoint:
            said = (f"stopped at once; the last checkpoint is in {run}\n"
                    f"  resume with: lancetnic-flow train --resume {run}")
        else:
            said = ("stopped at once, before the run's first checkpoint, so there is nothing to resume: run the same "
                    "command again (what was already fitted or featurised is cached)")
        super().__init__(said)
        self.run, self.whole, self.checkpoint = run, whole, checkpoint


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
