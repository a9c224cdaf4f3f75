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

    def state(self) -> dict:
        """Everything to continue counting after a restart (see checkpoints)."""
        return {"confusion": self.confusion, "loss_sum": self.loss_sum, "rows": self.rows}

    def load_state(self, d: dict) -> None:
        self.confusion = np.asarray(d["confusion"], np.int64).copy()
        self.loss_sum, self.rows = d["loss_sum"], d["rows"]

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


class RegressionMetrics:
    """Streaming MAE, RMSE, R² in the target's original units (sums only),
    plus a fixed-size seeded reservoir of (true, predicted) pairs for plots."""

    def __init__(self, mean: float = 0.0, std: float = 1.0, sample: int = 5000, seed: int = 0):
        self.mean, self.std = mean, std
        self.n = 0
        self.abs_err = self.sq_err = self.sum_y = self.sum_y2 = 0.0
        self.loss_sum = 0.0
        self.sample = sample
        self.rng = np.random.default_rng(seed)
        self.true = np.zeros(0, np.float64)
        self.pred = np.zeros(0, np.float64)
        self._keys = np.zeros(0)

    def update(self, true_std: np.ndarray, pred_std: np.ndarray, loss_sum: float = 0.0) -> None:
        y = true_std.astype(np.float64) * self.std + self.mean
        p = pred_std.astype(np.float64) * self.std + self.mean
        e = p - y
        self.n += len(y)
        self.abs_err += float(np.abs(e).sum())
        self.sq_err += float((e * e).sum())
        self.sum_y += float(y.sum())
        self.sum_y2 += float((y * y).sum())
        self.loss_sum += float(loss_sum)
        # Reservoir by random keys: keep the `sample` smallest keys seen so far.
        keys = np.concatenate([self._keys, self.rng.random(len(y))])
        true, pred = np.concatenate([self.true, y]), np.concatenate([self.pred, p])
        if len(keys) > self.sample:
            keep = np.argpartition(keys, self.sample)[:self.sample]
            keys, true, pred = keys[keep], true[keep], pred[keep]
        self._keys, self.true, self.pred = keys, true, pred

    def merge(self, other: "RegressionMetrics") -> "RegressionMetrics":
        self.n += other.n
        self.abs_err += other.abs_err
        self.sq_err += other.sq_err
        self.sum_y += other.sum_y
        self.sum_y2 += other.sum_y2
        self.loss_sum += other.loss_sum
        keys = np.concatenate([self._keys, other._keys])
        true, pred = np.concatenate([self.true, other.true]), np.concatenate([self.pred, other.pred])
        if len(keys) > self.sample:
            keep = np.argpartition(keys, self.sample)[:self.sample]
            keys, true, pred = keys[keep], true[keep], pred[keep]
        self._keys, self.true, self.pred = keys, true, pred
        return self

    _SUMS = ("n", "abs_err", "sq_err", "sum_y", "sum_y2", "loss_sum")

    def state(self) -> dict:
        """Sums, reservoir and its RNG: counting continues exactly after a restart."""
        return {**{k: getattr(self, k) for k in self._SUMS}, "rng": self.rng.bit_generator.state,
                "keys": self._keys, "true": self.true, "pred": self.pred}

    def load_state(self, d: dict) -> None:
        for k in self._SUMS:
            setattr(self, k, d[k])
        self.rng.bit_generator.state = d["rng"]
        self._keys, self.true, self.pred = (np.asarray(d[k], np.float64).copy() for k in ("keys", "true", "pred"))

    def result(self) -> dict:
        if not self.n:
            return {"loss": None, "mae": None, "rmse": None, "r2": None, "rows": 0}
        sst = self.sum_y2 - self.sum_y**2 / self.n
        return {"loss": self.loss_sum / self.n, "mae": self.abs_err / self.n, "rmse": float(np.sqrt(self.sq_err / self.n)),
                "r2": float(1.0 - self.sq_err / sst) if sst > 0 else None,
                "baseline_rmse": float(np.sqrt(max(sst, 0.0) / self.n)), "rows": self.n}
