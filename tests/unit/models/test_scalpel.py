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
    model.input.started(torch.arange(len(VOCAB)))   # every row at its starting values, as if trained on
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
    model.input.started(torch.arange(len(VOCAB)))   # every row at its starting values, as if trained on
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
    model.input.started(torch.arange(len(VOCAB)))   # every row at its starting values, as if trained on
    num = torch.randn(len(block), 2)
    out = model(*block_inputs(block), numeric=num)
    W = torch.cat([model.input.weight.detach(), model.numeric.weight.detach().T])
    expected = torch.cat([dense, num], 1) @ W + model.input.bias.detach()
    assert torch.allclose(out["logits"], expected, atol=TOL)


def _held_bytes(model: nn.Module, *optimizers) -> int:
    tensors = list(model.parameters()) + list(model.buffers())
    for opt in optimizers:
        for value in opt.state_dict().values():
            tensors += value if isinstance(value, list) else [value] if torch.is_tensor(value) else []
    return sum(t.numel() * t.element_size() for t in tensors)


def test_the_fasttext_bags_table_is_buckets_by_hidden_whatever_the_words_pairs_and_rows_it_trains_on():
    import pyarrow as pa

    from lancetnic_flow.features.vectorize import FittedFeatures
    from lancetnic_flow.models.nets import create_model
    from lancetnic_flow.models.sparse_input import DenseOptimizer, RowOptimizer

    buckets, hidden = 2**10, 8
    features = FittedFeatures(mode="hashing", buckets=buckets, ngrams=2)   # FastTextBag's words and word pairs
    model, _ = create_model("FastTextBag", dim=features.dim, classes=3, regress=False, hidden=hidden, layers=1,
                            dropout=0.0, embed=0, numeric=0)
    rows, dense = RowOptimizer(model.input, "sgd", lr=0.5), DenseOptimizer(
        [p for n, p in model.named_parameters() if not n.startswith("input.")], "adam", lr=1e-2)
    assert tuple(model.input.weight.shape) == (buckets, hidden)
    before = _held_bytes(model, rows, dense)
    model.train()
    for step in range(30):   # each batch new words and pairs: 12,000 distinct terms in all, into 1,024 rows
        texts = pa.array([f"w{step}x{i} v{step}y{i} common" for i in range(200)])
        block = features.transform_texts(texts)
        assert int(block.indices.max()) < buckets
        out = model(*block_inputs(block))
        nn.functional.cross_entropy(out["logits"], torch.arange(200) % 3).backward()
        rows.step()
        dense.step()
        dense.zero_grad()
    assert _held_bytes(model, rows, dense) == before
    assert tuple(model.input.weight.shape) == (buckets, hidden) and model.input.active is None


@pytest.mark.parametrize("layers", [0, 1])
def test_buckets_no_training_batch_used_add_nothing_to_a_prediction(layers):
    """A held-out text's hashed buckets that no training row touched kept their random starting
    values and added noise to every prediction (a templated regression's validation R² 0.75
    where TF-IDF, which drops unseen terms, reached 0.99); they are zero until first used now."""
    torch.manual_seed(0)
    model = ScalpelNet(40, classes=2, regress=True, hidden=8, layers=layers, dropout=0.0).train()
    seen = (torch.tensor([0, 1, 2, 3, 1, 4]), torch.tensor([0, 3]), torch.full((6,), 0.5))
    sum(v.sum() for v in model(*seen).values()).backward()
    assert model.input.weight[:5].abs().sum(1).gt(0).all() and not model.input.weight[5:].any()
    model.eval()
    with torch.no_grad():
        known = model(torch.tensor([1, 2]), torch.tensor([0]), torch.full((2,), 0.7))
        padded = model(torch.tensor([1, 2, 17, 33]), torch.tensor([0]), torch.tensor([0.7, 0.7, 0.5, 0.9]))
    for name in known:
        assert torch.equal(known[name], padded[name])
