"""Streaming classification metrics: a confusion matrix grows batch by batch,
every score is derived from it at the end. Memory: classes² integers."""
from __future__ import annotations

import numpy as np


class ClassificationMetrics:
    def __init__(self, classes: int):
        self.classes = classes
        self.confusion = np.zeros((classes, classes), np.int64)   # [true, predicted]
        self.loss_sum = 0.0
        self.rows = 0

    def update(self, true: np.ndarray, pred: np.ndarray, loss_sum: float) -> None:
        self.confusion += np.bincount(true * self.classes + pred,
                                      minlength=self.classes**2).reshape(self.classes, self.classes)
        self.loss_sum += float(loss_sum)
        self.rows += len(true)

    def merge(self, other: "ClassificationMetrics") -> "ClassificationMetrics":
        self.confusion += other.confusion
        self.loss_sum += other.loss_sum
        self.rows += other.rows
        return self

    def result(self) -> dict:
        c = self.confusion.astype(np.float64)
        tp = np.diag(c)
        support, predicted = c.sum(1), c.sum(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            precision = np.where(predicted > 0, tp / predicted, 0.0)
            recall = np.where(support > 0, tp / support, 0.0)
            f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
        present = support > 0   # macro averages over classes present in the data
        n = max(self.rows, 1)
        return {
            "loss": self.loss_sum / n if self.rows else None,
            "accuracy": float(tp.sum() / n) if self.rows else None,
            "macro_f1": float(f1[present].mean()) if present.any() else None,
            "macro_precision": float(precision[present].mean()) if present.any() else None,
            "macro_recall": float(recall[present].mean()) if present.any() else None,
            "rows": self.rows,
            "per_class": {"precision": precision.tolist(), "recall": recall.tolist(), "f1": f1.tolist(),
                          "support": support.astype(int).tolist()},
            "confusion": self.confusion.tolist(),
        }
