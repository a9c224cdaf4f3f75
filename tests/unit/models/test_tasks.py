"""models/tasks.py: each task's loss is its formula (cross entropy, BCE on
the logit margin, one-vs-rest hinge, the weighted multi-task sum, a BCE per
label), and its streaming metrics follow the task."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lancetnic_flow.models.tasks import Task, TaskMetrics, ovr_hinge


# ---------------------------------------------------------------- task losses


def test_bce_loss_is_binary_cross_entropy_on_the_logit_margin_with_class_weights():
    logits = torch.randn(10, 2)
    labels = torch.randint(0, 2, (10,))
    w = torch.tensor([0.5, 2.0])
    t = Task("classify", classes=2, class_loss="bce", class_weights=w)
    expected = F.binary_cross_entropy_with_logits(logits[:, 1] - logits[:, 0], labels.float(), weight=w[labels])
    assert torch.allclose(t.loss({"logits": logits}, labels, None), expected, atol=1e-6)
    ce = Task("classify", classes=2, class_weights=w).loss({"logits": logits}, labels, None)
    assert torch.allclose(ce, F.cross_entropy(logits, labels, weight=w), atol=1e-6)


@pytest.mark.parametrize("value_loss,fn", [("mse", F.mse_loss), ("l1", F.l1_loss), ("smooth_l1", F.smooth_l1_loss)])
def test_multitask_loss_is_the_weighted_sum_of_class_and_value_losses(value_loss, fn):
    out = {"logits": torch.randn(6, 3), "value": torch.randn(6)}
    labels, targets = torch.randint(0, 3, (6,)), torch.randn(6)
    t = Task("multitask", classes=3, value_loss=value_loss, loss_weights=(0.3, 2.0))
    expected = 0.3 * F.cross_entropy(out["logits"], labels) + 2.0 * fn(out["value"], targets)
    assert torch.allclose(t.loss(out, labels, targets), expected, atol=1e-6)
    summed = t.loss(out, labels, targets, reduction="sum")
    assert torch.allclose(summed, 0.3 * F.cross_entropy(out["logits"], labels, reduction="sum")
                          + 2.0 * fn(out["value"], targets, reduction="sum"), atol=1e-5)


def test_ovr_hinge_sums_each_class_margin_shortfall_with_plus_one_for_the_rows_class():
    logits = torch.tensor([[2.0, -0.5, 0.3], [0.0, 0.0, 0.0]])
    labels = torch.tensor([0, 2])
    # row 0: class 0 (t=+1) max(0, 1-2)=0; class 1 (t=-1) max(0, 1-0.5)=0.5; class 2 max(0, 1.3)=1.3
    # row 1: every class short by 1
    assert torch.allclose(ovr_hinge(logits, labels, "none"), torch.tensor([1.8, 3.0]))
    assert torch.isclose(ovr_hinge(logits, labels), torch.tensor(2.4))
    assert torch.isclose(ovr_hinge(logits, labels, "sum"), torch.tensor(4.8))
    assert torch.isclose(Task("classify", classes=3, class_loss="hinge").loss({"logits": logits}, labels, None),
                         torch.tensor(2.4))


def test_class_weights_weigh_the_one_vs_rest_hinge_by_each_rows_class():
    # --class-loss hinge --class-weights balanced trained the unweighted hinge: the weights did nothing.
    logits = torch.tensor([[2.0, -0.5, 0.3], [0.0, 0.0, 0.0]])
    labels = torch.tensor([0, 2])
    w = torch.tensor([0.5, 1.0, 3.0])
    t = Task("classify", classes=3, class_loss="hinge", class_weights=w)
    assert torch.allclose(ovr_hinge(logits, labels, "none", w), torch.tensor([1.8 * 0.5, 3.0 * 3.0]))
    assert torch.isclose(t.loss({"logits": logits}, labels, None), torch.tensor((0.9 + 9.0) / 2))
    assert torch.isclose(t.loss({"logits": logits}, labels, None, reduction="sum"), torch.tensor(9.9))


def test_class_weights_weigh_a_label_set_hinge_on_each_labels_positive_rows():
    # As BCE's pos_weight: a label's missed positives count its weight, its negatives once.
    logits = torch.tensor([[0.0, 2.0, -1.0], [0.5, 0.0, 0.0]])
    hot = torch.tensor([[1, 1, 0], [0, 0, 1]], dtype=torch.float32)
    w = torch.tensor([4.0, 2.0, 3.0])
    plain = Task("multilabel", classes=3, class_loss="hinge")
    weighted = Task("multilabel", classes=3, class_loss="hinge", class_weights=w)
    # row 0: label 0 positive short by 1 (×4), label 1 met, label 2 negative met; row 1: 1.5 + 1 + 1 (×3)
    assert torch.isclose(plain.loss({"logits": logits}, hot, None), torch.tensor((1.0 + 3.5) / 2))
    assert torch.isclose(weighted.loss({"logits": logits}, hot, None), torch.tensor((4.0 + 1.5 + 1.0 + 3.0) / 2))


def test_a_label_set_loss_is_a_bce_per_label_summed_over_the_rows_labels():
    logits = torch.randn(4, 3)
    hot = torch.tensor([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]], dtype=torch.float32)
    t = Task("multilabel", classes=3)
    want = F.binary_cross_entropy_with_logits(logits, hot, reduction="none").sum(1).mean()
    assert torch.allclose(t.loss({"logits": logits}, hot, None), want, atol=1e-6)
    assert t.classifies and t.multilabel and not t.regresses


def test_task_kinds_say_which_heads_they_need():
    assert [(Task(k).classifies, Task(k).regresses) for k in ("classify", "regress", "multitask")] == \
        [(True, False), (False, True), (True, True)]


def test_task_metrics_follow_the_task_and_merge_like_one_pass():
    t = Task("multitask", classes=2, target=(10.0, 2.0))
    out = {"logits": torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 0.0]]), "value": torch.tensor([0.0, 1.0, -1.0])}
    labels, targets = np.array([0, 1, 1]), np.array([0.0, 1.0, 0.0], np.float32)
    whole = t.new_metrics()
    whole.update(out, labels, targets, 1.5)
    r = whole.result()
    assert whole.rows == 3 and r["accuracy"] == pytest.approx(2 / 3) and r["loss"] == pytest.approx(0.5)
    assert r["mae"] == pytest.approx(2.0 / 3)   # in target units: |(-1 - 0)| × std 2, over 3 rows
    a, b = t.new_metrics(), t.new_metrics()
    a.update({k: v[:2] for k, v in out.items()}, labels[:2], targets[:2], 1.0)
    b.update({k: v[2:] for k, v in out.items()}, labels[2:], targets[2:], 0.5)
    merged = a.merge(b).result()
    assert merged["accuracy"] == r["accuracy"] and merged["rmse"] == pytest.approx(r["rmse"])
    fresh = t.new_metrics()
    fresh.load_state(whole.state())
    assert fresh.result()["confusion_cells"] == r["confusion_cells"]


def test_multilabel_metrics_predict_a_label_at_logit_zero_or_more():
    t = Task("multilabel", classes=2)
    m = t.new_metrics()
    m.update({"logits": torch.tensor([[0.0, -0.1], [1.0, 2.0]])}, np.array([[1, 0], [1, 0]]), None, 0.4)
    r = m.result()
    assert r["subset_accuracy"] == 0.5 and r["per_label"]["support"] == [2, 0]


def test_a_label_is_taken_where_its_logit_reaches_its_thresholds_logit_0_taking_all_and_1_none():
    from lancetnic_flow.models.tasks import label_cuts, labels_taken

    logits = np.array([[-80.0, 0.0, 80.0], [0.0, -1e-30, 1e-30]], np.float32)
    assert labels_taken(logits, [0.0, 0.0, 0.0]).all() and not labels_taken(logits, [1.0, 1.0, 1.0]).any()
    assert labels_taken(logits, [0.5, 0.5, 0.5]).tolist() == [[False, True, True], [True, False, True]]
    assert labels_taken(logits, None).tolist() == labels_taken(logits, [0.5] * 3).tolist()
    assert label_cuts([0.3]).dtype == np.float32 and label_cuts(None) is None
