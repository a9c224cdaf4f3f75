"""What every way of training shares around its batch step: the learning
rate schedule, the streaming training metrics, evaluation, the record of an
epoch and the best epoch kept. Written once, used by the single-process loop
(:mod:`.loop`), the ``tune`` trials and every ``--ddp`` rank
(:mod:`.ddp.rank`); the batch step itself is the run's training rule
(:mod:`.rules`).
"""
from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

from ..options import bad
from ..features.rows import RowBlock
from ..models.inputs import answers, outputs_of
from ..models.linear_arrays import is_arrays
from ..models.tasks import Task, TaskMetrics
from ..scores import lower_is_better, val_scores

if TYPE_CHECKING:
    import torch

EVAL_BATCH = 2048


def lr_schedule(kind: str, lr: float, total_steps: int, decay_steps: int = 0, start: int = 0
                ) -> Callable[[int], float]:
    """The learning rate at step t: constant, or a linear decay to 5 % of
    ``lr`` over ``total_steps`` — over ``decay_steps`` at least, so a run of
    fewer steps keeps most of its rate (ModelSpec.decay_steps). ``start``: the
    steps the weights took before this run (a continued run's, :func:`schedule_start`):
    the decay goes on from there, as one run over both runs' steps would decay."""
    if kind == "constant":
        return lambda t: lr
    total = max(1, start + total_steps, decay_steps)
    return lambda t: lr * max(0.05, 1.0 - (start + t) / total)


def schedule_start(meta: dict, metrics: dict, config: dict) -> int:
    """The optimiser steps a finished run's weights took (``model.json``'s ``steps``:
    those of the runs it continued too). A run saved without the record: its own
    epochs' steps up to the one it kept, from ``metrics.json`` and its batch size."""
    if isinstance(meta.get("steps"), int):
        return max(0, meta["steps"])
    kept = metrics.get("best_epoch")
    return kept_steps(metrics.get("epochs") or [], kept if isinstance(kept, int) else None,
                      int((config.get("training") or {}).get("batch_size") or 1))


def kept_steps(epochs: list, kept: int | None, batch_size: int) -> int:
    """The steps of ``epochs`` (their records) up to the ``kept`` one (None: all), each epoch's
    rows over ``batch_size``: what one process steps, whatever the ranks that trained them."""
    return sum(-(-int(e.get("rows") or 0) // max(1, batch_size))
               for e in epochs[:kept] if isinstance(e, dict))


def count(metrics: TaskMetrics, out: dict[str, Any], batch: RowBlock, loss: Any) -> None:
    """Add a trained batch to the epoch's streaming training metrics."""
    metrics.update(out, batch.labels, batch.targets, loss.item() * len(batch))


def evaluate_blocks(model: Any, blocks: Iterable[RowBlock], task: Task, device: Any,
                    batch_size: int = EVAL_BATCH, then: Callable[[RowBlock], object] | None = None) -> TaskMetrics:
    """Streaming evaluation: blocks in order, no shuffling, no gradients. A label
    set's labels that training never had count as ``evaluate`` counts them: each a
    false negative of its row (the blocks' ``missed``), its row never an exact match.
    ``then``: called with each piece once the model has scored it (a training
    rule may learn the validation rows there, in the same read of them)."""
    m = task.new_metrics()
    # The validation loss is the plain one, evaluate's: class weights steer training, not the score
    # (a weighted figure matched no report, and --monitor val_loss kept another epoch by it).
    scoring = dataclasses.replace(task, class_weights=None) if task.class_weights is not None else task
    model.eval()
    for block in blocks:
        if task.multilabel:   # labels its rows hold that training never had, as evaluate names them
            m.cls.update_unseen(block.missed_by_label())
        for start in range(0, len(block), batch_size):
            b = block.slice(start, start + batch_size)
            out = outputs_of(model, b, device)
            m.update(out, b.labels, b.targets, _summed_loss(scoring, out, b, device), b.missed)
            if then is not None:
                then(b)
    model.train()
    return m


def _summed_loss(task: Task, out: dict[str, Any], b: RowBlock, device: Any) -> float:
    """The block's summed loss: in NumPy for a model's arrays, by the task's torch loss for a network's tensors."""
    if isinstance(out.get("logits"), np.ndarray):
        loss = task.array_loss(out["logits"], b.labels)
        if loss is not None:
            return loss
    labels, targets = answers(b, device)
    return task.loss(out, labels, targets, reduction="sum").item()


class EpochClock:
    """Rows and seconds of an epoch's training (stopped before its evaluation), for its record.
    An epoch continued from a checkpoint starts from the rows and seconds trained before it,
    so its rows/s is the epoch's, not the rows of the whole epoch over the time since the resume."""

    def __init__(self, rows: int = 0, seconds: float = 0.0):
        self.rows, self.t0, self.t1 = rows, time.monotonic() - seconds, None

    def stop(self) -> None:
        self.t1 = time.monotonic()

    @property
    def seconds(self) -> float:
        return (self.t1 or time.monotonic()) - self.t0

    def rate(self) -> float:
        return self.rows / max(self.seconds, 1e-9)


def check_finite(epoch: int, train: dict, val: dict) -> None:
    """Refuse an epoch whose loss is not a number: the weights have diverged,
    and every later epoch, prediction and plot would be nan too."""
    for split, loss in (("training", train.get("loss")), ("validation", val.get("loss"))):
        if loss is not None and not math.isfinite(loss):
            raise bad("training.lr", f"training diverged: the {split} loss is {loss} after epoch {epoch}, so the "
                      "weights are no longer numbers", "lower the learning rates ({name}, and {training.sparse_lr} for "
                      "the input rows), or clip the gradient with {training.clip_grad} 1.0")


def no_better_than_the_mean(task: Task, final_val: dict, history: list[dict]) -> str | None:
    """A warning when a regression's saved model predicts its target no better than the
    training mean (a run diverged to a constant, or learnt nothing): on the validation
    rows its R², else the last epoch's squared error on the standardised target, where
    the mean scores 1. None when it does better, or when no figure says (multi-task and
    other losses without validation rows)."""
    if not task.regresses or constant_target(task):
        return None
    r2 = final_val.get("r2")
    if r2 is not None:
        if not r2 > 0:
            return (f"the saved model predicts the target no better than its training mean: R² {r2:.4f} on the "
                    "validation rows")
        return None
    loss = history[-1].get("train_loss") if history else None
    if task.kind == "regress" and task.value_loss == "mse" and loss is not None and not loss < 1.0:
        return (f"the saved model fits its training rows no better than their mean: a squared error of "
                f"{loss:.4f} on the standardised target in its last epoch, where the mean scores 1")
    return None


def constant_target(task: Task) -> str | None:
    """Words for a regression whose training rows all have one target (its scale is 0): the
    saved model predicts exactly that value for every text; None for any other task or target."""
    if not task.regresses or task.target[1]:
        return None
    value = f"{task.target[0]:.10g}"
    return (f"every training row's target is {value}, so the saved model predicts {value} for every text (R² is "
            "not defined for a target without spread: the validation rows' mae and rmse say how far they are from "
            "it); check {data.target} names the column to learn")


def decided_at(task) -> str | None:
    """Where a multi-label epoch's figures decide each label: at margin 0 (the hinge's scores)
    or probability 0.5, the same logit 0, never the per-label thresholds the saved model is
    given once the epochs are done (``val_at_thresholds``); None for a task that picks a class."""
    if not task.multilabel:
        return None
    return "margin 0" if task.class_loss == "hinge" else "probability 0.5"


def epoch_record(epoch: int, train: TaskMetrics, val: dict, clock: EpochClock, lr: float,
                 decided: str | None = None) -> dict:
    """One finished epoch, as history.csv, metrics.json and the ``epoch`` event have it
    (``decided``: where its label sets' figures decide a label, :func:`decided_at`).
    A loss that is not a number ends the run (:func:`check_finite`)."""
    tr = train.result()
    check_finite(epoch, tr, val)
    seconds = clock.seconds
    label_sets = {"train_micro_f1": tr["micro_f1"]} if "micro_f1" in tr else {}   # multilabel's curve
    if decided and val:
        label_sets["val_decided_at"] = decided
    return {"epoch": epoch, "train_loss": tr.get("loss"), "train_accuracy": tr.get("accuracy"), **label_sets,
            **val_scores(val),
            "rows": clock.rows, "seconds": seconds, "lr": lr,
            "rows_per_s": clock.rows / seconds if seconds > 0 else None}


# The validation rows below which a run's scores do not choose its epoch: a row is a fifth of the
# accuracy of five rows (a 50-row file's tenth), and epochs that differ by noise were stopped and
# picked by it. A standard error of a score near one half is under a twentieth from here on.
CHOOSING_ROWS = 100


def keep_best(best: dict | None, stale: int, val: dict, val_m: TaskMetrics | None, model: torch.nn.Module,
              epoch: int, monitor: str, copy: bool = True, floor: int = 0) -> tuple[dict | None, int]:
    """After an epoch's validation: the best epoch so far (its score, metrics,
    regression sample and, with ``copy``, a copy of its weights: later epochs
    may overfit) and how many epochs since it improved. Scored on fewer than
    ``floor`` rows, the epoch is kept as the best whatever its score (``few``:
    the rows), and none is stale: every epoch runs and the last is saved (a
    continued run's starting weights, epoch 0, still until an epoch beats them)."""
    score = lower_is_better(val_scores(val), monitor)
    if score is None:
        return best, stale
    # A continued run's starting weights (epoch 0) give way only to an epoch that beats them, few rows or many.
    few = (val.get("rows") or 0) < floor and not (best is not None and best["epoch"] == 0)
    if best is None or score < best["score"] or few:
        kept = {"score": score, "epoch": epoch, "val": val,
                "sample": (val_m.reg.true, val_m.reg.pred) if val_m.reg is not None else None}
        if few:
            kept["few"] = int(val.get("rows") or 0)
            return kept, 0
        if copy:
            kept["state"] = copy_weights(model, best.get("state") if best else None)
        return kept, 0
    return best, stale + 1


def copy_weights(model: Any, into: dict[str, Any] | None) -> dict[str, Any]:
    """A copy of the model's weights, written into the previous best copy's
    tensors where they fit: a new best then costs no second copy of a large
    sparse layer at the trainer's peak."""
    out = {}
    for k, v in model.state_dict().items():
        old = (into or {}).get(k)
        if is_arrays(model):
            if isinstance(old, np.ndarray) and old.shape == v.shape and old.dtype == v.dtype:
                np.copyto(old, v)
                out[k] = old
            else:
                out[k] = v.copy()
        elif old is not None and old.shape == v.shape and old.dtype == v.dtype and old.device == v.device:
            out[k] = old.copy_(v.detach())
        else:
            out[k] = v.detach().clone()
    return out
