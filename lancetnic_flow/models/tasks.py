"""What a model is trained to do: classify, regress, both, or find a set of labels (multilabel).

A :class:`Task` turns a model's outputs and a batch into a loss, and keeps
the streaming metrics of an epoch. Losses are lancetnic's: cross entropy or
BCE (two classes) or the one-vs-rest hinge (LinearSVM's) for classes; MSE, L1 or smooth L1 for values (on the
standardised target); multi-task adds them with ``loss_weights``;
multilabel takes a binary cross entropy per label (sigmoid, not softmax), or
a hinge per label.

torch is imported by the losses, not by this module: a LinearSVM run is
evaluated without it (runs/linear_scores.py), its hinge summed in NumPy
(:meth:`Task.array_loss`) and its metrics kept from NumPy outputs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .metrics import ClassificationMetrics, MultiLabelMetrics, RegressionMetrics

if TYPE_CHECKING:   # the annotations' only need of torch; the losses import it when they run
    import torch


def ovr_hinge(logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean",
              class_weights: torch.Tensor | None = None) -> torch.Tensor:
    """One-vs-rest hinge loss, summed over classes: ``max(0, 1 - t·s)`` with
    ``t = +1`` for the row's class and ``-1`` for every other (LinearSVM's);
    ``class_weights`` (one per class) weigh each row's loss by its class, as
    scikit-learn's ``class_weight`` weighs a hinge's samples."""
    import torch

    t = torch.full_like(logits, -1.0).scatter_(1, labels[:, None], 1.0)
    per_row = torch.relu(1.0 - t * logits).sum(1)
    if class_weights is not None:
        per_row = per_row * class_weights[labels]
    return per_row.mean() if reduction == "mean" else per_row.sum() if reduction == "sum" else per_row


@dataclass
class Task:
    kind: str = "classify"
    classes: int = 0
    class_loss: str = "cross_entropy"
    value_loss: str = "mse"
    loss_weights: tuple[float, float] = (1.0, 1.0)
    class_weights: torch.Tensor | None = None
    target: tuple[float, float] = (0.0, 1.0)     # mean, std of the original target
    seed: int = 0
    device: Any = "cpu"   # where the losses' tensors are (a torch.device or its name)
    # Multilabel: the logit from which each label is predicted (a run's thresholds; None: 0, probability 0.5).
    label_cuts: np.ndarray | None = None

    @property
    def classifies(self) -> bool:
        """Whether the model has a class head (one label, or a set of labels)."""
        return self.kind in ("classify", "multitask", "multilabel")

    @property
    def multilabel(self) -> bool:
        return self.kind == "multilabel"

    @property
    def regresses(self) -> bool:
        return self.kind in ("regress", "multitask")

    def loss(self, out: dict[str, torch.Tensor], labels: torch.Tensor | None, targets: torch.Tensor | None,
             reduction: str = "mean") -> torch.Tensor:
        import torch.nn.functional as F

        total = 0.0
        if self.multilabel:
            return self._label_set_loss(out["logits"], labels, reduction)
        if self.classifies:
            logits = out["logits"]
            if self.class_loss == "bce":
                # Two classes as one logit difference: the same model, BCE's loss.
                margin = logits[:, 1] - logits[:, 0]
                w = None if self.class_weights is None else self.class_weights[labels]
                cl = F.binary_cross_entropy_with_logits(margin, labels.float(), weight=w, reduction=reduction)
            elif self.class_loss == "hinge":
                cl = ovr_hinge(logits, labels, reduction, self.class_weights)
            else:
                cl = F.cross_entropy(logits, labels, weight=self.class_weights, reduction=reduction)
            total = total + self.loss_weights[0] * cl
        if self.regresses:
            fn = {"mse": F.mse_loss, "l1": F.l1_loss, "smooth_l1": F.smooth_l1_loss}[self.value_loss]
            total = total + self.loss_weights[1] * fn(out["value"], targets, reduction=reduction)
        return total

    def _label_set_loss(self, logits: torch.Tensor, hot: torch.Tensor, reduction: str) -> torch.Tensor:
        """A binary cross entropy per label (on its logit, through a sigmoid),
        or with ``class_loss="hinge"`` a hinge per label (``max(0, 1 - t·s)``,
        ``t = ±1``: LinearSVM's), summed over a row's labels: each label learns
        as its own yes/no classifier, at the same scale however many labels
        there are. ``class_weights`` here weigh each label's positive rows (``pos_weight``),
        the hinge's as the cross entropy's."""
        import torch
        import torch.nn.functional as F

        if self.class_loss == "hinge":
            short = torch.relu(1.0 - (2.0 * hot - 1.0) * logits)
            if self.class_weights is not None:
                short = short * torch.where(hot > 0, self.class_weights, torch.ones_like(self.class_weights))
            per_row = short.sum(1)
        else:
            per_row = F.binary_cross_entropy_with_logits(logits, hot, pos_weight=self.class_weights,
                                                         reduction="none").sum(1)
        return per_row.mean() if reduction == "mean" else per_row.sum() if reduction == "sum" else per_row

    def array_loss(self, logits: np.ndarray, labels: np.ndarray) -> float | None:
        """The summed loss of NumPy ``logits`` (rows × classes) against class ids, or a
        multi-hot matrix for label sets, without torch: the hinge (LinearSVM's, the
        one loss computed so), equal to :meth:`loss`'s within float32 rounding. None
        for any other loss (the caller takes :meth:`loss`)."""
        if self.class_loss != "hinge" or self.class_weights is not None or self.regresses:
            return None
        if self.multilabel:
            t = np.float32(2.0) * labels.astype(np.float32) - np.float32(1.0)
        else:
            t = np.full(logits.shape, -1.0, np.float32)
            t[np.arange(len(logits)), labels.astype(np.int64)] = 1.0
        return float(np.maximum(np.float32(1.0) - t * logits, np.float32(0.0)).sum(1).sum())

    def new_metrics(self) -> "TaskMetrics":
        if self.multilabel:
            return TaskMetrics(MultiLabelMetrics(self.classes), None, self.label_cuts)
        return TaskMetrics(ClassificationMetrics(self.classes) if self.classifies else None,
                           RegressionMetrics(*self.target, seed=self.seed) if self.regresses else None)


def label_cuts(thresholds: list[float] | np.ndarray | None) -> np.ndarray | None:
    """Probability thresholds per label as the float32 logits they are reached at (None stays
    None): 0 is -inf (every label taken), 1 is +inf (none). With :func:`labels_taken`, the one
    rule every path decides a label by."""
    if thresholds is None or len(thresholds) == 0:
        return None
    p = np.asarray(thresholds, np.float64)
    with np.errstate(divide="ignore"):
        return np.log(p / (1 - p)).astype(np.float32)


def labels_taken(logits: np.ndarray, thresholds: list[float] | np.ndarray) -> np.ndarray:
    """Which labels a multilabel run predicts: each logit at or above its threshold's
    (:func:`label_cuts`). predict, evaluate, explain, serve and the exported graph all decide
    so: a float32 probability near a threshold rounds onto either side of it, so comparing
    probabilities took labels that evaluate's logits did not (and back)."""
    cuts = label_cuts(thresholds)
    return np.asarray(logits) >= (0.0 if cuts is None else cuts)


def as_array(x: Any) -> np.ndarray:
    """A model output as a NumPy array: a torch tensor's values, or the array itself."""
    return x if isinstance(x, np.ndarray) else x.detach().cpu().numpy()


@dataclass
class TaskMetrics:
    cls: ClassificationMetrics | MultiLabelMetrics | None
    reg: RegressionMetrics | None
    cuts: np.ndarray | None = None   # multilabel: each label's logit threshold (None: 0)

    def update(self, out: dict[str, Any], labels: np.ndarray | None, targets: np.ndarray | None,
               loss_sum: float, missed: np.ndarray | None = None) -> None:
        """Count a batch (``out``: torch tensors or NumPy arrays). ``missed`` (label sets):
        per row, the labels of its set the run never saw (a block's ``missed``)."""
        if isinstance(self.cls, MultiLabelMetrics):
            # A label is predicted from its threshold on: probability ≥ 0.5 (a logit ≥ 0) unless the run chose one.
            logits = as_array(out["logits"])
            self.cls.update(labels, logits >= (0.0 if self.cuts is None else self.cuts), loss_sum, missed)
        elif self.cls is not None:
            self.cls.update(labels.astype(np.int64), as_array(out["logits"]).argmax(1), loss_sum)
        if self.reg is not None:
            self.reg.update(targets, as_array(out["value"]), 0.0 if self.cls is not None else loss_sum)

    @property
    def rows(self) -> int:
        return self.cls.rows if self.cls is not None else self.reg.n

    @property
    def unseen_rows(self) -> int:
        """Rows whose label (or a label of whose set) the run never saw."""
        return self.cls.unseen_rows if self.cls is not None else 0

    def merge(self, other: "TaskMetrics") -> "TaskMetrics":
        if self.cls is not None:
            self.cls.merge(other.cls)
        if self.reg is not None:
            self.reg.merge(other.reg)
        return self

    def state(self) -> dict:
        return {"cls": self.cls.state() if self.cls is not None else None,
                "reg": self.reg.state() if self.reg is not None else None}

    def load_state(self, d: dict) -> None:
        if self.cls is not None:
            self.cls.load_state(d["cls"])
        if self.reg is not None:
            self.reg.load_state(d["reg"])

    def result(self) -> dict:
        """Flat scores: classification keys as before, regression ones prefixed-free
        (mae, rmse, r2) — and one ``loss`` (the task's total)."""
        out: dict = {}
        if self.cls is not None:
            out.update(self.cls.result())
        if self.reg is not None:
            r = self.reg.result()
            out.update({k: v for k, v in r.items() if k not in ("loss", "rows")})
            if self.cls is None:
                out["loss"], out["rows"] = r["loss"], r["rows"]
        return out
