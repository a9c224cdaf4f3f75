"""models/metrics.py: streaming classification scores equal scikit-learn's
from the sparse confusion cells, merge and restart exactly; multi-label
micro/macro F1 and subset accuracy; regression MAE, RMSE, R² in the target's
units with a bounded seeded sample."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import (accuracy_score, confusion_matrix, f1_score, mean_absolute_error, precision_score,
                             r2_score, recall_score)

from lancetnic_flow.models import metrics as metrics_module
from lancetnic_flow.models.metrics import (ClassificationMetrics, MultiLabelMetrics, RegressionMetrics, cells_of,
                                           confusion_cells, dense_confusion, with_unseen_rows)

rng = np.random.default_rng(0)
TRUE = rng.integers(0, 5, 400)
PRED = np.where(rng.random(400) < 0.6, TRUE, rng.integers(0, 5, 400))
TRUE[TRUE == 4] = 3        # class 4 is predicted but never true: left out of the macro averages


def classification(batches=4, classes=5) -> ClassificationMetrics:
    m = ClassificationMetrics(classes)
    for t, p in zip(np.array_split(TRUE, batches), np.array_split(PRED, batches)):
        m.update(t, p, loss_sum=float(len(t)))
    return m


def test_classification_scores_equal_scikit_learns():
    r = classification().result()
    assert r["accuracy"] == pytest.approx(accuracy_score(TRUE, PRED))
    for avg in ("macro", "weighted"):   # scikit-learn's labels: class 4, predicted but never true, scores 0
        assert r[f"{avg}_f1"] == pytest.approx(f1_score(TRUE, PRED, average=avg, zero_division=0))
        assert r[f"{avg}_precision"] == pytest.approx(precision_score(TRUE, PRED, average=avg, zero_division=0))
        assert r[f"{avg}_recall"] == pytest.approx(recall_score(TRUE, PRED, average=avg, zero_division=0))
    assert r["confusion"] == confusion_matrix(TRUE, PRED, labels=range(5)).tolist()
    assert r["loss"] == 1.0 and r["rows"] == 400


def _sk(true, pred, **kw) -> dict:
    out = {"accuracy": accuracy_score(true, pred)} if not kw.get("sets") else {}
    for avg in ("macro", "weighted") + (("micro",) if kw.get("sets") else ()):
        for name, fn in (("f1", f1_score), ("precision", precision_score), ("recall", recall_score)):
            out[f"{avg}_{name}"] = fn(true, pred, average=avg, zero_division=0)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_classification_with_labels_the_run_never_saw_scores_as_scikit_learn_on_the_same_predictions(seed):
    """Rows whose label is not one of the run's are wrong, in accuracy, in their
    label's recall and in the precision of what was predicted for them."""
    r = np.random.default_rng(seed)
    k, n = int(r.integers(2, 7)), int(r.integers(5, 300))
    names = [f"c{i}" for i in range(k)]
    new = [f"new{i}" for i in range(int(r.integers(0, 3)))]
    true = r.choice(names + new, n)
    pred = np.where(r.random(n) < 0.5, true, r.choice(names, n))
    pred = np.where(np.isin(pred, names), pred, r.choice(names, n))     # the model predicts its own classes
    m = ClassificationMetrics(k)
    known = np.isin(true, names)
    ids = {c: i for i, c in enumerate(names)}
    m.update(np.array([ids[t] for t in true[known]], np.int64), np.array([ids[p] for p in pred[known]], np.int64), 0.0)
    m.update_unseen({str(c): int((true == c).sum()) for c in new if (true == c).any()},
                    np.array([ids[p] for p in pred[~known]], np.int64))
    got, want = m.result(), _sk(true, pred)
    for key, value in want.items():
        assert got[key] == pytest.approx(value), key
    assert got["rows"] == n and sum(got.get("unseen_labels", {}).values()) == (~known).sum()


@pytest.mark.parametrize("seed", range(8))
def test_the_confusion_matrix_has_a_row_per_label_the_run_never_saw_as_scikit_learns_in_parts_merged_and_restarted(
        seed):
    """evaluate on data with new labels: their rows were left out of the confusion matrix (and its
    chart), which summed to fewer rows than were evaluated, where scikit-learn's has a row per label."""
    import pyarrow as pa

    r = np.random.default_rng(seed)
    k, n = int(r.integers(2, 6)), int(r.integers(20, 300))
    names = [f"c{i}" for i in range(k)]
    new = [f"new{i}" for i in range(int(r.integers(1, 4)))]
    true = r.choice(names + new, n)
    pred = r.choice(names, n)
    ids = {c: i for i, c in enumerate(names)}
    parts = []
    for t, p in zip(np.array_split(true, 3), np.array_split(pred, 3)):
        m = ClassificationMetrics(k)
        known = np.isin(t, names)
        m.update(np.array([ids[x] for x in t[known]], np.int64), np.array([ids[x] for x in p[known]], np.int64), 0.0)
        m.update_unseen({str(c): int((t == c).sum()) for c in new if (t == c).any()},
                        np.array([ids[x] for x in p[~known]], np.int64), pa.array(t[~known].tolist(), pa.string()))
        parts.append(m)
    merged = parts[0].merge(parts[1]).merge(parts[2])
    restarted = ClassificationMetrics(k)
    restarted.load_state(merged.state())
    for m in (merged, restarted):
        got = m.result()
        cells, labels = with_unseen_rows(cells_of(got), names, got)
        assert labels[:k] == names and set(labels[k:]) == set(np.unique(true[~np.isin(true, names)]))
        assert labels[k:] == list(got["unseen_labels"])   # in unseen_labels' order, most rows first
        assert dense_confusion(cells, len(labels)).tolist() == confusion_matrix(true, pred, labels=labels).tolist()
        assert int(cells[:, 2].sum()) == n == got["rows"]
    plain = classification().result()   # no new label: the run's matrix as it was
    cells, labels = with_unseen_rows(cells_of(plain), names, plain)
    assert labels == names and cells.tolist() == plain["confusion_cells"] and "unseen_confusion_cells" not in plain


@pytest.mark.parametrize("seed", range(12))
def test_multilabel_with_labels_the_run_never_saw_scores_as_scikit_learn_on_the_same_predictions(seed):
    from sklearn.preprocessing import MultiLabelBinarizer

    r = np.random.default_rng(seed)
    k, n = int(r.integers(2, 6)), int(r.integers(5, 200))
    names = [f"l{i}" for i in range(k)]
    new = [f"new{i}" for i in range(int(r.integers(0, 3)))]
    true_sets = [set(r.choice(names + new, int(r.integers(1, 4)))) for _ in range(n)]
    pred_sets = [{x for x in names if r.random() < (0.7 if x in t else 0.2)} for t in true_sets]
    m = MultiLabelMetrics(k)
    hot = np.array([[x in t for x in names] for t in true_sets], np.uint8)
    got_pred = np.array([[x in p for x in names] for p in pred_sets], np.uint8)
    lost = np.array([len(t - set(names)) for t in true_sets])   # per row, its labels the run never saw
    m.update(hot[: n // 2], got_pred[: n // 2], 0.0, lost[: n // 2])
    other = MultiLabelMetrics(k)
    other.update(hot[n // 2:], got_pred[n // 2:], 0.0, lost[n // 2:])
    counts = {}
    for t in true_sets:
        for x in t - set(names):
            counts[x] = counts.get(x, 0) + 1
    other.update_unseen(counts)
    got = m.merge(other).result()
    occurring = sorted(set().union(*true_sets, *pred_sets))           # the labels true or predicted somewhere
    mlb = MultiLabelBinarizer(classes=occurring)
    t, p = mlb.fit_transform(true_sets), mlb.transform(pred_sets)
    for key, value in _sk(t, p, sets=True).items():
        assert got[key] == pytest.approx(value), key
    assert got["subset_accuracy"] == pytest.approx(accuracy_score(t, p))


def test_merged_and_restarted_counts_give_the_scores_of_one_pass(monkeypatch):
    monkeypatch.setattr(metrics_module, "_FOLD_AT", 7)   # fold pending codes often
    whole = classification(batches=1).result()
    a, b = ClassificationMetrics(5), ClassificationMetrics(5)
    a.update(TRUE[:123], PRED[:123], 123.0)
    b.update(TRUE[123:], PRED[123:], 277.0)
    assert a.merge(b).result() == whole
    restarted = ClassificationMetrics(5)
    restarted.load_state(classification().state())
    assert restarted.result() == whole
    old = ClassificationMetrics(5)   # a checkpoint from before the sparse cells: the dense matrix
    old.load_state({"confusion": whole["confusion"], "loss_sum": 400.0, "rows": 400})
    assert old.result()["confusion_cells"] == whole["confusion_cells"]


def test_many_classes_keep_only_the_sparse_cells():
    m = ClassificationMetrics(metrics_module.DENSE_CONFUSION_MAX + 1)
    m.update(np.array([0, 50, 50]), np.array([0, 50, 3]), 0.0)
    r = m.result()
    assert r["confusion"] is None and r["confusion_cells"] == [[0, 0, 1], [50, 3, 1], [50, 50, 1]]


def test_confusion_cells_and_the_dense_matrix_convert_both_ways():
    dense = np.array([[3, 0], [1, 2]])
    cells = confusion_cells(dense)
    assert cells == [[0, 0, 3], [1, 0, 1], [1, 1, 2]]
    assert np.array_equal(dense_confusion(cells, 2), dense)
    assert cells_of({"confusion": dense.tolist()}).tolist() == cells
    assert cells_of({"confusion_cells": cells}).tolist() == cells and cells_of({}) is None


def test_multilabel_scores_equal_scikit_learns_micro_macro_and_subset_accuracy():
    true = rng.integers(0, 2, (60, 4))
    true[:, 3] = 0
    pred = np.where(rng.random((60, 4)) < 0.7, true, 1 - true)
    m = MultiLabelMetrics(4)
    m.update(true[:25], pred[:25], 1.0)
    other = MultiLabelMetrics(4)
    other.update(true[25:], pred[25:], 2.0)
    r = m.merge(other).result()
    assert r["micro_f1"] == pytest.approx(f1_score(true, pred, average="micro"))
    # label 3, never true but predicted, is one of scikit-learn's labels: it scores 0 in the mean
    assert r["macro_f1"] == pytest.approx(f1_score(true, pred, average="macro", zero_division=0))
    assert r["weighted_f1"] == pytest.approx(f1_score(true, pred, average="weighted", zero_division=0))
    assert r["subset_accuracy"] == pytest.approx(accuracy_score(true, pred))
    assert r["loss"] == pytest.approx(3.0 / 60)
    back = MultiLabelMetrics(4)
    back.load_state(m.state())
    assert back.result() == r
    assert MultiLabelMetrics(2).result()["micro_f1"] is None


def test_regression_scores_are_in_the_targets_units_and_equal_scikit_learns():
    y = rng.normal(50, 10, 300)
    p = y + rng.normal(0, 3, 300)
    m = RegressionMetrics(mean=50.0, std=10.0, sample=100, seed=1)
    for part in np.array_split(np.arange(300), 3):
        m.update((y[part] - 50) / 10, (p[part] - 50) / 10, 0.0)
    r = m.result()
    assert r["mae"] == pytest.approx(mean_absolute_error(y, p))
    assert r["rmse"] == pytest.approx(np.sqrt(((y - p) ** 2).mean()))
    assert r["r2"] == pytest.approx(r2_score(y, p))
    assert r["baseline_rmse"] == pytest.approx(y.std())
    assert len(m.true) == 100 and set(np.round(m.true, 8)) <= set(np.round(y, 8))   # a bounded sample of the rows
    assert RegressionMetrics().result()["rmse"] is None


def test_r2_of_targets_far_from_zero_equals_scikit_learns_in_parts_and_merged():
    # a sum of y² less (Σy)²/n cancels every digit near 1e9: R² came out None or 0.99 for 0.29
    y = 1e9 + rng.normal(0, 1.2, 900)
    p = y + rng.normal(0, 1.0, 900)
    mean, std = float(y.mean()), float(y.std())
    parts = [RegressionMetrics(mean=mean, std=std) for _ in range(3)]
    for m, part in zip(parts, np.array_split(np.arange(900), 3)):
        for batch in np.array_split(part, 7):
            m.update((y[batch] - mean) / std, (p[batch] - mean) / std)
    merged = parts[0].merge(parts[1]).merge(parts[2])
    r = merged.result()
    assert r["r2"] == pytest.approx(r2_score(y, p), abs=1e-6)
    assert r["baseline_rmse"] == pytest.approx(y.std(), rel=1e-6)
    old = {**merged.state(), "sum_y": float(y.sum()), "sum_y2": float((y * y).sum())}   # an earlier checkpoint
    del old["mean_y"], old["m2_y"]
    back = RegressionMetrics(mean=mean, std=std)
    back.load_state(old)
    assert back.n == 900 and back.result()["mae"] == r["mae"]


def test_a_restarted_regression_metric_keeps_sampling_as_if_never_stopped():
    y = rng.normal(0, 1, 200)
    a = RegressionMetrics(sample=50, seed=3)
    a.update(y[:100], y[:100])
    b = RegressionMetrics(sample=50, seed=3)
    b.load_state(a.state())
    a.update(y[100:], y[100:] + 1)
    b.update(y[100:], y[100:] + 1)
    assert np.array_equal(a.true, b.true) and a.result() == b.result()


def test_a_constant_targets_predictions_are_its_value_and_the_rows_targets_are_read_at_scale_1():
    """Scale 0 (a training target of one value): every prediction is the mean, whatever the
    network's output; the rows' own targets were standardised at scale 1 and are read back so."""
    m = RegressionMetrics(mean=3.0, std=0.0)
    m.update(np.array([0.0, 1.5]), np.array([0.02, -0.4]), 0.0)
    r = m.result()
    assert r["mae"] == pytest.approx(0.75) and r["rmse"] == pytest.approx(np.sqrt(1.5 ** 2 / 2))
    assert sorted(m.pred) == [3.0, 3.0] and sorted(m.true) == [3.0, 4.5]
    m = RegressionMetrics(mean=3.0, std=0.0)
    m.update(np.zeros(3), np.full(3, 0.01), 0.0)
    r = m.result()
    assert r["mae"] == 0.0 and r["r2"] is None and r["baseline_rmse"] == 0.0   # no spread: no R², no NaN


def test_a_row_of_an_empty_label_set_is_an_exact_match_when_none_is_predicted_and_each_label_predicted_a_false_positive():
    # empty sets are training and scoring rows (no label applies): the scores must count them, not skip them
    from lancetnic_flow.models.metrics import MultiLabelMetrics

    m = MultiLabelMetrics(2)
    true = np.array([[1, 0], [0, 0], [0, 0]], np.uint8)
    pred = np.array([[1, 0], [0, 0], [0, 1]], np.uint8)
    m.update(true, pred, 0.0)
    r = m.result()
    assert r["rows"] == 3 and r["subset_accuracy"] == pytest.approx(2 / 3)
    assert m.fp.tolist() == [0, 1] and m.fn.tolist() == [0, 0]
    assert r["micro_f1"] == pytest.approx(2 * 1 / (2 * 1 + 1))
