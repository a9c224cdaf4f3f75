"""models/sparse_input.py: the sparse first layers equal their dense
formulas in output and gradient, touch only the rows a batch uses, and the
row-wise optimisers equal torch's on those rows."""
from __future__ import annotations

import copy

import numpy as np
import pyarrow as pa
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lancetnic_flow.features.vectorize import FittedFeatures
from lancetnic_flow.models.sparse_input import DenseOptimizer, RowOptimizer, SparseEmbedding, SparseInput, capped

from .conftest import TOL, csr


def test_sparse_embedding_keeps_padding_at_zero_and_its_gradient_touches_only_used_rows():
    emb = SparseEmbedding(30, 4)
    assert not emb.weight[0].any()
    ids = torch.tensor([[5, 6, 0, 0], [7, 5, 5, 0]])
    out = emb.train()(ids)
    assert not out[0, 2:].any() and not out[1, 3].any()
    assert torch.allclose(out[0, 0], emb.weight[5])
    out.sum().backward()
    used, rows = emb.active
    assert used.tolist() == [0, 5, 6, 7]
    assert emb.weight.grad is None            # no dense (vocabulary × width) gradient
    g = dict(zip(used.tolist(), rows.grad))
    assert not g[0].any()                      # padding gets no gradient
    assert torch.allclose(g[5], torch.full((4,), 3.0)) and torch.allclose(g[6], torch.ones(4))


# ---------------------------------------------------------------- SparseInput == dense Linear

VOCAB = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def tfidf_block():
    """A real TF-IDF RowBlock from FittedFeatures.transform_texts, and its dense matrix."""
    feats = FittedFeatures(mode="tfidf", vocabulary=pa.array(VOCAB, pa.string()),
                           idf=np.linspace(1.0, 2.5, len(VOCAB)).astype(np.float32))
    texts = ["alpha beta beta gamma", "kappa kappa iota", "nothing known here", "delta alpha theta eta zeta",
             "epsilon", "beta gamma delta epsilon zeta eta theta iota kappa alpha"]
    block = feats.transform_texts(pa.array(texts))
    dense = np.zeros((len(block), len(VOCAB)), np.float32)
    rows = np.repeat(np.arange(len(block)), np.diff(block.offsets))
    np.add.at(dense, (rows, block.indices), block.values)
    assert np.allclose(np.linalg.norm(dense, axis=1)[[0, 1, 3, 4, 5]], 1.0)   # l2-normalised rows
    assert not dense[2].any()                                                  # an empty row
    return block, torch.from_numpy(dense)


def block_inputs(block):
    return (torch.from_numpy(block.indices.astype(np.int64)), torch.from_numpy(block.offsets[:-1]),
            torch.from_numpy(block.values))


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_sparse_input_equals_a_dense_linear_layer_on_the_dense_tfidf_row(mode):
    block, dense = tfidf_block()
    layer = SparseInput(len(VOCAB), 7)
    with torch.no_grad():
        layer.bias.copy_(torch.randn(7))
    getattr(layer, mode)()
    out = layer(*block_inputs(block))
    expected = dense @ layer.weight.detach() + layer.bias.detach()
    assert out.shape == (len(block), 7)
    assert torch.allclose(out, expected, atol=TOL)


def test_sparse_input_gradient_equals_the_dense_linear_gradient_on_the_rows_used_and_nothing_else():
    block, dense = tfidf_block()
    layer = SparseInput(len(VOCAB), 5).train()
    upstream = torch.randn(len(block), 5)
    (layer(*block_inputs(block)) * upstream).sum().backward()
    used, rows = layer.active
    dense_grad = dense.T @ upstream                        # d/dW of sum(upstream * (X W + b))
    assert layer.weight.grad is None
    assert torch.allclose(rows.grad, dense_grad[used], atol=TOL)
    unused = sorted(set(range(len(VOCAB))) - set(used.tolist()))
    assert unused == [] or not dense_grad[unused].any()
    assert torch.allclose(layer.bias.grad, upstream.sum(0), atol=TOL)


# ---------------------------------------------------------------- optimisers


def started(layer):
    """``layer`` with every row at its starting values, as if each had been used once."""
    layer.started(torch.arange(layer.weight.shape[0]))
    return layer


def _bag_loss(weight, idx, off, vals, upstream, bias=None):
    out = F.embedding_bag(idx, weight, off, mode="sum", per_sample_weights=vals)
    return (out * upstream).sum()


def test_row_adam_equals_torch_adam_when_every_row_is_used_in_every_step():
    dim, width, lr = 10, 4, 0.05
    layer = started(SparseInput(dim, width).train())
    ref = nn.Parameter(layer.weight.detach().clone())
    row_opt = RowOptimizer(layer, "adam", lr)
    torch_opt = torch.optim.Adam([ref], lr=lr)
    g = torch.Generator().manual_seed(3)
    for _ in range(6):
        rows = [torch.randperm(dim, generator=g)[:6].tolist() for _ in range(3)] + [list(range(dim))]
        idx, off = csr(rows)
        vals = torch.rand(len(idx), generator=g)
        upstream = torch.randn(len(rows), width, generator=g)
        (layer(idx, off, vals) * upstream).sum().backward()
        assert layer.active[0].tolist() == list(range(dim))
        row_opt.step()
        torch_opt.zero_grad()
        _bag_loss(ref, idx, off, vals, upstream).backward()
        torch_opt.step()
        assert torch.allclose(layer.weight, ref, atol=1e-6)


def test_row_adam_is_lazy_untouched_rows_and_moments_stay_put_and_it_matches_sparse_adam():
    dim, width, lr = 12, 3, 0.01
    layer = started(SparseInput(dim, width).train())
    bag = nn.EmbeddingBag(dim, width, mode="sum", sparse=True)
    with torch.no_grad():
        bag.weight.copy_(layer.weight)
    row_opt = RowOptimizer(layer, "adam", lr)
    sparse_opt = torch.optim.SparseAdam(list(bag.parameters()), lr=lr)
    g = torch.Generator().manual_seed(4)
    batches = [[[0, 1, 2], [2, 3]], [[3, 4, 5]], [[0, 7], [8]], [[1, 2, 3, 4]], [[11, 10]]]
    for step, rows in enumerate(batches, 1):
        idx, off = csr(rows)
        vals = torch.rand(len(idx), generator=g) + 0.1
        upstream = torch.randn(len(rows), width, generator=g)
        before_w, before_m, before_v = layer.weight.detach().clone(), row_opt.m.clone(), row_opt.v.clone()
        (layer(idx, off, vals) * upstream).sum().backward()
        grad = layer.active[1].grad.clone()
        row_opt.step()
        sparse_opt.zero_grad()
        (bag(idx, off, per_sample_weights=vals) * upstream).sum().backward()
        sparse_opt.step()

        used = sorted(set(idx.tolist()))
        untouched = [r for r in range(dim) if r not in used]
        assert torch.equal(layer.weight[untouched], before_w[untouched])
        assert torch.equal(row_opt.m[untouched], before_m[untouched])
        assert torch.equal(row_opt.v[untouched], before_v[untouched])
        assert (layer.weight[used] != before_w[used]).any(1).all()
        assert torch.allclose(layer.weight, bag.weight, atol=1e-6), f"step {step}"
        if step == 1:
            # Adam's first step: m̂ = g, v̂ = g², so each weight moves by lr·sign(g).
            moved = layer.weight[used] - before_w[used]
            assert torch.allclose(moved, -lr * torch.sign(grad), atol=lr * 1e-3)
    assert row_opt.t == len(batches)
    never_used = [6, 9]
    assert not row_opt.m[never_used].any() and not row_opt.v[never_used].any()


def test_row_sgd_equals_torch_sgd_on_a_dense_copy():
    dim, width, lr = 9, 3, 0.3
    layer = started(SparseInput(dim, width).train())
    ref = nn.Parameter(layer.weight.detach().clone())
    row_opt, torch_opt = RowOptimizer(layer, "sgd", lr), torch.optim.SGD([ref], lr=lr)
    for rows in ([[0, 1], [1, 2]], [[5, 6, 7]], [[0, 8]]):
        idx, off = csr(rows)
        vals = torch.rand(len(idx))
        upstream = torch.randn(len(rows), width)
        before = layer.weight.detach().clone()
        (layer(idx, off, vals) * upstream).sum().backward()
        row_opt.step()
        torch_opt.zero_grad()
        _bag_loss(ref, idx, off, vals, upstream).backward()
        torch_opt.step()
        assert torch.allclose(layer.weight, ref, atol=1e-6)
        untouched = [r for r in range(dim) if r not in idx.tolist()]
        assert torch.equal(layer.weight[untouched], before[untouched])


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_dense_optimizer_matches_torch_optim(name):
    net = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2))
    ref = copy.deepcopy(net)
    mine = DenseOptimizer(net.parameters(), name, lr=0.05)
    theirs = (torch.optim.Adam if name == "adam" else torch.optim.SGD)(ref.parameters(), lr=0.05)
    for _ in range(5):
        x, y = torch.randn(8, 5), torch.randn(8, 2)
        mine.zero_grad()
        F.mse_loss(net(x), y).backward()
        mine.step()
        theirs.zero_grad()
        F.mse_loss(ref(x), y).backward()
        theirs.step()
    for p, q in zip(net.parameters(), ref.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


def test_the_row_wise_first_layer_gives_embedding_bags_output_and_gradient_on_the_rows_a_batch_uses():
    """The training path (one sort, a CSR product for the backward) against
    plain ``embedding_bag`` on the whole weight: the same output, and the
    same gradient on every used row; empty rows and repeated indices included."""
    import torch
    import torch.nn.functional as F

    from lancetnic_flow.models.sparse_input import SparseInput

    g = torch.Generator().manual_seed(3)
    for rows, nnz_max in ((1, 5), (64, 40), (300, 3)):
        lengths = torch.randint(0, nnz_max + 1, (rows,), generator=g)
        lengths[0] = 0                                              # an empty row
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
        n = int(lengths.sum())
        indices = torch.randint(0, 50, (n,), generator=g)           # many repeats
        weights = torch.rand(n, generator=g)
        layer = SparseInput(50, 16)
        layer.train()
        out = layer(indices, offsets, weights)
        grad_out = torch.randn(out.shape, generator=g)
        (out * grad_out).sum().backward()
        used, got = layer.active[0], layer.active[1].grad

        weight = layer.weight.detach().clone().requires_grad_()
        want = F.embedding_bag(indices, weight, offsets, mode="sum", per_sample_weights=weights) + layer.bias
        (want * grad_out).sum().backward()
        assert torch.allclose(out, want, atol=1e-6)
        assert torch.equal(used, torch.unique(indices))
        assert torch.allclose(got, weight.grad[used], atol=1e-5)
        assert float(weight.grad.abs().sum()) == pytest.approx(float(got.abs().sum()), rel=1e-5)  # nothing outside


def test_a_capped_row_sgd_step_cuts_a_row_many_examples_share_and_leaves_a_rare_rows_step_as_it_was():
    """A row whose examples' squared weights sum past the cap steps as if they summed to the cap:
    20 copies of one text moved its rows 20 examples' steps at once (a regression overshot to
    the mean); a row of a lone example under the cap keeps its summed per-example step."""
    layer = started(SparseInput(4, 3).train())
    plain = SparseInput(4, 3).train()
    plain.weight.data.copy_(layer.weight.data)
    capped_opt, plain_opt = RowOptimizer(layer, "sgd", 0.1, cap=0.5), RowOptimizer(plain, "sgd", 0.1)
    idx, off = csr([[0, 1]] * 20 + [[2]])
    vals = torch.tensor([0.6, 0.8] * 20 + [0.5])
    upstream = torch.ones(21, 3)
    before = layer.weight.detach().clone()
    for net, opt in ((layer, capped_opt), (plain, plain_opt)):
        (net(idx, off, vals) * upstream).sum().backward()
        opt.step()
    full = plain.weight.detach() - before   # 20 examples' summed steps for rows 0 and 1, one's for row 2
    cut = layer.weight.detach() - before
    torch.testing.assert_close(cut[0], full[0] * 0.5 / (20 * 0.36))
    torch.testing.assert_close(cut[1], full[1] * 0.5 / (20 * 0.64))
    torch.testing.assert_close(cut[2], full[2])
    assert torch.equal(cut[3], torch.zeros(3))


def test_capped_leaves_a_gradient_whole_without_a_cap_or_for_rows_another_step_used():
    layer = SparseInput(4, 2).train()
    layer.weighs_rows = True
    idx, off = csr([[0, 1], [1]])
    layer(idx, off, torch.ones(3)).sum().backward()
    used, rows = layer.active
    grad = rows.grad
    assert torch.equal(capped(grad, used, layer, None), grad)
    assert torch.equal(capped(grad, used.clone(), layer, 0.5), grad)   # --ddp: rows exchanged between ranks
    torch.testing.assert_close(capped(grad, used, layer, 0.5), grad * torch.tensor([[0.5], [0.25]]))


def test_rows_plan_keeps_torchs_csr_beta_warning_ignored_by_a_filter_of_the_process_not_a_catch_warnings():
    """A ``catch_warnings`` around the build restored, at its end, the filter list of whatever
    thread had entered before it: with threads building at once, the warning reached the terminal."""
    import warnings

    from lancetnic_flow.models.sparse_input import CSR_BETA, rows_plan

    def ignored() -> bool:
        return any(f[0] == "ignore" and f[1] is not None and f[1].pattern == CSR_BETA for f in warnings.filters)

    with warnings.catch_warnings():
        warnings.resetwarnings()   # a list from before the filter, as another thread's catch_warnings restores
        rows_plan(torch.tensor([3, 1, 3]), torch.tensor([0, 2]), torch.tensor([1.0, 2.0, 3.0]))
        assert ignored()   # in place after the build: the next thread's build is quiet too


def test_a_row_starts_at_zero_and_takes_its_own_random_values_when_a_training_batch_first_uses_it():
    """The same row starts from the same values whichever batch first uses it (a resumed run, a
    --ddp rank, another order of batches), N(0, 0.1²) as a random start was; a row evaluation or
    a batch without gradients reads stays zero, and LinearSVM's rows (init_std 0) start at zero."""
    torch.manual_seed(5)
    a = SparseInput(64, 16).train()
    torch.manual_seed(5)
    b = SparseInput(64, 16).train()
    assert not a.weight.any()
    a(torch.tensor([3, 9]), torch.tensor([0]), None)
    b(torch.tensor([9]), torch.tensor([0]), None)
    b(torch.tensor([3, 9]), torch.tensor([0]), None)
    assert torch.equal(a.weight, b.weight) and a.weight[[3, 9]].abs().sum(1).gt(0).all()
    assert int(a.weight.any(1).sum()) == 2
    a.eval()(torch.tensor([20]), torch.tensor([0]), None)
    with torch.no_grad():
        a.train()(torch.tensor([21]), torch.tensor([0]), None)
    assert not a.weight[[20, 21]].any()
    many = SparseInput(4096, 16)
    values = many.started(torch.arange(4096))
    assert abs(float(values.mean())) < 0.003 and float(values.std()) == pytest.approx(0.1, rel=0.02)
    zero = SparseInput(8, 3, init_std=0.0).train()
    zero(torch.tensor([1, 2]), torch.tensor([0]), None)
    assert not zero.weight.any()
