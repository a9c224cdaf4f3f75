"""models/margin.py: LinearSVM's per-example hinge step. One row's step is
the formula (score every class; each class short of its margin moves the
row's weights by lr·t·value and its bias by a hundredth of that); rows go in
order; unlabelled rows are scored only (an empty label set trains every label negative); the twin steps beside the model."""
from __future__ import annotations

import time

import numpy as np
import torch

import pytest

from lancetnic_flow.models import margin
from lancetnic_flow.models.margin import (BIAS_RATE, TWIN_BEHIND, add_twin, adopt_twin, has_twin, hinge_pass,
                                          hinge_rows, margin_step, twin_learns)
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


def test_a_label_set_row_steps_each_label_by_its_own_margin_and_an_empty_set_trains_each_label_negative():
    # an empty set (no label applies) was only scored, never trained: a model of such data never learned
    # to give a row no label, and predicted some label for every row
    rng = np.random.default_rng(1)
    weight = rng.normal(0, 0.5, (4, 3)).astype(np.float32)
    bias = np.array([0.1, -0.2, 0.0], np.float32)
    w_ref, b_ref = weight.copy(), bias.copy()
    hot = np.array([[1, 0, 1], [0, 0, 0], [0, 1, 1]], np.uint8)   # two labels, none, two labels
    scores = np.empty((3, 3), np.float32)
    total, used = hinge_pass(INDICES, OFFSETS, VALUES, hot, weight, bias, np.float32(0.5), scores)
    want_loss = 0.0
    for r in range(3):
        s, loss = reference_step(w_ref, b_ref, r, hot[r], 0.5)
        np.testing.assert_allclose(scores[r], s, rtol=1e-5, atol=1e-6)
        want_loss += loss
    np.testing.assert_allclose(weight, w_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bias, b_ref, rtol=1e-5, atol=1e-6)
    assert used == 3 and abs(total - want_loss) < 1e-4


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
    assert torch.equal(model.state_dict()["twin_weight"], model.input.weight.detach())   # the same steps
    block = RowBlock(INDICES, OFFSETS, VALUES, labels=labels)
    assert twin_learns(model, block, 0.5, np.random.default_rng(0)) == 3
    # validation rows: the twin only (its state, read once its thread has taken the step)
    assert not torch.equal(model.state_dict()["twin_weight"], model.input.weight.detach())
    twin = model.twin_weight.clone()
    adopt_twin(model)
    assert not has_twin(model) and torch.equal(model.input.weight.detach(), twin)


def random_batches(n: int, rows: int = 40, dim: int = 300, classes: int = 5, seed: int = 0) -> list[tuple]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        lengths = rng.integers(1, 12, rows)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        out.append((rng.integers(0, dim, offsets[-1]).astype(np.int32), offsets,
                    rng.uniform(0.1, 1.0, offsets[-1]).astype(np.float32),
                    rng.integers(0, classes, rows).astype(np.int32)))
    return out


def test_the_twin_behind_the_model_ends_where_a_twin_in_step_would_and_waits_for_no_more_than_a_few_batches(
        monkeypatch):
    torch.manual_seed(0)
    model = ScalpelNet(300, classes=5, layers=0, margin=True)
    add_twin(model)
    twin_w, twin_b = model.twin_weight.numpy().copy(), model.twin_bias.numpy().copy()
    twin = model.twin_weight.numpy()

    def slow_twin(indices, offsets, values, labels, weight, *rest):   # the twin well behind the model
        if np.shares_memory(weight, twin):
            time.sleep(0.005)
        return hinge_pass(indices, offsets, values, labels, weight, *rest)

    monkeypatch.setattr(margin, "hinge_pass", slow_twin)
    batches = random_batches(60)
    for i, (ind, off, val, lab) in enumerate(batches):
        margin_step(model, ind, off, val, lab, lr=0.3 - 0.004 * i)
        assert len(model.twin_pending) <= TWIN_BEHIND
        hinge_pass(ind, off, val, lab, twin_w, twin_b, np.float32(0.3 - 0.004 * i), np.empty((len(off) - 1, 5),
                                                                                               np.float32))
    state = model.state_dict()   # reads the twin: waits for its pending steps
    assert np.array_equal(state["twin_weight"].numpy(), twin_w) and np.array_equal(state["twin_bias"].numpy(), twin_b)
    assert torch.equal(model.twin_weight, model.input.weight.detach())   # the same batches as the model
    # Weights loaded (a checkpoint, the best epoch's) are not overwritten by a step still behind.
    saved = {k: v.clone() for k, v in state.items()}
    for i, (ind, off, val, lab) in enumerate(batches[:TWIN_BEHIND]):
        margin_step(model, ind, off, val, lab, lr=0.1)
    model.load_state_dict(saved)
    time.sleep(0.1)
    assert torch.equal(model.twin_weight, saved["twin_weight"])


def test_a_failed_twin_step_is_raised_where_the_twin_is_next_read(monkeypatch):
    model = ScalpelNet(300, classes=5, layers=0, margin=True)
    add_twin(model)
    twin = model.twin_weight.numpy()

    def failing(indices, offsets, values, labels, weight, *rest):
        if weight is twin or np.shares_memory(weight, twin):
            raise RuntimeError("the twin's step failed")
        return hinge_pass(indices, offsets, values, labels, weight, *rest)

    monkeypatch.setattr(margin, "hinge_pass", failing)
    ind, off, val, lab = random_batches(1)[0]
    margin_step(model, ind, off, val, lab, lr=0.1)   # the model's own step goes on
    with pytest.raises(RuntimeError, match="the twin's step failed"):
        model.state_dict()


@pytest.mark.parametrize("multilabel", [False, True])
def test_a_kept_epoch_trained_in_place_reaches_the_streamed_epochs_weights_scores_and_loss_bit_for_bit(multilabel):
    from lancetnic_flow.dataflow.kept import KeptEpoch
    from lancetnic_flow.dataflow.stream import BatchStream
    from lancetnic_flow.models.margin import picked_step, warm_picks

    warm_picks()
    rng = np.random.default_rng(3)
    blocks = []
    for rows in (90, 0, 140, 55):
        lengths = rng.integers(1, 12, rows)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        labels = (rng.integers(0, 2, (rows, 5)).astype(np.uint8) if multilabel
                  else rng.integers(0, 5, rows).astype(np.int32))
        blocks.append(RowBlock(rng.integers(0, 300, offsets[-1]).astype(np.int32), offsets,
                               rng.uniform(0.1, 1.0, offsets[-1]).astype(np.float32), labels=labels))
    streamed = ScalpelNet(300, classes=5, layers=0, margin=True)
    picked = ScalpelNet(300, classes=5, layers=0, margin=True)
    picked.load_state_dict(streamed.state_dict())
    for epoch in range(2):
        stream = BatchStream(lambda: iter(blocks), batch_size=16, shuffle_buffer=60, seed=1, epoch=epoch)
        kept = KeptEpoch(blocks, batch_size=16, shuffle_buffer=60, seed=1, epoch=epoch)
        for lr, (b, p) in enumerate(zip(stream, kept)):
            want = margin_step(streamed, b.indices, b.offsets, b.values, b.labels, 0.1 + 0.01 * lr)
            got = picked_step(picked, kept, p, 0.1 + 0.01 * lr)
            assert np.array_equal(got[0], want[0]) and got[1] == want[1]
    assert torch.equal(picked.input.weight, streamed.input.weight) and torch.equal(picked.input.bias,
                                                                                  streamed.input.bias)
    assert not torch.equal(streamed.input.weight, torch.zeros_like(streamed.input.weight))   # it trained


@pytest.mark.parametrize("multilabel", [False, True])
def test_kept_steps_trained_several_in_one_call_reach_a_call_a_steps_weights_scores_and_losses_bit_for_bit(
        multilabel):
    """A rank trains the kept-row steps up to its next meet in one compiled call (picked_steps):
    each step at its own rate, the rows in turn, as picked_step does a step at a time."""
    from lancetnic_flow.dataflow.kept import KeptEpoch
    from lancetnic_flow.models.margin import picked_step, picked_steps, warm_picks

    warm_picks()
    rng = np.random.default_rng(5)
    blocks = []
    for rows in (70, 130, 0, 41):
        lengths = rng.integers(1, 10, rows)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        labels = (rng.integers(0, 2, (rows, 4)).astype(np.uint8) if multilabel
                  else rng.integers(0, 4, rows).astype(np.int32))
        blocks.append(RowBlock(rng.integers(0, 200, offsets[-1]).astype(np.int32), offsets,
                               rng.uniform(0.1, 1.0, offsets[-1]).astype(np.float32), labels=labels))
    one = ScalpelNet(200, classes=4, layers=0, margin=True)
    runs = ScalpelNet(200, classes=4, layers=0, margin=True)
    runs.load_state_dict(one.state_dict())
    kept = KeptEpoch(blocks, batch_size=16, shuffle_buffer=50, seed=2, epoch=0)
    batches = list(kept)
    rates = [0.3 - 0.01 * i for i in range(len(batches))]
    want = [picked_step(one, kept, b, lr) for b, lr in zip(batches, rates)]
    got, at = [], 0
    for size in (1, 5, 3, 7, len(batches)):   # runs of steps of any length, the last one short
        got += picked_steps(runs, kept, batches[at:at + size], rates[at:at + size])
        at += size
        if at >= len(batches):
            break
    assert len(got) == len(want) == len(batches)
    for (gs, gl), (ws, wl) in zip(got, want):
        assert np.array_equal(gs, ws) and gl == wl
    assert torch.equal(runs.input.weight, one.input.weight) and torch.equal(runs.input.bias, one.input.bias)
    assert not torch.equal(one.input.weight, torch.zeros_like(one.input.weight))   # it trained
