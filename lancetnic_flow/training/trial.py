"""One ``tune`` trial, run as a task on a Dask worker.

The cache entry is complete before any trial starts, so the trial reads its
shards through a :class:`~lancetnic_flow.dataflow.feed.ShardFeed` without a
client, and trains them with the same loop and training rule as ``train``
(:class:`~.loop.EpochLoop`, :func:`~.rules.rule_for`): the model for the trial's options, its epochs
with early stopping, the validation after each. It returns the monitored
metric of its best epoch and the curve, never weights.
"""
from __future__ import annotations

import copy
import dataclasses
import os
import time
from typing import Any

import torch

from ..config import CheckpointEvery, TrainConfig
from ..dataflow.feed import FeedSpec, ShardFeed
from ..events import NULL_EVENTS
from ..models import create_model, register
from ..scores import lower_is_better, val_scores
from .loop import EpochLoop, Trainee
from .orchestrator import make_task
from .rules import rule_for
from .state import TrainState
from .step import lr_schedule
from .stop import TrainingInterrupted


class Deadline:
    """The loop's stop request, set when the search's time is up: the trial ends
    at the next batch with its best epoch so far."""

    def __init__(self, seconds: float | None):
        self.at = None if seconds is None else time.monotonic() + seconds

    @property
    def requested(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at


def _where() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except ValueError:   # called in the trainer (a test, a debugger)
        return "local"


def run_trial(spec: FeedSpec, cfg: TrainConfig, seconds_left: float | None = None, threads: int = 1,
              model_entry: tuple | None = None) -> dict:
    """Train ``cfg`` (a trial's options) from the cached shards of ``spec``;
    stop at ``seconds_left`` if given; ``model_entry``: the model's
    registration (:func:`~lancetnic_flow.models.registration`). Returns the monitored metric of the
    best epoch (``value``, None when no epoch finished), its curve, the
    seconds, and the worker and process that ran it."""
    t0 = time.monotonic()
    if model_entry is not None:   # a model the user's script registered: this worker may not have it
        register(model_entry)
    tc = cfg.training
    if tc.learn_val:
        spec = _weighed_as_learning_val(spec)
    torch.set_num_threads(threads)   # one trial per worker thread: one core each
    torch.manual_seed(tc.seed)
    device = torch.device("cpu")
    task = make_task(cfg, spec.features, device)
    m = cfg.model
    model, _ = create_model(m.name, dim=spec.features.dim, classes=task.classes if task.classifies else 0,
                            regress=task.regresses, hidden=m.hidden, layers=m.layers, dropout=m.dropout,
                            embed=m.embed, numeric=len(spec.features.numeric))
    feed = ShardFeed(None, spec, NULL_EVENTS)
    if not feed.complete:
        raise RuntimeError(f"the cache entry {spec.entry} has no manifest: a trial reads a complete entry only")
    total = feed.total_rows()
    state = TrainState(key=spec.key, total_rows=total, total_steps=tc.epochs * max(1, -(-total // tc.batch_size)))
    # The run's own rule (a trial of the linear model steps as its run does); a trial saves no model, so it
    # never learns the validation rows, which leaves its score as it was.
    rule = rule_for(dataclasses.replace(cfg, training=dataclasses.replace(tc, learn_val=False)))
    rule.prepare(model)
    trainee = Trainee(model, task, rule, rule.optimizers(model), device,
                      lr_schedule(tc.lr_schedule, tc.lr, state.total_steps, rule.decay_steps))
    loop = EpochLoop(trainee, feed, tc, NULL_EVENTS, lambda *_: None, "")
    stopped = False
    try:
        loop.run_epochs(state, Deadline(seconds_left), CheckpointEvery())
    except TrainingInterrupted:
        stopped = True   # the search's time ran out: the best epoch so far counts
    return _outcome(state, tc.monitor, stopped, time.monotonic() - t0, rule.keeps_last_epoch())


def _weighed_as_learning_val(spec: FeedSpec) -> FeedSpec:
    """``spec`` with its validation rows weighed as a run that learns them weighs them
    (``FittedFeatures.weigh_unseen``): trial 0 scores what ``train`` scores. A copy: the
    worker's scattered spec serves other trials."""
    features = copy.copy(spec.features)
    features.weigh_unseen(features.docs)
    return dataclasses.replace(spec, features=features)


def _outcome(state: TrainState, monitor: str, stopped: bool, seconds: float, last: bool) -> dict[str, Any]:
    """The trial's answer. Its value is that of the epoch ``train`` would keep:
    the best one, or the last one for a rule that keeps the last epoch's weights."""
    best = state.best
    if last and state.history and best is not None:
        record = state.history[-1]   # the epoch record: its scores under their val_* names
        value, score, epoch = record.get(monitor), lower_is_better(record, monitor), record["epoch"]
    elif best is not None:
        value, score, epoch = val_scores(best["val"]).get(monitor), best["score"], best["epoch"]
    else:
        value = score = epoch = None
    return {"value": value, "score": score, "best_epoch": epoch,
            "epochs_run": len(state.history), "curve": [h.get(monitor) for h in state.history],
            "stopped": stopped, "seconds": seconds, "worker": _where(), "pid": os.getpid()}
