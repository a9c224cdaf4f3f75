"""The validation scores: their names, which way is better, how they are shown.

One table serves the trainer (``--monitor``, the epoch records), the
configuration (which ``--monitor`` fits which task), ``metrics.json`` and the
views (the dashboard's model panel, epoch lines and the final summary).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Score:
    name: str                  # metrics.json, history.csv and events say ``val_<name>``
    source: str                # its key in a task's metrics (``TaskMetrics.result()``)
    short: str                 # its label in the dashboard and epoch lines ("": not shown there)
    long: str                  # its label in the final summary
    fmt: str = ".4f"           # a format spec, or "units": in the target's units (see :meth:`shown`)
    higher_is_better: bool = False
    task: str | None = None    # "classify", "regress" or "multilabel": the task it needs to be monitored; None: any
    also: str | None = None    # a second task that produces it (macro-F1: classify and multilabel)

    @property
    def key(self) -> str:
        return f"val_{self.name}"

    def shown(self, value: float) -> str:
        """``value`` as the views write it. A score in the target's units (``fmt`` "units")
        keeps four decimals from 1 up and four significant digits below: four decimals
        read the error of a target in small units (1e-6) as a perfect 0.0000."""
        if self.fmt != "units":
            return format(value, self.fmt)
        return format(value, ".4f" if value == 0 or abs(value) >= 1 or value != value else ".4g")


SCORES = (
    Score("loss", "loss", "loss", "loss"),
    Score("accuracy", "accuracy", "acc", "accuracy", higher_is_better=True, task="classify"),
    Score("macro_f1", "macro_f1", "F1", "macro-F1", higher_is_better=True, task="classify", also="multilabel"),
    Score("micro_f1", "micro_f1", "µF1", "micro-F1", higher_is_better=True, task="multilabel"),
    Score("subset_accuracy", "subset_accuracy", "exact", "subset accuracy (exact label set)",
          higher_is_better=True, task="multilabel"),
    Score("precision", "macro_precision", "", "macro precision"),
    Score("recall", "macro_recall", "", "macro recall"),
    # evaluate's other averages, so a run's metrics.json holds what evaluate --json gives
    Score("weighted_f1", "weighted_f1", "", "weighted-F1"),
    Score("weighted_precision", "weighted_precision", "", "weighted precision"),
    Score("weighted_recall", "weighted_recall", "", "weighted recall"),
    Score("micro_precision", "micro_precision", "", "micro precision"),
    Score("micro_recall", "micro_recall", "", "micro recall"),
    Score("mae", "mae", "MAE", "MAE", "units", task="regress"),
    Score("rmse", "rmse", "RMSE", "RMSE", "units", task="regress"),
    Score("baseline_rmse", "baseline_rmse", "", "baseline RMSE", "units"),
    Score("r2", "r2", "R²", "R²", higher_is_better=True, task="regress"),
)
BY_KEY = {s.key: s for s in SCORES}
# What --monitor accepts: the loss, and the scores of a task.
MONITORS = tuple(s.key for s in SCORES if s.name == "loss" or s.task)


def val_scores(result: dict) -> dict:
    """A task's validation metrics → ``{"val_loss": …, "val_accuracy": …, …}`` (None where absent)."""
    return {s.key: result.get(s.source) for s in SCORES}


def lower_is_better(scores: dict, monitor: str) -> float | None:
    """The monitored score of ``scores`` (``val_*`` keys) turned so that lower is better."""
    v = scores.get(monitor)
    if v is None:
        return None
    return -v if BY_KEY[monitor].higher_is_better else v


def monitor_fits(monitor: str, task: str) -> bool:
    """Whether ``--monitor`` names a score ``--task`` produces (multitask: those of classify and regress)."""
    s = BY_KEY[monitor]
    made_by = {s.task, s.also}
    return s.task is None or task in made_by or (task == "multitask" and bool(made_by & {"classify", "regress"}))
