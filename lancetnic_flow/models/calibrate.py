"""After training, on the validation rows: what turns a model's scores into answers.

* **The probability scale** of a margin model (LinearSVM): its scores rank
  the classes but are not probabilities. One factor, fitted by temperature
  scaling (the negative log-likelihood, convex in the factor), makes them
  so: a softmax over the classes for one label a row, a sigmoid per label
  for label sets. Every argmax, so every accuracy, is unchanged.
* **A threshold per label** (``--task multilabel``): the probability from
  which each label is predicted, chosen where that label's F1 on the
  validation rows is highest. A fixed 0.5 suits neither a rare label (its
  probabilities rarely reach it: high precision, low recall) nor a margin
  model's scale. A few validation rows choose a threshold badly, so each
  label's is drawn towards the pooled one (the threshold that maximises the
  F1 of every label's decisions together, micro-F1's), in logits, as
  ``n / (n + 1)`` of its own and ``1 / (n + 1)`` of the pooled one for a
  label with ``n`` positive rows: a label never seen in them takes the
  pooled threshold. Chosen on a development split of a real multi-label
  corpus (docs/benchmarks.md, "Multi-label"): it beat both each label's
  own threshold and the pooled one alone on the sum of micro- and macro-F1.
  A continued run (``--init-from``, ``partial_fit``) draws each of its old
  labels towards that label's old threshold instead (:class:`Prior`): its
  new rows may hold few or no positives of a label the old run chose a
  threshold for on its own, and the pooled one would replace it.

Both are fitted on a uniform sample of the validation rows, every block
drawn from alike, of :data:`MAX_CELLS` scores (rows × labels), 20,000 rows
at least: memory is bounded by that, not by the rows (``calibration.rows``
says how many; ``calibration.val_loss`` is theirs). Not the first rows: a
validation set in the order of its files (a month after another, a source
after another, rows sorted by label) would choose the thresholds on one part
of it. A label set's figures at the saved thresholds (``val_at_thresholds``)
count every validation row, as ``evaluate`` of the same rows does: from the
sample when it holds every row, else in a second read of the rows, counted
per label as they come.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ..features.rows import RowBlock
from .inputs import outputs_of
from .linear_arrays import is_arrays, sigmoid
from .tasks import as_array

# Scores kept to calibrate on (rows × labels, float32: 40 MiB; the scale is fitted
# in float64 a piece at a time, PIECE_CELLS); 20,000 rows at least.
MAX_CELLS = 10_000_000
MIN_ROWS = 20_000
# The loss is summed over this many scores at a time (float64 temporaries of 8 MiB each).
PIECE_CELLS = 1 << 20
# Rows scored at a time where every validation row is read on past the held ones.
PIECE_ROWS = 2048
# A label's own threshold weighs n / (n + SHRINK) against the pooled one (n: its positive rows).
SHRINK = 1.0
# The range the scale is searched in. A scale at its top means no finite one fits better: every
# validation row is scored right by a wide margin, as rows the model has learned are.
SCALE_RANGE = (0.05, 500.0)
# The thresholds stay inside (0, 1): a label predicted always or never is a decision no data made.
THRESHOLD_RANGE = (0.01, 0.99)


@dataclass
class Scores:
    """Validation rows' scores (rows × classes, float32) and answers: class ids, or a
    multi-hot matrix with, per row, how many labels of its set training never had
    (``missed``); a row of an empty set is a negative of every label."""

    scores: np.ndarray
    labels: np.ndarray
    missed: np.ndarray | None = None

    @property
    def label_sets(self) -> bool:
        return self.labels.ndim == 2


class _Sample:
    """A uniform sample of at most ``cap`` of the rows read, the same chance for each row
    wherever it is: each row draws a random key and the rows of the smallest keys are kept.
    Rows whose key cannot make the sample any more are dropped as they come, and the sample
    is cut back once it holds a quarter more than ``cap``: memory stays near the sample's."""

    def __init__(self, seed: int = 0):
        self.rng, self.parts, self.held, self.rows, self.cap = np.random.default_rng(seed), [], 0, 0, None
        self.bar = 1.0   # the largest key kept once the sample is full: a row of a larger key is not taken

    def add(self, n: int, cap: int, *columns: np.ndarray) -> None:
        """Offer ``n`` rows (``columns``, each n long) to a sample of ``cap`` rows."""
        self.cap, self.rows = cap, self.rows + n
        keys = self.rng.random(n)
        taken = keys < self.bar
        if taken.any():
            self.parts.append((keys[taken], *(c[taken] for c in columns)))
            self.held += int(taken.sum())
        if self.held > cap + cap // 4:
            self._cut(cap)

    def _cut(self, cap: int) -> None:
        keys, *columns = (np.concatenate(c) for c in zip(*self.parts))
        if len(keys) > cap:
            kept = np.sort(np.argpartition(keys, cap - 1)[:cap])   # the order read, for reproducible sums
            keys, columns = keys[kept], [c[kept] for c in columns]
            self.bar = float(keys.max())
        self.parts, self.held = [(keys, *columns)], len(keys)

    @property
    def complete(self) -> bool:
        """Whether every row offered is in the sample."""
        return self.held == self.rows

    def columns(self) -> list[np.ndarray] | None:
        """The sample's columns, as offered; None when no row was."""
        if not self.parts:
            return None
        self._cut(self.cap)
        return list(self.parts[0][1:])


def read_scores(model: Any, blocks: Iterable[RowBlock]) -> tuple[Scores | None, bool]:
    """The model's logits on a uniform sample of the validation rows, :data:`MAX_CELLS`
    scores (:data:`MIN_ROWS` rows at least), every block read; and whether that sample
    is every row. Scores holds the labelled rows of the sample; for label sets every row,
    an empty set's a negative of each label as training reads it (fitted on only the rows
    with a label, a label every such row had got a threshold that took every row). None
    when no row has a label. The model is left in eval mode."""
    sample, cap, label_sets = _Sample(), None, False
    model.eval()
    for b in blocks:
        if not len(b):
            continue
        keep = b.labels.any(1) if b.labels.ndim == 2 else b.labels >= 0
        if b.missed is not None:   # a set of labels training never had alone is still a row to score
            keep |= b.missed > 0
        out = as_array(outputs_of(model, b, "cpu")["logits"]).astype(np.float32, copy=False)
        cap = cap or max(MIN_ROWS, MAX_CELLS // max(1, out.shape[1]))
        label_sets = b.labels.ndim == 2
        if label_sets:   # a block that names no label training never had: none a row
            missed = b.missed if b.missed is not None else np.zeros(len(b), np.int32)
            sample.add(len(b), cap, out, b.labels, missed, keep)
        else:
            sample.add(int(keep.sum()), cap, out[keep], b.labels[keep])
    columns = sample.columns()
    if columns is None:
        return None, True
    if not label_sets:
        return Scores(*columns), sample.complete
    out, labels, missed, keep = columns
    if not keep.any():
        return None, sample.complete
    return Scores(out, labels, missed), sample.complete


def _arrays(val: Scores) -> tuple[np.ndarray, np.ndarray]:
    """The scores and answers as the loss takes them (class ids, or a multi-hot matrix as float64)."""
    return val.scores, val.labels.astype(np.float64 if val.label_sets else np.int64)


def _nll(s: np.ndarray, y: np.ndarray, label_sets: bool, log_scale: float) -> float:
    """The cross-entropy of the scores at ``exp(log_scale)`` a row: of the softmax
    over its classes, or (label sets) of each label's sigmoid summed over its
    labels, as a multi-label run's loss is; averaged over rows. In pieces of
    :data:`PIECE_CELLS` scores: the temporaries stay small beside the scores."""
    factor, total = np.exp(log_scale), 0.0
    step = max(1, PIECE_CELLS // max(1, s.shape[1]))
    for i in range(0, len(s), step):
        z, t = s[i:i + step].astype(np.float64) * factor, y[i:i + step]
        if label_sets:
            # max(z, 0) - t·z + log(1 + e^-|z|): the binary cross entropy of a logit, stable for any z
            total += float((np.maximum(z, 0.0) - t * z + np.logaddexp(0.0, -np.abs(z))).sum())
        else:
            # log Σ e^z - z_answer, shifted by the row's largest score so no e^z overflows
            picked, top = z[np.arange(len(z)), t], z.max(axis=1)
            z -= top[:, None]
            total += float((top + np.log(np.exp(z).sum(axis=1)) - picked).sum())
    # A label set's loss sums over its labels: a mean over rows × labels read as many times better
    # than the validation loss beside it.
    return total / len(s)


def fit_scale(val: Scores) -> float:
    """The factor whose softmax (or sigmoid per label, for label sets) of the
    scores best predicts the answers: golden-section search on the log of it,
    the loss being convex in the factor."""
    s, y = _arrays(val)
    lo, hi = np.log(SCALE_RANGE[0]), np.log(SCALE_RANGE[1])
    g = (np.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = _nll(s, y, val.label_sets, a), _nll(s, y, val.label_sets, b)
    for _ in range(40):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = _nll(s, y, val.label_sets, a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = _nll(s, y, val.label_sets, b)
    return float(np.exp((lo + hi) / 2))


def scaled_loss(val: Scores, scale: float) -> float:
    """The loss of the probabilities the scores give at ``scale``: the cross-entropy
    of the softmax a row (for label sets: of each label's sigmoid, summed over
    the row's labels), averaged over rows."""
    return _nll(*_arrays(val), val.label_sets, float(np.log(scale)))


def best_cut(proba: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """(threshold, F1) of predicting ``proba >= threshold`` against ``truth``
    (flat arrays), at the threshold of the highest F1: midway between the
    lowest probability taken and the highest one left. With no positive, or
    no cut that finds one, F1 is 0 and the threshold the top of the range."""
    positives = int(truth.sum())
    if positives == 0 or not len(proba):
        return THRESHOLD_RANGE[1], 0.0
    order = np.argsort(-proba, kind="stable")
    p, t = proba[order], truth[order].astype(np.int64)
    tp = np.cumsum(t)
    taken = np.arange(1, len(p) + 1)
    # Only cuts between different probabilities can be made: the last of each run of ties.
    ends = np.flatnonzero(np.append(p[1:] != p[:-1], True))
    f1 = 2.0 * tp[ends] / (taken[ends] + positives)
    i = ends[int(np.argmax(f1))]
    below = p[i + 1] if i + 1 < len(p) else 0.0
    cut = float(np.clip((p[i] + below) / 2, *THRESHOLD_RANGE))
    return cut, float(f1.max())


def _logit(p: np.ndarray | float) -> np.ndarray:
    return np.log(p) - np.log1p(-np.asarray(p))


def label_thresholds(proba: np.ndarray, hot: np.ndarray, prior: np.ndarray | None = None
                     ) -> tuple[np.ndarray, float]:
    """Per label, the probability threshold of its best F1 on these rows
    (rows × labels), drawn towards the pooled threshold (every label's
    decisions together) by how few positive rows it has (:data:`SHRINK`), or
    towards ``prior``'s where it has one (not NaN): a continued run's old
    thresholds, which a label with no positive row here keeps.
    Returns the thresholds and the pooled one."""
    pooled, _ = best_cut(proba.ravel(), hot.ravel())
    toward = np.full(proba.shape[1], pooled)
    if prior is not None:
        known = ~np.isnan(prior)
        toward[known] = np.clip(prior[known], *THRESHOLD_RANGE)
    positives = hot.sum(0).astype(np.float64)
    own = np.array([best_cut(proba[:, k], hot[:, k])[0] if positives[k] else toward[k]
                    for k in range(proba.shape[1])])
    w = positives / (positives + SHRINK)
    z = w * _logit(own) + (1 - w) * _logit(toward)
    return sigmoid(z), pooled


@dataclass
class Prior:
    """A continued run's old thresholds (one per old label) and the probability scale
    they were chosen at: a margin model's scale is fitted again, and a threshold
    keeps its meaning as the margin it cuts at (its logit over the scale)."""

    thresholds: np.ndarray
    scale: float = 1.0

    def at_scale(self, scale: float, labels: int) -> np.ndarray:
        """The thresholds at probability scale ``scale``, for ``labels`` labels (NaN for those added)."""
        old = np.clip(np.asarray(self.thresholds, np.float64)[:labels], *THRESHOLD_RANGE)
        cut = sigmoid(_logit(old) * (scale / self.scale))
        return np.concatenate([cut, np.full(labels - len(cut), np.nan)])


@dataclass
class Calibration:
    """What :func:`calibrate` fitted: the scale (1.0 if none was fitted) and the
    loss at it, the per-label thresholds (None for one label a row) and the
    rows they were fitted on (the first :data:`MAX_CELLS` scores' rows)."""

    scale: float = 1.0
    # The validation loss at the fitted scale, on the rows it was fitted on: of the probabilities
    # predict gives (an epoch's val_loss is the scores' at scale 1). None when no scale was fitted.
    loss: float | None = None
    thresholds: np.ndarray | None = None
    pooled_threshold: float | None = None
    rows: int = 0
    # Label sets: every validation row scored at the thresholds (what the saved model decides on
    # them; the thresholds were chosen on the first ``rows`` of them), where each epoch's figures
    # are at 0.5; its own ``rows`` are those counted.
    at_thresholds: dict | None = None

    @property
    def at_limit(self) -> bool:
        """Whether the fitted scale is the top of its range (:data:`SCALE_RANGE`): the
        validation rows look learned, and the probabilities are over-confident."""
        return self.loss is not None and self.scale >= SCALE_RANGE[1] * 0.99


def _set_scale(model: Any, value: float) -> None:
    """Set the model's ``logit_scale`` (a network's buffer, or an array's 0-d value)."""
    if is_arrays(model):
        model.logit_scale.fill(value)
    else:
        model.logit_scale.fill_(value)


def calibrate(model: Any, blocks: Iterable[RowBlock], scale: bool, prior: Prior | None = None,
              again: Callable[[], Iterable[RowBlock]] | None = None) -> Calibration:
    """Fit, on the validation ``blocks``: the model's probability scale
    (``scale``: the model has a ``logit_scale``, which is set) and, for label
    sets, a threshold per label on the probabilities at that scale, each drawn
    towards ``prior``'s for that label where it has one (a continued run's). Both
    are fitted on a uniform sample of :data:`MAX_CELLS` scores (:func:`read_scores`); a
    label set's figures at the thresholds count every row: those of the sample when it
    is every row, else of ``again()``, a second read of the same rows (``blocks``
    read again when it is a list)."""
    before = float(model.logit_scale) if scale else 1.0
    if scale:
        _set_scale(model, 1.0)
    rows = iter(blocks)
    with contextlib.ExitStack() as done:
        done.callback(getattr(rows, "close", lambda: None))   # a generator's close stops its read-ahead thread
        done.callback(model.train)
        seen: dict[str, int] = {}
        val, whole = read_scores(model, _noting(rows, seen))
        if val is None:   # no row to fit on: the scale stays as it was (a continued run's, its old run's)
            if scale:
                _set_scale(model, before)
            return Calibration()
        out = Calibration(rows=len(val.scores))
        if scale:
            out.scale = fit_scale(val)
            out.loss = scaled_loss(val, out.scale)
            _set_scale(model, out.scale)
        if val.label_sets:
            proba = sigmoid(val.scores * np.float32(out.scale)).astype(np.float32, copy=False)
            toward = prior.at_scale(out.scale, proba.shape[1]) if prior is not None else None
            # Rounded as model.json keeps them: the figures are those of the thresholds predict and evaluate use.
            out.thresholds, out.pooled_threshold = label_thresholds(proba, val.labels, toward)
            out.thresholds = np.round(out.thresholds, 6)
            del proba
            out.at_thresholds = count_at_thresholds(model, val, out.scale, out.thresholds, seen, ()) if whole else \
                count_at_thresholds(model, None, out.scale, out.thresholds, seen, _reread(blocks, again), done)
    return out


def _reread(blocks: Iterable[RowBlock], again: Callable[[], Iterable[RowBlock]] | None) -> Iterable[RowBlock]:
    """The validation rows read a second time: ``again()``, or ``blocks`` when a list holds them."""
    if again is not None:
        return again()
    if isinstance(blocks, (list, tuple)):
        return blocks
    raise ValueError("calibrate: a sample of fewer than every row needs again(), a second read of the rows")


def _noting(blocks: Iterator[RowBlock], seen: dict[str, int]) -> Iterator[RowBlock]:
    """``blocks``, each block's labels training never had added to ``seen`` (rows, by name)
    as it is read: a block cut at the cap is named whole, its rest read on."""
    for block in blocks:
        for k, v in block.missed_by_label().items():
            seen[k] = seen.get(k, 0) + v
        yield block


def count_at_thresholds(model: Any, val: Scores | None, scale: float, thresholds: np.ndarray, seen: dict[str, int],
                        rest: Iterable[RowBlock], done: contextlib.ExitStack | None = None) -> dict:
    """micro-F1, macro-F1 and subset accuracy of deciding each label at its threshold,
    and the rows counted: the held rows' scores (``val``, at ``scale``; None: none held),
    then every row of ``rest`` scored by the model, counted per label as they come (memory:
    a piece of rows, never them all), as ``evaluate`` counts the same rows, with each row's
    labels training never had as missed ones (``seen``: their rows by name, complete
    once every row was read). ``done``: closes ``rest`` (a generator's read-ahead) on the way out."""
    from .metrics import MultiLabelMetrics
    from .tasks import TaskMetrics, label_cuts

    m = TaskMetrics(MultiLabelMetrics(len(thresholds)), None, label_cuts(thresholds.tolist()))
    factor = np.float32(scale)
    if val is not None:
        m.update({"logits": val.scores * factor}, val.labels, None, 0.0, val.missed)
    rest = iter(rest)
    if done is not None:
        done.callback(getattr(rest, "close", lambda: None))
    for block in rest:
        for start in range(0, len(block), PIECE_ROWS):
            b = block.slice(start, start + PIECE_ROWS)
            m.update(outputs_of(model, b, "cpu"), b.labels, None, 0.0, b.missed)
    m.cls.update_unseen(seen)
    r = m.result()
    return {**{k: (None if r[k] is None else round(float(r[k]), 6)) for k in ("micro_f1", "macro_f1", "subset_accuracy")},
            "rows": int(r["rows"])}
