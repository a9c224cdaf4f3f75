"""models/calibrate.py: after training, on the validation rows, the probability
scale of a margin model's scores (softmax, or a sigmoid per label) and a
multilabel run's threshold per label, drawn towards the pooled one by how few
positive rows a label has."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from lancetnic_flow.features.rows import RowBlock
from lancetnic_flow.models import create_model
from lancetnic_flow.models.calibrate import (SHRINK, THRESHOLD_RANGE, Prior, Scores, best_cut, calibrate, fit_scale,
                                             label_thresholds)


def f1(proba: np.ndarray, truth: np.ndarray, cut: float) -> float:
    pred = proba >= cut
    tp = int((pred & (truth == 1)).sum())
    return 2 * tp / (pred.sum() + truth.sum())


def test_best_cut_is_the_threshold_of_the_highest_f1_midway_between_the_probabilities_it_separates():
    proba = np.array([0.9, 0.8, 0.7, 0.4, 0.3, 0.1])
    truth = np.array([1, 1, 0, 1, 0, 0])
    cut, best = best_cut(proba, truth)
    assert cut == pytest.approx(0.35) and best == pytest.approx(f1(proba, truth, cut))
    for other in np.linspace(0.0, 1.0, 101):       # no threshold does better
        assert f1(proba, truth, other) <= best + 1e-12


def test_best_cut_never_splits_tied_probabilities_and_keeps_inside_its_range():
    proba = np.array([0.6, 0.6, 0.6, 0.2])
    truth = np.array([1, 0, 0, 1])
    cut, _ = best_cut(proba, truth)
    assert not 0.2 < cut < 0.6 or cut == pytest.approx(0.4)   # all three 0.6s are taken together, or none
    assert best_cut(np.array([0.2, 0.1]), np.array([0, 0])) == (THRESHOLD_RANGE[1], 0.0)   # no positive
    assert best_cut(np.array([0.999, 0.998]), np.array([1, 1]))[0] >= THRESHOLD_RANGE[0]


def test_label_thresholds_draw_a_label_with_few_positives_towards_the_pooled_threshold():
    rng = np.random.default_rng(0)
    rows = 400
    hot = np.zeros((rows, 3), np.uint8)
    hot[:200, 0] = 1                     # many positives
    hot[[5, 50, 300], 1] = 1             # three
    proba = np.clip(rng.normal(0.3, 0.15, (rows, 3)) + 0.4 * hot, 0.001, 0.999)
    cuts, pooled = label_thresholds(proba, hot)
    assert pooled == pytest.approx(best_cut(proba.ravel(), hot.ravel())[0])
    assert cuts[2] == pytest.approx(pooled)          # never positive: the pooled threshold

    def logit(p):
        return np.log(p / (1 - p))

    for k, n in ((0, 200), (1, 3)):
        own = best_cut(proba[:, k], hot[:, k])[0]
        w = n / (n + SHRINK)
        assert logit(cuts[k]) == pytest.approx(w * logit(own) + (1 - w) * logit(pooled))
    # the many-positive label keeps nearly its own threshold; the 3-positive one moves a quarter of the way
    assert abs(cuts[0] - best_cut(proba[:, 0], hot[:, 0])[0]) < 0.01


def test_a_continued_runs_label_without_positives_keeps_its_old_threshold_and_others_draw_towards_theirs():
    """A continued run's label with no validation positive took the pooled threshold, not the one
    its old run had chosen for it; a label the old run lacks (NaN) is drawn towards the pooled one."""
    rng = np.random.default_rng(0)
    hot = np.zeros((400, 4), np.uint8)
    hot[:200, 0] = 1
    hot[[5, 50, 300], 1] = 1
    hot[:100, 3] = 1
    proba = np.clip(rng.normal(0.3, 0.15, (400, 4)) + 0.4 * hot, 0.001, 0.999)
    prior = np.array([0.8, 0.9, 0.15, np.nan])
    cuts, pooled = label_thresholds(proba, hot, prior)
    assert cuts[2] == pytest.approx(0.15)                      # no positive: the old run's, not the pooled one
    logit = lambda p: np.log(p / (1 - p))  # noqa: E731
    own = best_cut(proba[:, 1], hot[:, 1])[0]
    assert logit(cuts[1]) == pytest.approx(0.75 * logit(own) + 0.25 * logit(0.9))   # 3 positives: a quarter old
    assert cuts[3] == pytest.approx(label_thresholds(proba, hot)[0][3])              # an added label: as fresh


def test_a_prior_threshold_keeps_the_margin_it_cut_at_when_the_scale_is_fitted_again():
    prior = Prior(np.array([0.5, 0.88, 0.2]), scale=2.0)
    at = prior.at_scale(4.0, 5)
    z = np.log(at[:3] / (1 - at[:3]))
    assert z / 4.0 == pytest.approx(np.log(np.array([0.5, 0.88, 0.2]) / np.array([0.5, 0.12, 0.8])) / 2.0)
    assert np.isnan(at[3:]).all()                              # the labels added have none
    assert prior.at_scale(2.0, 3) == pytest.approx([0.5, 0.88, 0.2])


def test_calibrating_on_no_labelled_row_leaves_the_scale_as_it_was():
    """A continued run whose validation rows hold no label its model has reset its old run's
    scale to 1 (probabilities of a LinearSVM no longer calibrated) while keeping its thresholds."""
    model, _ = create_model("LinearSVM", dim=20, classes=3, regress=False, hidden=64, layers=0, dropout=0.0,
                            embed=8, numeric=0)
    model.logit_scale.fill_(7.5)
    none = RowBlock(np.zeros(3, np.int32), np.arange(4, dtype=np.int64), np.ones(3, np.float32),
                    np.full(3, -1, np.int32))
    assert calibrate(model, [none], scale=True).thresholds is None
    assert float(model.logit_scale) == pytest.approx(7.5)


def test_fit_scale_minimises_the_sigmoid_loss_for_label_sets_and_the_softmax_loss_for_classes():
    rng = np.random.default_rng(1)
    s = rng.normal(0, 1, (500, 4)).astype(np.float32)
    hot = (rng.random((500, 4)) < 1 / (1 + np.exp(-3 * s))).astype(np.uint8)   # the labels follow 3 × the scores
    scale = fit_scale(Scores(s, hot))
    bce = torch.nn.functional.binary_cross_entropy_with_logits

    def loss(c):
        return float(bce(torch.from_numpy(s).double() * c, torch.from_numpy(hot).double()))

    assert 2.0 < scale < 4.5 and all(loss(scale) <= loss(c) + 1e-6 for c in (0.5, 1, 2, 4, 8))
    ids = (s * 3 + rng.gumbel(size=s.shape)).argmax(1)
    assert 1.5 < fit_scale(Scores(s, ids)) < 5.0


def test_calibrate_sets_a_margin_models_scale_and_gives_label_sets_their_thresholds():
    model, _ = create_model("LinearSVM", dim=20, classes=3, regress=False, hidden=64, layers=0, dropout=0.0,
                            embed=8, numeric=0)
    with torch.no_grad():
        model.input.weight.copy_(torch.randn(20, 3, generator=torch.Generator().manual_seed(0)))
    rng = np.random.default_rng(2)
    indices = rng.integers(0, 20, 600).astype(np.int32)
    offsets = np.arange(0, 601, 3, dtype=np.int64)
    values = np.ones(600, np.float32)
    scores = model.input.weight.detach().numpy()[indices].reshape(200, 3, 3).sum(1)
    hot = (scores + rng.normal(0, 0.5, scores.shape) > 0.5).astype(np.uint8)
    hot[:10] = 0                                           # empty sets: every label's negatives, read as such
    block = RowBlock(indices, offsets, values, hot)
    out = calibrate(model, [block], scale=True)
    assert out.rows == 200 and out.scale != 1.0 and float(model.logit_scale) == pytest.approx(out.scale)
    assert out.thresholds.shape == (3,) and ((out.thresholds > 0) & (out.thresholds < 1)).all()
    # its loss: each label's sigmoid at the fitted scale, on the rows read (scores times the scale now in the model)
    read = np.ones(200, bool)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    at_scale = torch.from_numpy(scores[read]).double() * out.scale
    per_row = lambda z: float(bce(z, torch.from_numpy(hot[read]).double(), reduction="none").sum(1).mean())  # noqa: E731
    assert out.loss == pytest.approx(per_row(at_scale), rel=1e-5)   # summed over labels, as val_loss is
    assert out.loss < per_row(torch.from_numpy(scores[read]).double())
    single = RowBlock(indices, offsets, values, scores.argmax(1).astype(np.int32))
    assert calibrate(model, [single], scale=True).thresholds is None        # one label a row: a scale only


def test_calibrating_label_sets_whose_scores_overflow_exp_says_nothing_to_the_user_and_keeps_its_thresholds():
    """A label set's scores far below zero (a confident margin model) overflowed exp in the
    sigmoid: a RuntimeWarning printed in the middle of a run's output, for a probability of 0."""
    import warnings

    model, _ = create_model("LinearSVM", dim=20, classes=3, regress=False, hidden=64, layers=0, dropout=0.0,
                            embed=8, numeric=0)
    with torch.no_grad():
        model.input.weight.copy_(torch.randn(20, 3, generator=torch.Generator().manual_seed(0)) * 1000)
    rng = np.random.default_rng(2)
    indices = rng.integers(0, 20, 600).astype(np.int32)
    scores = model.input.weight.detach().numpy()[indices].reshape(200, 3, 3).sum(1)
    hot = (scores > 0).astype(np.uint8)
    block = RowBlock(indices, np.arange(0, 601, 3, dtype=np.int64), np.ones(600, np.float32), hot)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = calibrate(model, [block], scale=False)
    assert out.thresholds.shape == (3,) and ((out.thresholds > 0) & (out.thresholds < 1)).all()
    assert out.at_thresholds["micro_f1"] == pytest.approx(1.0)   # the labels are the scores' signs


@pytest.mark.parametrize("label_sets", [False, True])
def test_the_loss_in_numpy_is_torchs_cross_entropy_a_row_in_pieces_and_with_scores_that_would_overflow(label_sets,
                                                                                                     monkeypatch):
    from lancetnic_flow.models import calibrate as cal

    rng = np.random.default_rng(4)
    s = (rng.normal(0, 1, (700, 5)) * np.array([1, 1, 1, 1, 400])).astype(np.float32)   # e^(400 × 6) overflows
    y = (rng.random((700, 5)) < 0.4).astype(np.uint8) if label_sets else rng.integers(0, 5, 700)
    f = torch.nn.functional
    z, t = torch.from_numpy(s).double() * 3.0, torch.from_numpy(y)
    # a label set's loss sums over its labels, per row, as the run's validation loss does (a mean over
    # rows × labels read 5 times better here than the loss shown beside it)
    want = float(f.binary_cross_entropy_with_logits(z, t.double(), reduction="none").sum(1).mean() if label_sets
                 else f.cross_entropy(z, t.long()))
    monkeypatch.setattr(cal, "PIECE_CELLS", 5 * 64)            # 64 rows a piece: eleven pieces, the last short
    got = cal._nll(*cal._arrays(Scores(s, y)), label_sets, float(np.log(3.0)))
    assert np.isfinite(got) and got == pytest.approx(want, rel=1e-12)


def test_a_scale_at_the_top_of_its_range_is_flagged_and_an_inner_one_is_not():
    from lancetnic_flow.models.calibrate import SCALE_RANGE, Calibration

    rng = np.random.default_rng(6)
    ids = rng.integers(0, 3, 300)
    learned = np.where(np.eye(3, dtype=bool)[ids], 2.0, -2.0).astype(np.float32)   # every row right, wide margins
    scale = fit_scale(Scores(learned, ids))
    assert scale > SCALE_RANGE[1] * 0.99 and Calibration(scale=scale, loss=0.0).at_limit
    noisy = (learned + rng.normal(0, 2.0, learned.shape)).astype(np.float32)
    assert not Calibration(scale=fit_scale(Scores(noisy, ids)), loss=0.5).at_limit
    assert not Calibration().at_limit                          # no scale fitted: nothing to say


def test_label_sets_validation_scores_at_the_saved_thresholds_are_what_deciding_at_them_gives():
    # the run's figures were all at 0.5 while the saved model decides at its thresholds: a val
    # micro-F1 of 0.50 for a model that `evaluate` scores 0.77 on the same rows
    from sklearn.metrics import accuracy_score, f1_score

    from lancetnic_flow.models.calibrate import count_at_thresholds

    rng = np.random.default_rng(5)
    hot = (rng.random((300, 4)) < [0.5, 0.2, 0.05, 0.3]).astype(np.uint8)
    proba = (hot * 0.2 + rng.random((300, 4)) * 0.25).astype(np.float32)   # every one below 0.5
    logits = np.log(proba / (1 - proba)).astype(np.float32)
    cuts = np.array([0.3, 0.25, 0.35, 0.3])
    got = count_at_thresholds(None, Scores(logits, hot), 1.0, cuts, {}, [])
    pred = (proba >= cuts.astype(np.float32)).astype(int)
    assert got["rows"] == 300
    assert got["micro_f1"] == pytest.approx(f1_score(hot, pred, average="micro"), abs=1e-6)
    assert got["subset_accuracy"] == pytest.approx(accuracy_score(hot, pred), abs=1e-6)
    assert got["micro_f1"] > count_at_thresholds(None, Scores(logits, hot), 1.0, np.full(4, 0.5), {}, [])["micro_f1"] + 0.1


def label_set_blocks(model, rng, blocks: int, rows: int) -> list[RowBlock]:
    """``blocks`` blocks of ``rows`` label-set rows (3 labels, three of 20 terms a row) that
    ``model`` scores roughly right."""
    weight = model.input.weight.detach().numpy()
    out = []
    for _ in range(blocks):
        indices = rng.integers(0, 20, rows * 3).astype(np.int32)
        scores = weight[indices].reshape(rows, 3, 3).sum(1)
        hot = (scores + rng.normal(0, 0.7, scores.shape) > 0.3).astype(np.uint8)
        hot[hot.sum(1) == 0, 0] = 1   # a reader skips a row without a label
        out.append(RowBlock(indices, np.arange(0, rows * 3 + 1, 3, dtype=np.int64), np.ones(rows * 3, np.float32),
                            hot))
    return out


# the cap at MIN_ROWS, or at MAX_CELLS' rows
@pytest.mark.parametrize("min_rows, max_cells", [(300, 3), (100, 1050)])
def test_the_figures_at_the_thresholds_count_every_validation_row_past_the_rows_they_were_chosen_on(min_rows, max_cells,
                                                                                                   monkeypatch):
    # they were counted on the first 20,000 rows (or MAX_CELLS scores) only, and a block cut there named
    # its new labels in the macro average although their rows were never counted
    from sklearn.metrics import accuracy_score, f1_score

    from lancetnic_flow.models import calibrate as cal
    from lancetnic_flow.models.inputs import outputs_of
    from lancetnic_flow.models.tasks import label_cuts

    monkeypatch.setattr(cal, "MIN_ROWS", min_rows)
    monkeypatch.setattr(cal, "MAX_CELLS", max_cells)
    model, _ = create_model("LinearSVM", dim=20, classes=3, regress=False, hidden=64, layers=0, dropout=0.0,
                            embed=8, numeric=0)
    with torch.no_grad():
        model.input.weight.copy_(torch.randn(20, 3, generator=torch.Generator().manual_seed(0)))
    blocks = label_set_blocks(model, np.random.default_rng(7), 5, 200)
    per_row = np.zeros(200, np.int32)
    per_row[150:] = 1   # the second block's last rows (past the cut where the cap is 300 rows): one new label each
    blocks[1].set_missed(per_row, {"new": 50})
    out = calibrate(model, iter(blocks), scale=True, again=lambda: iter(blocks))
    assert out.rows == max(min_rows, max_cells // 3) < 400   # chosen on a sample of the rows
    assert out.at_thresholds["rows"] == 1000            # counted on all, in a second read
    # what evaluate decides with the saved model: its scaled logits at the thresholds model.json keeps
    hot = np.concatenate([b.labels for b in blocks])
    logits = np.concatenate([outputs_of(model, b, "cpu")["logits"].numpy() for b in blocks])
    pred = (logits >= label_cuts([round(float(t), 6) for t in out.thresholds])).astype(np.uint8)
    new = np.concatenate([np.zeros(200), per_row, np.zeros(600)]).astype(np.uint8)[:, None]
    t, p = np.hstack([hot, new]), np.hstack([pred, np.zeros_like(new)])
    occurring = [k for k in range(4) if t[:, k].any() or p[:, k].any()]
    assert out.at_thresholds["micro_f1"] == pytest.approx(f1_score(t, p, average="micro"), abs=1e-6)
    assert out.at_thresholds["macro_f1"] == pytest.approx(f1_score(t, p, average="macro", labels=occurring),
                                                          abs=1e-6)
    assert out.at_thresholds["subset_accuracy"] == pytest.approx(accuracy_score(t, p), abs=1e-6)


def test_calibrate_scores_label_sets_at_their_thresholds_and_classes_not():
    model, _ = create_model("LinearSVM", dim=20, classes=3, regress=False, hidden=64, layers=0, dropout=0.0,
                            embed=8, numeric=0)
    rng = np.random.default_rng(2)
    indices = rng.integers(0, 20, 600).astype(np.int32)
    offsets = np.arange(0, 601, 3, dtype=np.int64)
    hot = (rng.random((200, 3)) < 0.4).astype(np.uint8)
    out = calibrate(model, [RowBlock(indices, offsets, np.ones(600, np.float32), hot)], scale=True)
    assert set(out.at_thresholds) == {"micro_f1", "macro_f1", "subset_accuracy", "rows"}
    single = RowBlock(indices, offsets, np.ones(600, np.float32), hot.argmax(1).astype(np.int32))
    assert calibrate(model, [single], scale=True).at_thresholds is None


def test_the_thresholds_are_chosen_on_a_uniform_sample_of_every_block_not_on_the_first_rows(monkeypatch):
    # a validation set in the order of its files, each block of one label: the first 150 rows were
    # all the thresholds saw (label 0's), and the others' thresholds were the pooled one
    from lancetnic_flow.models import calibrate as cal

    monkeypatch.setattr(cal, "MIN_ROWS", 150)
    monkeypatch.setattr(cal, "MAX_CELLS", 3)
    model, _ = create_model("LinearSVM", dim=20, classes=3, regress=False, hidden=64, layers=0, dropout=0.0,
                            embed=8, numeric=0)
    blocks = []
    for k in range(3):
        hot = np.zeros((300, 3), np.uint8)
        hot[:, k] = 1
        blocks.append(RowBlock(np.arange(300, dtype=np.int32) % 20, np.arange(301, dtype=np.int64),
                               np.ones(300, np.float32), hot))
    val, whole = cal.read_scores(model, iter(blocks))
    assert (val.labels.sum(0) >= 30).all()   # about 50 rows of each block's label
    assert len(val.scores) == 150 and whole is False
    again, _ = cal.read_scores(model, iter(blocks))
    assert np.array_equal(again.scores, val.scores)   # the same sample each time: the run is reproducible
    every, whole = cal.read_scores(model, iter([blocks[0].slice(0, 100), blocks[1].slice(0, 50)]))
    assert whole and len(every.scores) == 150   # as many rows as the sample holds: every one, in order
    assert every.labels[:100, 0].all() and every.labels[100:, 1].all()


def test_one_label_and_empty_sets_fit_a_threshold_that_tells_them_apart_not_one_taking_every_row():
    """The scale and thresholds were fitted on the rows with a label only: with one label,
    every row fitted on was a positive, the scale fell to its floor and the threshold took
    every row (micro-F1 0.49 at the saved thresholds, 0.74 at margin 0). Empty sets are
    the label's negatives, fitted on as training reads them."""
    model, _ = create_model("LinearSVM", dim=2, classes=1, regress=False, hidden=64, layers=0, dropout=0.0,
                            embed=8, numeric=0)
    with torch.no_grad():
        model.input.weight.copy_(torch.tensor([[2.0], [-2.0]]))
    rng = np.random.default_rng(0)
    positive = rng.random(400) < 0.3
    word = np.where(rng.random(400) < 0.9, ~positive, positive).astype(np.int32)   # feature 0 mostly on positives
    block = RowBlock(word, np.arange(401, dtype=np.int64), np.ones(400, np.float32),
                     positive[:, None].astype(np.uint8))
    out = calibrate(model, [block], scale=True)
    assert out.rows == 400 and out.scale > 0.5 and 0.1 < out.thresholds[0] < 0.9
    assert out.at_thresholds["micro_f1"] > 0.8 and out.at_thresholds["subset_accuracy"] > 0.85
