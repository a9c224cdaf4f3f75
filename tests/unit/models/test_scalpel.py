"""models/scalpel.py: a Scalpel network equals its dense formula; the
fastText bag is the mean of its tokens' embeddings; numbers join the first layer."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from lancetnic_flow.models.scalpel import ScalpelNet, mean_weights

from .conftest import TOL
from .test_sparse_input import VOCAB, block_inputs, tfidf_block


@pytest.mark.parametrize("layers", [0, 1, 2])
def test_scalpel_net_equals_its_dense_formula(layers):
    block, dense = tfidf_block()
    model = ScalpelNet(len(VOCAB), classes=3, regress=True, hidden=6, layers=layers, dropout=0.5).eval()
    out = model(*block_inputs(block))
    W, b = model.input.weight.detach(), model.input.bias.detach()
    h = dense @ W + b
    if layers == 0:
        assert torch.allclose(out["logits"], h[:, :3], atol=TOL)
        assert torch.allclose(out["value"], h[:, 3], atol=TOL)
        return
    h = torch.relu(h)
    if layers == 2:
        h = torch.relu(model.body[2](h))
    assert torch.allclose(out["logits"], model.heads.classify(h), atol=TOL)
    assert torch.allclose(out["value"], model.heads.regress(h).squeeze(-1), atol=TOL)


def test_fasttext_bag_is_the_mean_of_its_tokens_embeddings_whatever_their_weights():
    # FastTextBag's options (registry.py): mean pooling, no activation, no dropout
    model = ScalpelNet(len(VOCAB), classes=2, hidden=4, activation="identity", pooling="mean", dropout=0.0).eval()
    block, dense = tfidf_block()
    out = model(*block_inputs(block))
    present = (dense > 0).float()
    mean = present @ model.input.weight.detach() / present.sum(1, keepdim=True).clamp(min=1)
    h = mean + model.input.bias.detach()
    assert torch.allclose(out["logits"], model.heads.classify(h), atol=TOL)
    assert torch.allclose(mean_weights(torch.tensor([0, 3, 3]), 5), torch.tensor([1 / 3] * 3 + [0.5] * 2))


def test_scalpel_numeric_inputs_join_the_first_layer_like_extra_columns():
    block, dense = tfidf_block()
    model = ScalpelNet(len(VOCAB), classes=2, hidden=4, layers=0, numeric=2).eval()
    num = torch.randn(len(block), 2)
    out = model(*block_inputs(block), numeric=num)
    W = torch.cat([model.input.weight.detach(), model.numeric.weight.detach().T])
    expected = torch.cat([dense, num], 1) @ W + model.input.bias.detach()
    assert torch.allclose(out["logits"], expected, atol=TOL)
