"""Streaming metrics. Classification: a confusion matrix grows batch by batch,
every score is derived from it at the end (memory: classes² integers).
Multi-label: per-label counts (3 × labels integers). Regression: sums."""
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


def _f1(tp, fp, fn) -> tuple:
    """Precision, recall and F1 from counts (arrays or numbers); 0 where undefined."""
    tp, fp, fn = (np.asarray(x, np.float64) for x in (tp, fp, fn))
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        recall = np.where(tp + fn > 0, tp / (tp + fn), 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
    return precision, recall, f1


class MultiLabelMetrics:
    """Streaming multi-label scores: per label, true and false positives and
    false negatives; exact matches of the whole set. Memory: 3 × labels integers.

    A label is predicted when its sigmoid probability is ≥ 0.5 (logit ≥ 0)."""

    def __init__(self, classes: int):
        self.classes = classes
        self.tp = np.zeros(classes, np.int64)
        self.fp = np.zeros(classes, np.int64)
        self.fn = np.zeros(classes, np.int64)
        self.exact = 0
        self.loss_sum = 0.0
        self.rows = 0

    _COUNTS = ("tp", "fp", "fn")

    def update(self, true: np.ndarray, pred: np.ndarray, loss_sum: float) -> None:
        """``true``, ``pred``: rows × labels, 0/1."""
        t, p = true.astype(bool), pred.astype(bool)
        self.tp += (t & p).sum(0)
        self.fp += (~t & p).sum(0)
        self.fn += (t & ~p).sum(0)
        self.exact += int((t == p).all(1).sum())
        self.loss_sum += float(loss_sum)
        self.rows += len(t)

    def merge(self, other: "MultiLabelMetrics") -> "MultiLabelMetrics":
        for k in self._COUNTS:
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.exact += other.exact
        self.loss_sum += other.loss_sum
        self.rows += other.rows
        return self

    def state(self) -> dict:
        """Everything to continue counting after a restart (see checkpoints)."""
        return {**{k: getattr(self, k) for k in self._COUNTS}, "exact": self.exact, "loss_sum": self.loss_sum,
                "rows": self.rows}

    def load_state(self, d: dict) -> None:
        for k in self._COUNTS:
            setattr(self, k, np.asarray(d[k], np.int64).copy())
        self.exact, self.loss_sum, self.rows = d["exact"], d["loss_sum"], d["rows"]

    def result(self) -> dict:
        """micro-F1 (every label decision pooled), macro-F1 (the mean over labels
        present in the data), subset accuracy (the whole set right), per-label scores."""
        precision, recall, f1 = _f1(self.tp, self.fp, self.fn)
        micro_p, micro_r, micro_f1 = _f1(self.tp.sum(), self.fp.sum(), self.fn.sum())
        support = self.tp + self.fn
        present = support > 0
        rows = self.rows

        def mean(a):
            return float(a[present].mean()) if rows and present.any() else None

        return {
            "loss": self.loss_sum / rows if rows else None,
            "micro_f1": float(micro_f1) if rows else None,
            "micro_precision": float(micro_p) if rows else None,
            "micro_recall": float(micro_r) if rows else None,
            "macro_f1": mean(f1), "macro_precision": mean(precision), "macro_recall": mean(recall),
            "subset_accuracy": self.exact / rows if rows else None,
            "rows": rows,
            "per_label": {"precision": precision.tolist(), "recall": recall.tolist(), "f1": f1.tolist(),
                          "support": support.astype(int).tolist()},
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
