"""Streaming metrics. Classification: the confusion matrix's non-zero cells
grow batch by batch, every score is derived from them at the end (memory:
at most one cell per validated row, never classes², so thousands of classes
cost what their rows do). Multi-label: per-label counts (3 × labels
integers). Regression: sums.

The scores mean what ``sklearn.metrics`` means on the same predictions:
macro averages run over every label that is true or predicted in the rows
(scikit-learn's ``unique_labels(y_true, y_pred)``), a label with no
predicted (or no true) row scoring 0; weighted averages weigh each label by
its true rows. Rows whose label the run never saw (``evaluate`` on data with
new labels) are scored as wrong — in accuracy, in their label's recall and
in the precision of the label predicted for them — and counted apart, by
label, under ``unseen_labels``."""
from __future__ import annotations

import numpy as np

#: Up to this many classes a confusion matrix is also given dense (a list of
#: rows), as ``confusion``; above it only as ``confusion_cells``, whose size
#: follows the rows, not classes² (3,000 classes would be 9 million numbers).
DENSE_CONFUSION_MAX = 50
_FOLD_AT = 1 << 20   # pending (true, predicted) codes folded into counted cells at this many


def confusion_cells(matrix: np.ndarray) -> list[list[int]]:
    """A dense confusion matrix's non-zero cells as ``[true, predicted, count]``, row-major."""
    m = np.asarray(matrix, np.int64)
    t, p = np.nonzero(m)
    return np.stack([t, p, m[t, p]], 1).tolist()


def dense_confusion(cells: list, classes: int) -> np.ndarray:
    """``[true, predicted, count]`` cells back into a classes × classes matrix (for few classes)."""
    out = np.zeros((classes, classes), np.int64)
    a = np.asarray(cells, np.int64).reshape(-1, 3)
    np.add.at(out, (a[:, 0], a[:, 1]), a[:, 2])
    return out


def cells_of(metrics: dict) -> np.ndarray | None:
    """The confusion cells of a metrics dict (``confusion_cells``, or an older
    run's dense ``confusion``) as an n × 3 array; None when it has none."""
    if metrics.get("confusion_cells") is not None:
        return np.asarray(metrics["confusion_cells"], np.int64).reshape(-1, 3)
    if metrics.get("confusion") is not None:
        return np.asarray(confusion_cells(metrics["confusion"]), np.int64).reshape(-1, 3)
    return None


def _add_counts(into: dict[str, int], counts: dict[str, int]) -> None:
    for k, v in counts.items():
        into[k] = into.get(k, 0) + int(v)


def _averages(f1: np.ndarray, precision: np.ndarray, recall: np.ndarray, support: np.ndarray, present: np.ndarray,
              unseen: dict[str, int], missed: int | None = None) -> dict:
    """Macro averages over the ``present`` labels and the unseen ones (which score 0),
    weighted averages by true rows (the unseen ones' in the total: ``missed`` when
    counted row by row, else their rows in ``unseen``); None without labels."""
    labels = int(present.sum()) + len(unseen)
    weight = float(support.sum()) + (sum(unseen.values()) if missed is None else missed)
    out = {}
    for name, a in (("f1", f1), ("precision", precision), ("recall", recall)):
        out[f"macro_{name}"] = float(a[present].sum() / labels) if labels else None
        out[f"weighted_{name}"] = float((a * support).sum() / weight) if weight else None
    return out


class ClassificationMetrics:
    def __init__(self, classes: int):
        self.classes = classes
        # Counted cells as sorted codes true × classes + predicted, and codes not yet counted.
        self.codes = np.zeros(0, np.int64)
        self.counts = np.zeros(0, np.int64)
        self._pending: list[np.ndarray] = []
        self._pending_n = 0
        self.loss_sum = 0.0
        self.rows = 0
        # Rows whose label the run never saw: how many per label, and the classes predicted for them.
        self.unseen: dict[str, int] = {}
        self.unseen_pred = np.zeros(classes, np.int64)
        # Their confusion rows: (label, class predicted) → rows.
        self.unseen_cells = NamedCells(classes)

    def update(self, true: np.ndarray, pred: np.ndarray, loss_sum: float) -> None:
        self._pending.append(np.asarray(true, np.int64) * self.classes + np.asarray(pred, np.int64))
        self._pending_n += len(true)
        if self._pending_n >= _FOLD_AT:
            self._fold()
        self.loss_sum += float(loss_sum)
        self.rows += len(true)

    @property
    def unseen_rows(self) -> int:
        return sum(self.unseen.values())

    def update_unseen(self, labels: dict[str, int], pred: np.ndarray, names=None) -> None:
        """Rows whose label is none of the run's (``labels``: how many per label)
        and the classes predicted for them: each is wrong, and counted apart.
        ``names``: each row's label (an Arrow array of strings), for their confusion rows."""
        _add_counts(self.unseen, labels)
        pred = np.asarray(pred, np.int64)
        self.unseen_pred += np.bincount(pred, minlength=self.classes)
        if names is not None and len(pred):
            coded = names.dictionary_encode()
            self.unseen_cells.add([str(x) for x in coded.dictionary.to_pylist()],
                                  coded.indices.to_numpy(zero_copy_only=False), pred)

    def _fold(self, codes: np.ndarray | None = None, counts: np.ndarray | None = None) -> None:
        """Count the pending codes (and ``codes`` × ``counts``) into the cells."""
        parts = self._pending
        new = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        all_codes = np.concatenate([self.codes, new] + ([codes] if codes is not None else []))
        weights = np.concatenate([self.counts, np.ones(len(new), np.int64)]
                                 + ([counts] if counts is not None else []))
        self.codes, inverse = np.unique(all_codes, return_inverse=True)
        self.counts = np.bincount(inverse.ravel(), weights=weights, minlength=len(self.codes)).astype(np.int64)
        self._pending, self._pending_n = [], 0

    def merge(self, other: "ClassificationMetrics") -> "ClassificationMetrics":
        other._fold()
        self._fold(other.codes, other.counts)
        self.loss_sum += other.loss_sum
        self.rows += other.rows
        _add_counts(self.unseen, other.unseen)
        self.unseen_pred = self.unseen_pred + other.unseen_pred
        self.unseen_cells.merge(other.unseen_cells)
        return self

    def cells(self) -> np.ndarray:
        """The non-zero cells as an n × 3 array of (true, predicted, count), row-major."""
        self._fold()
        return np.stack([self.codes // self.classes, self.codes % self.classes, self.counts], 1)

    @property
    def confusion(self) -> np.ndarray:
        """The dense matrix [true, predicted]: classes² integers, for few classes only."""
        return dense_confusion(self.cells(), self.classes)

    def state(self) -> dict:
        """Everything to continue counting after a restart (see checkpoints)."""
        return {"cells": self.cells(), "loss_sum": self.loss_sum, "rows": self.rows, "unseen": dict(self.unseen),
                "unseen_pred": self.unseen_pred, "unseen_cells": self.unseen_cells.rows()}

    def load_state(self, d: dict) -> None:
        # A checkpoint from before the sparse cells holds the dense matrix.
        cells = np.asarray(d["cells"], np.int64).reshape(-1, 3) if "cells" in d \
            else np.asarray(confusion_cells(d["confusion"]), np.int64).reshape(-1, 3)
        self._pending, self._pending_n = [], 0
        self.codes, self.counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self._fold(cells[:, 0] * self.classes + cells[:, 1], cells[:, 2])
        self.loss_sum, self.rows = d["loss_sum"], d["rows"]
        self.unseen = dict(d.get("unseen") or {})
        self.unseen_pred = np.asarray(d.get("unseen_pred", np.zeros(self.classes)), np.int64).copy()
        self.unseen_cells = NamedCells.of(self.classes, d.get("unseen_cells") or [])

    def result(self) -> dict:
        cells, k = self.cells(), self.classes
        tp = np.bincount(cells[:, 0], weights=np.where(cells[:, 0] == cells[:, 1], cells[:, 2], 0), minlength=k)
        support = np.bincount(cells[:, 0], weights=cells[:, 2], minlength=k)
        predicted = np.bincount(cells[:, 1], weights=cells[:, 2], minlength=k) + self.unseen_pred
        with np.errstate(invalid="ignore", divide="ignore"):
            precision = np.where(predicted > 0, tp / predicted, 0.0)
            recall = np.where(support > 0, tp / support, 0.0)
            f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
        # scikit-learn's labels: every class true or predicted in these rows, and the unseen ones.
        present = (support > 0) | (predicted > 0)
        scored = self.rows + sum(self.unseen.values())
        return {
            # The loss needs a class: rows with an unseen label have none, so it is over the others.
            "loss": self.loss_sum / self.rows if self.rows else None,
            "accuracy": float(tp.sum() / scored) if scored else None,
            **_averages(f1, precision, recall, support, present, self.unseen if scored else {}),
            "rows": scored,
            **({"unseen_labels": self._unseen_order()} if self.unseen else {}),
            **({"unseen_confusion_cells": self.unseen_cells.rows(list(self._unseen_order()))}
               if len(self.unseen_cells) else {}),
            # Six digits: thousands of classes' scores stay a few tens of kilobytes.
            "per_class": {"precision": _rounded(precision), "recall": _rounded(recall), "f1": _rounded(f1),
                          "support": support.astype(int).tolist()},
            "confusion": dense_confusion(cells, k).tolist() if k <= DENSE_CONFUSION_MAX else None,
            "confusion_cells": cells.tolist(),
        }

    def _unseen_order(self) -> dict[str, int]:
        """The labels the run never saw as ``unseen_labels`` orders them: most rows first."""
        return dict(sorted(self.unseen.items(), key=lambda kv: (-kv[1], kv[0])))


class NamedCells:
    """Confusion cells whose true label is a name, not one of the run's classes (rows of a
    label the run never saw): each name kept once, the cells as NumPy codes (name id ×
    classes + predicted) and counts, as the run's own cells are, never an object per row."""

    def __init__(self, classes: int):
        self.classes = classes
        self.names: dict[str, int] = {}
        self.codes = np.zeros(0, np.int64)
        self.counts = np.zeros(0, np.int64)

    def __len__(self) -> int:
        return len(self.codes)

    def add(self, names: list[str], which: np.ndarray, pred: np.ndarray, counts: np.ndarray | None = None) -> None:
        """Rows (or ``counts`` of them) of true label ``names[which]`` predicted as ``pred``."""
        ids = np.array([self.names.setdefault(n, len(self.names)) for n in names], np.int64)
        codes = ids[np.asarray(which, np.int64)] * self.classes + np.asarray(pred, np.int64)
        weights = np.ones(len(codes), np.int64) if counts is None else np.asarray(counts, np.int64)
        self.codes, inverse = np.unique(np.concatenate([self.codes, codes]), return_inverse=True)
        self.counts = np.bincount(inverse.ravel(), weights=np.concatenate([self.counts, weights]),
                                  minlength=len(self.codes)).astype(np.int64)

    def merge(self, other: "NamedCells") -> None:
        self.add(list(other.names), other.codes // other.classes, other.codes % other.classes, other.counts)

    def rows(self, order: list[str] | None = None) -> list[list]:
        """``[name, predicted, count]`` per cell: names in ``order`` (else as first seen), then by class."""
        names = list(self.names)
        rank = {n: i for i, n in enumerate(order or names)}
        cells = [[names[c // self.classes], c % self.classes, n] for c, n in zip(self.codes.tolist(),
                                                                             self.counts.tolist())]
        return sorted(cells, key=lambda r: (rank.get(r[0], len(rank)), r[0], r[1]))

    @classmethod
    def of(cls, classes: int, rows: list) -> "NamedCells":
        """Cells from :meth:`rows`' list."""
        out = cls(classes)
        if rows:
            names = [str(r[0]) for r in rows]
            out.add(names, np.arange(len(rows)), [int(r[1]) for r in rows], [int(r[2]) for r in rows])
        return out


def with_unseen_rows(cells: np.ndarray, labels: list[str], metrics: dict) -> tuple[np.ndarray, list[str]]:
    """The confusion ``cells`` over the run's ``labels`` with a row (and an empty column) per
    label of the data the run never had (``metrics``' ``unseen_confusion_cells``), as
    scikit-learn's ``confusion_matrix`` has them over the labels true or predicted: every row
    evaluated is in the matrix."""
    extra = metrics.get("unseen_confusion_cells") or []
    if not extra:
        return cells, list(labels)
    names = list(dict.fromkeys(t for t, _, _ in extra))
    at = {t: len(labels) + i for i, t in enumerate(names)}
    rows = np.asarray([[at[t], p, n] for t, p, n in extra], np.int64).reshape(-1, 3)
    return np.concatenate([np.asarray(cells, np.int64).reshape(-1, 3), rows]), list(labels) + names


def _rounded(a: np.ndarray) -> list[float]:
    return np.round(a, 6).tolist()


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
        self.unseen: dict[str, int] = {}   # labels the run never saw, by rows carrying them (never predicted)
        self.unseen_rows = 0               # rows whose set held one
        self.missed = 0                    # such labels of the rows counted: false negatives, none in ``fn``

    _COUNTS = ("tp", "fp", "fn")

    def update(self, true: np.ndarray, pred: np.ndarray, loss_sum: float, missed: np.ndarray | None = None) -> None:
        """``true``, ``pred``: rows × labels, 0/1. ``missed``: per row, how many labels
        of its set the run never saw (left out of ``true``): each a false negative,
        and such a row never an exact match. Their names: :meth:`update_unseen`."""
        t, p = true.astype(bool), pred.astype(bool)
        self.tp += (t & p).sum(0)
        self.fp += (~t & p).sum(0)
        self.fn += (t & ~p).sum(0)
        exact = (t == p).all(1)
        if missed is not None:
            missed = np.asarray(missed, np.int64)
            exact &= missed == 0
            self.unseen_rows += int((missed > 0).sum())
            self.missed += int(missed.sum())
        self.exact += int(exact.sum())
        self.loss_sum += float(loss_sum)
        self.rows += len(t)

    def update_unseen(self, labels: dict[str, int]) -> None:
        """Labels of the rows' sets that the run never saw (how many rows each): each
        one more label of the macro averages, scoring 0, and named under ``unseen_labels``."""
        _add_counts(self.unseen, labels)

    def merge(self, other: "MultiLabelMetrics") -> "MultiLabelMetrics":
        for k in self._COUNTS:
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.exact += other.exact
        self.loss_sum += other.loss_sum
        self.rows += other.rows
        _add_counts(self.unseen, other.unseen)
        self.unseen_rows += other.unseen_rows
        self.missed += other.missed
        return self

    def state(self) -> dict:
        """Everything to continue counting after a restart (see checkpoints)."""
        return {**{k: getattr(self, k) for k in self._COUNTS}, "exact": self.exact, "loss_sum": self.loss_sum,
                "rows": self.rows, "unseen": dict(self.unseen), "unseen_rows": self.unseen_rows, "missed": self.missed}

    def load_state(self, d: dict) -> None:
        for k in self._COUNTS:
            setattr(self, k, np.asarray(d[k], np.int64).copy())
        self.exact, self.loss_sum, self.rows = d["exact"], d["loss_sum"], d["rows"]
        self.unseen = dict(d.get("unseen") or {})
        self.unseen_rows = int(d.get("unseen_rows", 0))
        # A checkpoint from before the per-row count: its unseen labels' rows were its false negatives.
        self.missed = int(d.get("missed", sum(self.unseen.values())))

    def result(self) -> dict:
        """micro-F1 (every label decision pooled), macro-F1 (the mean over labels
        true or predicted in the rows), subset accuracy (the whole set right), per-label scores."""
        precision, recall, f1 = _f1(self.tp, self.fp, self.fn)
        micro_p, micro_r, micro_f1 = _f1(self.tp.sum(), self.fp.sum(), self.fn.sum() + self.missed)
        support = self.tp + self.fn
        present = (support > 0) | (self.tp + self.fp > 0)
        rows = self.rows
        return {
            "loss": self.loss_sum / rows if rows else None,
            "micro_f1": float(micro_f1) if rows else None,
            "micro_precision": float(micro_p) if rows else None,
            "micro_recall": float(micro_r) if rows else None,
            **{k: (v if rows else None) for k, v in
               _averages(f1, precision, recall, support, present, self.unseen, self.missed).items()},
            "subset_accuracy": self.exact / rows if rows else None,
            "rows": rows,
            **({"unseen_labels": dict(sorted(self.unseen.items(), key=lambda kv: (-kv[1], kv[0])))}
               if self.unseen else {}),
            "per_label": {"precision": precision.tolist(), "recall": recall.tolist(), "f1": f1.tolist(),
                          "support": support.astype(int).tolist()},
        }


class RegressionMetrics:
    """Streaming MAE, RMSE, R² in the target's original units (sums, and the
    targets' mean and centred sum of squares merged as Chan et al.'s: a sum of
    y² less (Σy)²/n cancels every digit for targets near 1e9), plus a
    fixed-size seeded reservoir of (true, predicted) pairs for plots."""

    def __init__(self, mean: float = 0.0, std: float = 1.0, sample: int = 5000, seed: int = 0):
        self.mean, self.std = mean, std
        self.n = 0
        self.abs_err = self.sq_err = self.mean_y = self.m2_y = 0.0
        self.loss_sum = 0.0
        self.sample = sample
        self.rng = np.random.default_rng(seed)
        self.true = np.zeros(0, np.float64)
        self.pred = np.zeros(0, np.float64)
        self._keys = np.zeros(0)

    def update(self, true_std: np.ndarray, pred_std: np.ndarray, loss_sum: float = 0.0) -> None:
        # Targets are standardised at scale 1 where the training target is constant (scale 0).
        y = true_std.astype(np.float64) * (self.std or 1.0) + self.mean
        p = pred_std.astype(np.float64) * self.std + self.mean
        e = p - y
        if len(y):
            mean = float(y.mean())
            self._merge_moments(len(y), mean, float(((y - mean) ** 2).sum()))
        self.n += len(y)
        self.abs_err += float(np.abs(e).sum())
        self.sq_err += float((e * e).sum())
        self.loss_sum += float(loss_sum)
        # Reservoir by random keys: keep the `sample` smallest keys seen so far.
        keys = np.concatenate([self._keys, self.rng.random(len(y))])
        true, pred = np.concatenate([self.true, y]), np.concatenate([self.pred, p])
        if len(keys) > self.sample:
            keep = np.argpartition(keys, self.sample)[:self.sample]
            keys, true, pred = keys[keep], true[keep], pred[keep]
        self._keys, self.true, self.pred = keys, true, pred

    def _merge_moments(self, n: int, mean: float, m2: float) -> None:
        """Add ``n`` targets of that mean and centred sum of squares (before ``self.n`` grows)."""
        total = self.n + n
        d = mean - self.mean_y
        self.m2_y += m2 + d * d * self.n * n / total
        self.mean_y += d * n / total

    def merge(self, other: "RegressionMetrics") -> "RegressionMetrics":
        if other.n:
            self._merge_moments(other.n, other.mean_y, other.m2_y)
        self.n += other.n
        self.abs_err += other.abs_err
        self.sq_err += other.sq_err
        self.loss_sum += other.loss_sum
        keys = np.concatenate([self._keys, other._keys])
        true, pred = np.concatenate([self.true, other.true]), np.concatenate([self.pred, other.pred])
        if len(keys) > self.sample:
            keep = np.argpartition(keys, self.sample)[:self.sample]
            keys, true, pred = keys[keep], true[keep], pred[keep]
        self._keys, self.true, self.pred = keys, true, pred
        return self

    _SUMS = ("n", "abs_err", "sq_err", "mean_y", "m2_y", "loss_sum")

    def state(self) -> dict:
        """Sums, reservoir and its RNG: counting continues exactly after a restart."""
        return {**{k: getattr(self, k) for k in self._SUMS}, "rng": self.rng.bit_generator.state,
                "keys": self._keys, "true": self.true, "pred": self.pred}

    def load_state(self, d: dict) -> None:
        if "sum_y" in d:   # a checkpoint of the earlier sums
            n = d["n"]
            d = {**d, "mean_y": d["sum_y"] / n if n else 0.0,
                 "m2_y": d["sum_y2"] - d["sum_y"] ** 2 / n if n else 0.0}
        for k in self._SUMS:
            setattr(self, k, d[k])
        self.rng.bit_generator.state = d["rng"]
        self._keys, self.true, self.pred = (np.asarray(d[k], np.float64).copy() for k in ("keys", "true", "pred"))

    def result(self) -> dict:
        if not self.n:
            return {"loss": None, "mae": None, "rmse": None, "r2": None, "rows": 0}
        sst = self.m2_y
        return {"loss": self.loss_sum / self.n, "mae": self.abs_err / self.n, "rmse": float(np.sqrt(self.sq_err / self.n)),
                "r2": float(1.0 - self.sq_err / sst) if sst > 0 else None,
                "baseline_rmse": float(np.sqrt(max(sst, 0.0) / self.n)), "rows": self.n}
