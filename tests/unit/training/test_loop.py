"""training/loop.py: the epoch loop reports an early stop only when it stopped before the last epoch."""
from __future__ import annotations

from lancetnic_flow.config import CheckpointEvery, TrainingConfig
from lancetnic_flow.events import Events
from lancetnic_flow.training.loop import EpochLoop
from lancetnic_flow.training.state import TrainState
from lancetnic_flow.training.stop import StopRequest


def _loop(epochs: int, stale_after: int) -> tuple[EpochLoop, list]:
    """A loop whose epochs train nothing and whose --monitor stops improving after epoch ``stale_after``."""
    seen: list = []
    events = Events()
    events.subscribe(lambda kind, e: seen.append(e) if kind == "early_stop" else None)
    loop = EpochLoop(None, None, TrainingConfig(epochs=epochs, early_stopping=2), events, lambda s, r: None, "run")
    loop._train_epoch = lambda state, epoch, skip, stop, every: (None, None)

    def validate(state: TrainState, epoch: int, train_m, clock) -> dict:
        state.best = {"epoch": min(epoch + 1, stale_after)}
        state.stale = max(0, epoch + 1 - stale_after)
        return {}

    loop._validate = validate
    return loop, seen


def test_an_early_stop_is_reported_only_when_epochs_were_left_to_run():
    loop, seen = _loop(5, stale_after=1)   # epochs 2 and 3 do not improve: patience 2 runs out after epoch 3
    loop.run_epochs(TrainState(), StopRequest(), CheckpointEvery())
    assert [(e["epoch"], e["best_epoch"]) for e in seen] == [(3, 1)]
    # With --epochs 3 the third epoch is the last anyway: the run ran every epoch, nothing stopped it early.
    loop, seen = _loop(3, stale_after=1)
    loop.run_epochs(TrainState(), StopRequest(), CheckpointEvery())
    assert seen == []
