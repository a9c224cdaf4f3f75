"""models/lancet.py: a batch's rows run in groups of similar length, and a
sequence network's output for a row does not depend on the padding or the
grouping its batch adds: it equals a packed RNN's, forward and backward."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from lancetnic_flow.models.lancet import GROUP_ROWS, PAD_SHARE, SequenceNet, length_groups

from .conftest import TOL, csr


# ---------------------------------------------------------------- length_groups


def test_length_groups_hold_every_row_once_longest_last_and_bound_their_padding():
    steps = torch.from_numpy(np.random.default_rng(3).integers(1, 257, 700))
    order, groups = length_groups(steps)
    assert sorted(torch.cat(groups).tolist()) == list(range(700))
    assert torch.equal(torch.cat(groups), order)
    assert len(groups) > 3
    for g in groups:
        lengths = steps[g]
        assert int(lengths[-1]) == int(lengths.max())
        # a group was closed as soon as one more row would pad past the bound
        if len(g) > GROUP_ROWS + 1:
            assert (len(g) - 1) * int(lengths[-2]) <= (1 + PAD_SHARE) * int(lengths[:-1].sum())


def test_rows_of_one_length_are_one_group():
    order, groups = length_groups(torch.full((300,), 17))
    assert len(groups) == 1 and groups[0].tolist() == list(range(300))


def packed_reference(model: SequenceNet, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """The pooled states as a packed RNN gives them (the model's forward before groups)."""
    nnz, n = indices.numel(), offsets.numel()
    lengths = torch.diff(offsets, append=torch.tensor([nnz]))
    width = max(int(lengths.max()), 1)
    padded = torch.zeros(n, width, dtype=torch.long)
    row = torch.repeat_interleave(torch.arange(n), lengths)
    padded[row, torch.arange(nnz) - offsets[row]] = indices
    x = model.input(padded)
    packed = pack_padded_sequence(x, lengths.clamp(min=1), batch_first=True, enforce_sorted=False)
    out, state = model.rnn(packed)
    if model.score is not None:
        seq, _ = pad_packed_sequence(out, batch_first=True, total_length=width)
        mask = torch.arange(width)[None, :] < lengths.clamp(min=1)[:, None]
        scores = model.score(torch.tanh(seq)).squeeze(-1).masked_fill(~mask, float("-inf"))
        h = (torch.softmax(scores, dim=1).unsqueeze(-1) * seq).sum(1)
    else:
        h = (state[0] if model.cell == "lstm" else state)[-1]
    return model.finish(h)["logits"]


@pytest.mark.parametrize("one_call", [False, True], ids=["groups (the CPU's)", "one call (a GPU's)"])
@pytest.mark.parametrize("cell,attention,layers", [("lstm", False, 1), ("gru", True, 1), ("lstm", True, 2)])
def test_grouped_rows_give_a_packed_rnn_s_outputs_and_gradients(cell, attention, layers, one_call):
    torch.manual_seed(0)
    model = SequenceNet(dim=300, classes=4, embed=8, hidden=8, layers=layers, dropout=0.0, cell=cell,
                        attention=attention).eval()
    model.input.row_wise = False
    model.one_call = one_call
    rng = np.random.default_rng(5)
    rows = [rng.integers(2, 300, rng.integers(0, 90)).tolist() for _ in range(200)]
    idx, off = csr(rows)
    assert len(length_groups(torch.diff(off, append=torch.tensor([idx.numel()])).clamp(min=1))[1]) > 2
    ours = model(idx, off)["logits"]
    grads = torch.autograd.grad(ours.square().sum(), list(model.parameters()))
    ref = packed_reference(model, idx, off)
    ref_grads = torch.autograd.grad(ref.square().sum(), list(model.parameters()))
    assert torch.allclose(ours, ref, atol=TOL)
    for g, r in zip(grads, ref_grads):
        assert torch.allclose(g, r, atol=1e-4, rtol=1e-4)


# ---------------------------------------------------------------- padding invariance

SEQ_CASES = [("lstm", False, 1), ("lstm", True, 1), ("gru", True, 1), ("lstm", False, 2), ("gru", True, 2)]


@pytest.mark.parametrize("cell,attention,layers", SEQ_CASES,
                         ids=[f"{c}{'+attn' if a else ''}-{n}layer" for c, a, n in SEQ_CASES])
def test_sequence_net_output_for_a_row_does_not_depend_on_the_padding_its_batch_adds(cell, attention, layers):
    model = SequenceNet(dim=200, classes=3, regress=True, embed=16, hidden=16, layers=layers, dropout=0.3,
                        cell=cell, attention=attention).eval()
    g = torch.Generator().manual_seed(1)
    short = torch.randint(2, 200, (4,), generator=g).tolist()
    long = torch.randint(2, 200, (60,), generator=g).tolist()
    mid = torch.randint(2, 200, (17,), generator=g).tolist()
    with torch.no_grad():
        alone = model(*csr([short]))
        long_alone = model(*csr([long]))
        batched = model(*csr([short, long, mid]))
        reversed_ = model(*csr([long, mid, short]))
        empty_alone = model(*csr([[]]))
        empty_batched = model(*csr([long, []]))
    for key in ("logits", "value"):
        assert torch.allclose(alone[key][0], batched[key][0], atol=TOL), key
        assert torch.allclose(alone[key][0], reversed_[key][2], atol=TOL), key
        assert torch.allclose(long_alone[key][0], batched[key][1], atol=TOL), key
        assert torch.allclose(empty_alone[key][0], empty_batched[key][1], atol=TOL), key
    # ...and the rows really are different inputs (the comparison could fail)
    assert not torch.allclose(alone["logits"][0], long_alone["logits"][0], atol=1e-3)


def test_sequence_net_with_numeric_inputs_is_padding_invariant_and_uses_the_numbers():
    model = SequenceNet(dim=50, classes=2, regress=True, embed=8, hidden=8, cell="gru", attention=True,
                        numeric=2).eval()
    a, b = [3, 4, 5], list(range(2, 40))
    num = torch.tensor([[0.5, -1.0], [2.0, 0.0]])
    with torch.no_grad():
        alone = model(*csr([a]), numeric=num[:1])
        batched = model(*csr([a, b]), numeric=num)
        other_number = model(*csr([a]), numeric=torch.tensor([[3.0, 1.0]]))
    assert torch.allclose(alone["value"][0], batched["value"][0], atol=TOL)
    assert torch.allclose(alone["logits"][0], batched["logits"][0], atol=TOL)
    assert abs(alone["value"][0] - other_number["value"][0]) > 1e-4


def test_sequence_net_training_forward_gathers_rows_yet_equals_the_eval_forward_without_dropout():
    model = SequenceNet(dim=80, classes=3, regress=False, embed=8, hidden=8, dropout=0.0, attention=True)
    idx, off = csr([[2, 3, 9, 2], [40, 41], [7]])
    train_out = model.train()(idx, off)["logits"]
    # the rows the batch's tokens use, each once
    assert model.input.active is not None and model.input.active[0].tolist() == [2, 3, 7, 9, 40, 41]
    eval_out = model.eval()(idx, off)["logits"]
    assert torch.allclose(train_out, eval_out, atol=TOL)


def test_a_classifier_takes_batches_of_like_lengths_and_a_model_learning_a_value_does_not():
    assert SequenceNet(dim=10, classes=3).batches_by_length
    assert not SequenceNet(dim=10, classes=0, regress=True).batches_by_length
    assert not SequenceNet(dim=10, classes=3, regress=True).batches_by_length
