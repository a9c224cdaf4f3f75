"""The single-process training loop: epochs of batches from the shard feed,
one :mod:`.step` per batch, validation and the epoch record after each.

Epoch 1 overlaps featurisation with training (the feed hands over shards as
the workers write them); later epochs read the cache. A checkpoint is
written every ``--checkpoint-every`` (N batches, or a time since the last
checkpoint; an epoch's end writes one when it is due), and on Ctrl-C (then
the run stops).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..allocator import trim_allocator
from ..config import CheckpointEvery, TrainingConfig
from ..dataflow.feed import ShardFeed
from ..dataflow.stream import BatchStream
from ..errors import reworded
from ..events import Events
from ..models.tasks import Task, TaskMetrics
from ..reconnect import SchedulerLost
from . import step as steps
from .rules import TrainingRule
from .state import TrainState
from .stop import StopRequest, TrainingInterrupted

if TYPE_CHECKING:
    import torch


@dataclass
class Trainee:
    """What the loop trains, and with what."""

    model: Any                 # a network (torch.nn.Module), or a LinearSVM's arrays (models/linear_arrays.py)
    task: Task
    rule: TrainingRule
    opts: list                 # the rule's optimisers (rule.optimizers(model)), kept for checkpoints
    device: Any                # a torch.device, or "cpu"
    schedule: Callable[[int], float]
    cached_threads: int = 0    # torch threads once epochs read the cache (the workers are idle then); 0: unchanged
    # Called with each epoch's validation metrics before they are recorded: refuses rows read wrongly.
    check_val: Callable[[dict], None] | None = None
    floor: int = 0             # validation rows below which no epoch is chosen by them (step.keep_best)


class EpochLoop:
    def __init__(self, trainee: Trainee, feed: ShardFeed, tc: TrainingConfig, events: Events,
                 checkpoint: Callable[[TrainState, str], None], run: str):
        self.t, self.feed, self.tc, self.events = trainee, feed, tc, events
        self.checkpoint, self.run = checkpoint, run
        self.at: tuple = (0, 0, steps.EpochClock(), None)   # (epoch, batches trained, clock, metrics): where a checkpoint would resume

    def run_epochs(self, state: TrainState, stop: StopRequest, every: CheckpointEvery) -> dict:
        """Train from ``state`` (updated in place) to the last epoch or an early
        stop; returns the last epoch's validation metrics."""
        start_epoch, skip = state.epoch, state.batches
        self.last_save = time.monotonic()
        val: dict = {}
        for epoch in range(start_epoch, self.tc.epochs):
            try:
                train_m, clock = self._train_epoch(state, epoch, skip if epoch == start_epoch else 0, stop, every)
                val = self._validate(state, epoch, train_m, clock)
            except SchedulerLost as lost:
                raise self._stopped(state, lost) from None
            if self.tc.early_stopping and state.stale >= self.tc.early_stopping:
                if epoch + 1 < self.tc.epochs:   # after the last epoch nothing was stopped: no "early stop" to report
                    self.events.emit("early_stop", epoch=epoch + 1, best_epoch=state.best["epoch"],
                                     monitor=self.tc.monitor)
                break
            # An epoch's end checkpoints when one is due by time, always with N-batch checkpoints.
            due = every.batches or (every.seconds and time.monotonic() - self.last_save >= every.seconds)
            if epoch + 1 < self.tc.epochs and (due or stop.requested):
                self._save(state, epoch + 1, 0, steps.EpochClock(), None, "interrupt" if stop.requested else "epoch")
                if stop.requested:
                    raise TrainingInterrupted(self.run, epoch + 2, 0)
        return val

    def _train_epoch(self, state: TrainState, epoch: int, skip: int, stop: StopRequest,
                     every: CheckpointEvery) -> tuple[TaskMetrics, steps.EpochClock]:
        t, tc = self.t, self.tc
        blocks, source = self.feed.train_blocks(epoch)
        if source == "cache" and t.cached_threads:
            import torch

            torch.set_num_threads(t.cached_threads)
        stream = BatchStream(blocks, batch_size=tc.batch_size, shuffle_buffer=tc.shuffle_buffer, seed=tc.seed,
                             epoch=epoch, by_length=getattr(t.model, "batches_by_length", False))
        self.events.emit("stage", stage="training", epoch=epoch + 1, epochs=tc.epochs, total_rows=state.total_rows,
                         source=source, monitor=tc.monitor)
        train_m = t.task.new_metrics()
        clock = steps.EpochClock(state.rows, state.seconds) if skip else steps.EpochClock()
        if skip:
            train_m.load_state(state.train_metrics)
        last_ckpt = skip
        self.at = (epoch, skip, clock, train_m)
        for i, batch in enumerate(stream):
            if i < skip:
                continue   # trained before the checkpoint: the stream is replayed, not retrained
            out, loss = t.rule.train_batch(t.model, t.task, t.opts, batch, t.device, t.schedule(state.step))
            state.step += 1
            clock.rows += len(batch)
            steps.count(train_m, out, batch, loss)
            self.at = (epoch, i + 1, clock, train_m)
            self.events.emit("batch", epoch=epoch + 1, rows=clock.rows, total_rows=state.total_rows,
                             loss=loss.item(), tokens=int(batch.offsets[-1]))
            if stop.requested or every.due(i + 1 - last_ckpt, time.monotonic() - self.last_save):
                self._save(state, epoch, i + 1, clock, train_m, "interrupt" if stop.requested else "periodic")
                if stop.requested:
                    raise TrainingInterrupted(self.run, epoch + 1, i + 1)
                last_ckpt = i + 1
        clock.stop()
        state.total_rows = self.feed.total_rows()
        return train_m, clock

    def _validate(self, state: TrainState, epoch: int, train_m: TaskMetrics, clock: steps.EpochClock) -> dict:
        t = self.t
        self.events.emit("stage", stage="evaluating", epoch=epoch + 1, epochs=self.tc.epochs)
        val_m = steps.evaluate_blocks(t.model, self.feed.val_blocks(), t.task, t.device,
                                      then=t.rule.while_validating(t.model, t.schedule(state.step), self.tc.seed,
                                                                   epoch)) if self.feed.has_val() else None
        val = val_m.result() if val_m is not None else {}
        if t.check_val is not None:
            t.check_val(val)
        record = steps.epoch_record(epoch + 1, train_m, val, clock, t.rule.rate(t.schedule(state.step)),
                                    steps.decided_at(t.task))
        state.history.append(record)
        state.confusions.append(val.get("confusion"))
        self.events.emit("epoch", **record)
        trim_allocator()
        state.best, state.stale = steps.keep_best(state.best, state.stale, val, val_m, t.model, epoch + 1,
                                                  self.tc.monitor, copy=not t.rule.keeps_last_epoch(), floor=t.floor)
        return val

    def _stopped(self, state: TrainState, lost: SchedulerLost) -> SchedulerLost:
        """The scheduler went away while this epoch needed it (featurising live,
        rebuilding a shard): checkpoint where training is — every batch trained
        so far, validation to do again — and say how to go on."""
        epoch, batches, clock, train_m = self.at
        if not state.step:
            return lost   # nothing trained: nothing to resume
        self._save(state, epoch, batches, clock, train_m, "scheduler_lost")
        stopped = reworded(lost, lambda message, hint: (
            f"{message}; stopped in epoch {epoch + 1} after batch {batches}, checkpoint saved in {self.run}",
            f"start `dask scheduler` and its workers again, then continue: lancetnic-flow train "
            f"--resume {self.run} (with --scheduler ADDRESS if its address changed)"))
        stopped.address = lost.address
        return stopped

    def _save(self, state: TrainState, epoch: int, batches: int, clock: steps.EpochClock,
              train_m: TaskMetrics | None, reason: str) -> None:
        """Checkpoint: continue at batch ``batches`` of ``epoch`` (0-based), after ``clock``'s rows and seconds."""
        t = self.t
        self.last_save = time.monotonic()
        self.checkpoint(dataclasses.replace(
            state, epoch=epoch, batches=batches, rows=clock.rows, seconds=clock.seconds if batches else 0.0,
            train_metrics=train_m.state() if train_m is not None else None,
            model=t.model.state_dict(), optimizers=[o.state_dict() for o in t.opts], rng=rng_state(t.model)),
            reason)


def rng_state(model: Any) -> Any:
    """torch's random state for a checkpoint of a network (its dropout and
    initialisation draw from it); None for a model trained without torch."""
    from ..models.linear_arrays import is_arrays

    if is_arrays(model):
        return None
    import torch

    return torch.get_rng_state()
