"""models/lancet.py: pad_rows lays CSR rows out as padded sequences, and a
sequence network's output for a row does not depend on the padding its batch adds."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from lancetnic_flow.models.lancet import SequenceNet, pad_rows

from .conftest import TOL, csr


# ---------------------------------------------------------------- pad_rows


def test_pad_rows_lays_each_csr_row_left_aligned_with_zero_padding_and_its_length():
    rows = [[5, 6, 7], [], [9], [3, 4, 8, 2, 11]]
    indices, offsets = csr(rows)
    padded, lengths = pad_rows(indices, offsets)
    assert padded.shape == (4, 5)
    assert lengths.tolist() == [3, 0, 1, 5]
    expected = torch.zeros(4, 5, dtype=torch.long)
    for i, r in enumerate(rows):
        expected[i, :len(r)] = torch.tensor(r, dtype=torch.long) if r else expected[i, :0]
    assert torch.equal(padded, expected)


def test_pad_rows_of_only_empty_rows_is_one_padding_column():
    padded, lengths = pad_rows(torch.zeros(0, dtype=torch.long), torch.zeros(3, dtype=torch.long))
    assert padded.shape == (3, 1) and not padded.any()
    assert lengths.tolist() == [0, 0, 0]


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
    # the rows a padded batch uses: its tokens and the padding id 0 (which stays zero)
    assert model.input.active is not None and model.input.active[0].tolist() == [0, 2, 3, 7, 9, 40, 41]
    eval_out = model.eval()(idx, off)["logits"]
    assert torch.allclose(train_out, eval_out, atol=TOL)
