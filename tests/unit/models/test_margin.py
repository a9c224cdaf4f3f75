"""models/margin.py: LinearSVM's per-example hinge step. One row's step is
the formula (score every class; each class short of its margin moves the
row's weights by lr·t·value and its bias by a hundredth of that); rows go in
order; unlabelled rows are scored only; the twin steps beside the model."""
from __future__ import annotations

import numpy as np
import torch

from lancetnic_flow.models.margin import (BIAS_RATE, add_twin, adopt_twin, has_twin, hinge_pass, hinge_rows,
                                          margin_step, twin_learns)
from lancetnic_flow.models.scalpel import ScalpelNet
from lancetnic_flow.features.rows import RowBlock

INDICES = np.array([0, 2, 1, 2, 3], np.int32)
OFFSETS = np.array([0, 2, 4, 5], np.int64)
VALUES = np.array([0.6, 0.8, 1.0, 0.5, 1.0], np.float32)


def reference_step(weight, bias, r, label, lr):
    """The formula, one row, in plain numpy; ``label``: a class id, or the row's set as 0/1 per label."""
    a, e = OFFSETS[r], OFFSETS[r + 1]
    idx, val = INDICES[a:e], VALUES[a:e]
    s = bias + (weight[idx] * val[:, None]).sum(0)
    loss = 0.0
    for k in range(weight.shape[1]):
        t = (1.0 if label[k] else -1.0) if np.ndim(label) else (1.0 if k == label else -1.0)
        if 1 - t * s[k] > 0:
            loss += 1 - t * s[k]
            weight[idx, k] += lr * t * val
            bias[k] += lr * t * BIAS_RATE
    return s, loss


def test_one_example_step_equals_the_hinge_formula():
    rng = np.random.default_rng(0)
    weight = rng.normal(0, 0.5, (4, 3)).astype(np.float32)
    bias = np.array([0.1, -0.2, 0.0], np.float32)
    w_ref, b_ref = weight.copy(), bias.copy()
    labels = np.array([2, 0, 1], np.int32)
    scores = np.empty((3, 3), np.float32)
    total, used = hinge_pass(INDICES, OFFSETS, VALUES, labels, weight, bias, np.float32(0.5), scores)
    want_loss = 0.0
    for r in range(3):   # rows in order: each row is scored with the weights its predecessors left
        s, loss = reference_step(w_ref, b_ref, r, labels[r], 0.5)
        np.testing.assert_allclose(scores[r], s, rtol=1e-5, atol=1e-6)
        want_loss += loss
    np.testing.assert_allclose(weight, w_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bias, b_ref, rtol=1e-5, atol=1e-6)
    assert used == 3 and abs(total - want_loss) < 1e-4


def test_a_label_set_row_steps_each_label_by_its_own_margin_and_an_empty_set_is_only_scored():
    rng = np.random.default_rng(1)
    weight = rng.normal(0, 0.5, (4, 3)).astype(np.float32)
    bias = np.array([0.1, -0.2, 0.0], np.float32)
    w_ref, b_ref = weight.copy(), bias.copy()
    hot = np.array([[1, 0, 1], [0, 0, 0], [0, 1, 1]], np.uint8)   # two labels, none, two labels
    scores = np.empty((3, 3), np.float32)
    total, used = hinge_pass(INDICES, OFFSETS, VALUES, hot, weight, bias, np.float32(0.5), scores)
    want_loss = 0.0
    for r in (0, 2):
        s, loss = reference_step(w_ref, b_ref, r, hot[r], 0.5)
        np.testing.assert_allclose(scores[r], s, rtol=1e-5, atol=1e-6)
        want_loss += loss
        if r == 0:   # the empty set is scored with row 0's weights and trains nothing
            np.testing.assert_allclose(scores[1], b_ref + (w_ref[INDICES[2:4]] * VALUES[2:4, None]).sum(0),
                                       rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(weight, w_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bias, b_ref, rtol=1e-5, atol=1e-6)
    assert used == 2 and abs(total - want_loss) < 1e-4


def test_a_row_beyond_every_margin_changes_nothing_and_an_unlabelled_row_is_only_scored():
    weight = np.zeros((4, 2), np.float32)
    weight[[0, 2], 0], weight[[0, 2], 1] = 5.0, -5.0   # row 0 is deep on class 0's side
    bias = np.zeros(2, np.float32)
    before = weight.copy()
    total, used = hinge_pass(INDICES[:2], OFFSETS[:2], VALUES[:2], np.array([0], np.int32), weight, bias,
                             np.float32(1.0), np.empty((1, 2), np.float32))
    assert total == 0.0 and used == 1 and np.array_equal(weight, before)
    total, used = hinge_pass(INDICES, OFFSETS, VALUES, np.array([-1, -1, -1], np.int32), weight, bias,
                             np.float32(1.0), np.empty((3, 2), np.float32))
    assert used == 0 and np.array_equal(weight, before)


def test_hinge_rows_trains_in_the_order_given():
    # Two copies of a class-0 row and one class-1 row of the same term: after the
    # first copy the second is beyond its margins and changes nothing, so order counts.
    indices, offsets, values = np.zeros(3, np.int32), np.arange(4, dtype=np.int64), np.ones(3, np.float32)
    labels = np.array([0, 0, 1], np.int32)

    def run(order):
        w, b = np.zeros((1, 2), np.float32), np.zeros(2, np.float32)
        assert hinge_rows(indices, offsets, values, labels, w, b, np.float32(2.0), np.array(order, np.int64)) == 3
        return w

    np.testing.assert_allclose(run([0, 1, 2]), [[0.0, 0.0]], atol=1e-6)   # +2, beyond the margin, then -2
    np.testing.assert_allclose(run([2, 0, 1]), [[2.0, -2.0]], atol=1e-6)  # -2, +2, +2


def test_margin_step_trains_the_linear_model_in_place_and_its_twin_alike():
    torch.manual_seed(0)
    model = ScalpelNet(4, classes=2, layers=0, margin=True)
    add_twin(model)
    assert has_twin(model)
    before = model.input.weight.detach().clone()
    labels = np.array([0, 1, 1], np.int32)
    logits, loss = margin_step(model, INDICES, OFFSETS, VALUES, labels, lr=0.5)
    assert logits.shape == (3, 2) and loss > 0
    assert not torch.equal(model.input.weight.detach(), before)
    assert torch.equal(model.twin_weight, model.input.weight.detach())   # the same steps
    block = RowBlock(INDICES, OFFSETS, VALUES, labels=labels)
    assert twin_learns(model, block, 0.5, np.random.default_rng(0)) == 3
    assert not torch.equal(model.twin_weight, model.input.weight.detach())   # validation rows: the twin only
    twin = model.twin_weight.clone()
    adopt_twin(model)
    assert not has_twin(model) and torch.equal(model.input.weight.detach(), twin)
