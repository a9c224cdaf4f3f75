"""The networks, their sparse first layers and their optimisers, in process
(no cluster): what docs/models.md promises about each model holds exactly.

* SequenceNet: padding never changes a row's result (LSTM, LSTM + attention,
  GRU + attention, one and two layers, empty rows, numeric inputs);
  ``pad_rows`` lays CSR ids out correctly.
* ScalpelNet: ``SparseInput`` is a dense Linear layer on the dense TF-IDF row
  (forward and gradient); the whole net equals its dense formula; the
  FastTextBag variant is a mean of embeddings.
* RowOptimizer 'adam' is torch.optim.Adam when every row is used and lazy
  (SparseAdam) otherwise: untouched rows and their moments never change;
  'sgd' is SGD; DenseOptimizer is torch.optim.Adam/SGD; gradient clipping
  cuts the global norm including the sparse rows.
* Every model × task builds the right heads, trains a few steps and learns;
  the alias names build identical networks; the config resolves each model's
  default task and features.
* Task losses: BCE on the logit margin, class weights, weighted multi-task sum.
"""
from __future__ import annotations

import copy

import numpy as np
import pyarrow as pa
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lancetnic_flow.config import DataConfig, ModelConfig, TrainConfig, TrainingConfig
from lancetnic_flow.errors import UserError
from lancetnic_flow.features.vectorize import FittedFeatures
from lancetnic_flow.models import MODELS, create_model
from lancetnic_flow.models.lancet import SequenceNet, pad_rows
from lancetnic_flow.models.scalpel import ScalpelNet, mean_weights
from lancetnic_flow.models.sparse_input import DenseOptimizer, RowOptimizer, SparseEmbedding, SparseInput
from lancetnic_flow.models.tasks import Task
from lancetnic_flow.training import optim

from helpers import model_task_pairs

TOL = 1e-5


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)
    torch.set_num_threads(1)


def csr(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-id rows → (indices, offsets) as the models take them."""
    lengths = [len(r) for r in rows]
    offsets = torch.tensor([0] + list(np.cumsum(lengths)[:-1]), dtype=torch.long)
    indices = torch.tensor([i for r in rows for i in r], dtype=torch.long)
    return indices, offsets


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
    spec = MODELS["FastTextBag"]
    model = ScalpelNet(len(VOCAB), classes=2, hidden=4, **spec.fixed).eval()
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


# ---------------------------------------------------------------- optimisers


def _bag_loss(weight, idx, off, vals, upstream, bias=None):
    out = F.embedding_bag(idx, weight, off, mode="sum", per_sample_weights=vals)
    return (out * upstream).sum()


def test_row_adam_equals_torch_adam_when_every_row_is_used_in_every_step():
    dim, width, lr = 10, 4, 0.05
    layer = SparseInput(dim, width).train()
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
    layer = SparseInput(dim, width).train()
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
    layer = SparseInput(dim, width).train()
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


def test_clip_grad_cuts_the_global_norm_of_dense_and_sparse_row_gradients_together():
    block, _ = tfidf_block()
    model = ScalpelNet(len(VOCAB), classes=3, hidden=6, dropout=0.0).train()
    opts = optim.make_optimizers(model, "sgd", lr=1.0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    out = model(*block_inputs(block))
    (100 * F.cross_entropy(out["logits"], torch.tensor([0, 1, 2, 0, 1, 2]))).backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None] + [model.input.active[1].grad]
    assert torch.sqrt(sum((g ** 2).sum() for g in grads)) > 1.0
    optim.step(opts, model, clip=0.5)
    moved = torch.sqrt(sum(((p.detach() - before[n]) ** 2).sum() for n, p in model.named_parameters()))
    assert abs(moved.item() - 0.5) < 1e-4        # SGD with lr 1 moves by exactly the clipped gradient


def test_sparse_sgd_moves_each_used_row_by_sparse_lr_per_example_and_the_rest_by_dense_adam():
    """The bag models' default step: input rows by SGD at sparse_lr per example (the mean
    loss's gradient times the batch), dense layers by Adam at lr; unused rows stay put."""
    block, _ = tfidf_block()
    torch.manual_seed(0)
    model = ScalpelNet(len(VOCAB), classes=3, hidden=6, dropout=0.0).train()
    opts = optim.make_optimizers(model, "adam", lr=0.01, sparse="sgd", sparse_lr=0.5, batch_size=6)
    assert [o.name for o in opts] == ["sgd", "adam"]
    before = model.input.weight.detach().clone()
    out = model(*block_inputs(block))
    F.cross_entropy(out["logits"], torch.tensor([0, 1, 2, 0, 1, 2])).backward()
    used, rows = model.input.active
    grad = rows.grad.clone()
    optim.step(opts, model)
    after = model.input.weight.detach()
    torch.testing.assert_close(after[used], before[used] - 0.5 * 6 * grad)
    untouched = torch.ones(len(before), dtype=torch.bool)
    untouched[used] = False
    assert torch.equal(after[untouched], before[untouched])


@pytest.mark.parametrize("name", ["radam", "rmsprop", "adadelta"])
def test_optimizers_without_a_row_wise_form_get_dense_gradients_of_the_first_layer(name):
    model = ScalpelNet(len(VOCAB), classes=2, hidden=4)
    opts = optim.make_optimizers(model, name, lr=0.1)
    assert len(opts) == 1 and isinstance(opts[0], torch.optim.Optimizer)
    assert model.input.row_wise is False
    block, _ = tfidf_block()
    before = model.input.weight.detach().clone()
    out = model.train()(*block_inputs(block))
    F.cross_entropy(out["logits"], torch.tensor([0, 1, 0, 1, 0, 1])).backward()
    assert model.input.weight.grad is not None and model.input.weight.grad.shape == before.shape
    optim.step(opts, model)
    assert not torch.equal(model.input.weight, before)


# ---------------------------------------------------------------- every model × task

COMBOS = model_task_pairs()


def toy_problem(classes=3, rows=96, dim=40, seed=0):
    """Rows of token ids whose class is told by a class-specific token range;
    the target is the class index plus a little noise (standardised)."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(rows) % classes
    seqs = []
    for c in labels.tolist():
        n = int(torch.randint(3, 12, (1,), generator=g))
        own = torch.randint(2 + 10 * c, 12 + 10 * c, (n,), generator=g)
        noise = torch.randint(2, dim, (n // 2,), generator=g)
        seqs.append(torch.cat([own, noise])[torch.randperm(n + n // 2, generator=g)].tolist())
    idx, off = csr(seqs)
    counts = torch.tensor([len(s) for s in seqs])
    vals = (1.0 / counts.float().sqrt()).repeat_interleave(counts)
    targets = labels.float() + 0.1 * torch.randn(rows, generator=g)
    return idx, off, vals, labels, (targets - targets.mean()) / targets.std()


@pytest.mark.parametrize("name,task", COMBOS, ids=[f"{n}-{t}" for n, t in COMBOS])
def test_every_model_and_task_builds_its_heads_and_learns_a_toy_problem_in_process(name, task):
    classes = 3 if task != "regress" else 0
    model, meta = create_model(name, dim=40, classes=classes, regress=task != "classify", hidden=16, layers=1,
                               dropout=0.0, embed=16, numeric=0)
    assert meta["model"] == name and meta["net"] == MODELS[name].net
    t = Task(task, classes=classes)
    idx, off, vals, labels, targets = toy_problem()
    opts = optim.make_optimizers(model, "adam", 0.03)
    losses = []
    for step in range(40):
        out = model.train()(idx, off, vals)
        expected = {"classify": {"logits"}, "regress": {"value"}, "multitask": {"logits", "value"}}[task]
        assert set(out) == expected
        if "logits" in out:
            assert out["logits"].shape == (len(labels), 3)
        if "value" in out:
            assert out["value"].shape == (len(labels),)
        loss = t.loss(out, labels, targets)
        optim.zero_grad(opts)
        loss.backward()
        optim.step(opts, model)
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses
    with torch.no_grad():
        out = model.eval()(idx, off, vals)
    if "logits" in out:
        assert (out["logits"].argmax(1) == labels).float().mean() > 0.9
    if "value" in out:
        assert F.mse_loss(out["value"], targets) < 0.3     # the target's variance is 1


@pytest.mark.parametrize("group", [("ScalpelMC", "ScalpelReg", "ScalpelMTSK"), ("LancetMC", "LancetReg")])
@pytest.mark.parametrize("task", ["classify", "regress", "multitask"])
def test_task_named_aliases_build_the_same_network_for_the_same_task(group, task):
    records = []
    for name in group:
        torch.manual_seed(7)
        model, meta = create_model(name, dim=30, classes=0 if task == "regress" else 4,
                                   regress=task != "classify", hidden=8, layers=1, dropout=0.1, embed=8, numeric=1)
        records.append((meta["net"], meta["kwargs"], {k: v.clone() for k, v in model.state_dict().items()}))
    first = records[0]
    for net, kwargs, state in records[1:]:
        assert (net, kwargs) == first[:2]
        assert state.keys() == first[2].keys() and all(torch.equal(state[k], first[2][k]) for k in state)


def _config(name, task=None, **data):
    return TrainConfig(data=DataConfig(train=["x.csv"], **{"target": "target", **data}),
                       model=ModelConfig(name=name), training=TrainingConfig(task=task))


@pytest.mark.parametrize("name,task", COMBOS, ids=[f"{n}-{t}" for n, t in COMBOS])
def test_the_config_accepts_every_model_and_task_and_resolves_the_models_features(name, task):
    cfg = _config(name, task).validate()
    spec = MODELS[name]
    assert cfg.training.task == task
    assert cfg.features.mode == spec.features[0]
    assert cfg.features.ngrams == (1 if spec.features[0] == "ids" else 2)   # words and word pairs in a bag
    assert cfg.data.label == (None if task == "regress" else "label")


@pytest.mark.parametrize("name,default", [("ScalpelMC", "classify"), ("ScalpelReg", "regress"),
                                          ("ScalpelMTSK", "multitask"), ("FastTextBag", "classify"),
                                          ("LancetMC", "classify"), ("LancetMCA", "classify"),
                                          ("LancetMCA_gru", "classify"), ("LancetReg", "regress")])
def test_each_model_has_the_documented_default_task(name, default):
    assert _config(name).validate().training.task == default


def test_a_sequence_model_refuses_tfidf_features_and_names_ids():
    cfg = _config("LancetMC")
    cfg.features.mode = "tfidf"
    with pytest.raises(UserError) as e:
        cfg.validate()
    assert "LancetMC" in e.value.message and "ids" in e.value.message and "tfidf" in e.value.message
    assert "ScalpelMC" in e.value.hint


@pytest.mark.parametrize("task", ["regress", "multitask"])
def test_regression_without_a_target_column_is_a_user_error(task):
    with pytest.raises(UserError, match="--target"):
        _config("ScalpelMC", task, target=None).validate()


def test_scalpel_reg_without_a_target_is_a_user_error_because_it_regresses_by_default():
    with pytest.raises(UserError, match="regress needs a numeric target"):
        _config("ScalpelReg", target=None).validate()


def test_auto_model_with_a_target_regresses_and_a_named_classifier_keeps_its_task():
    # Before: --target with the default model trained a classifier on the label column, the target unread.
    auto = _config("auto").validate()
    assert (auto.training.task, auto.model.name, auto.data.label) == ("regress", "ScalpelMC", None)
    named = _config("ScalpelMC").validate()
    assert named.training.task == "classify"
    both = _config("auto", "multitask").validate()
    assert (both.training.task, both.data.label) == ("multitask", "label")
    assert _config("auto", target=None).validate().training.task == "classify"


@pytest.mark.parametrize("name,task,sparse,given,want", [
    ("auto", None, None, None, 1.0),               # regress: a value head steps the rows at 1.0
    ("ScalpelMTSK", None, None, None, 1.0),        # multitask too
    ("ScalpelReg", None, "sgd", None, 1.0),
    ("ScalpelMC", None, None, None, 2.5),          # a class loss alone keeps 2.5
    ("ScalpelReg", None, None, 2.5, 2.5),          # a rate given is the rate used
    ("ScalpelReg", None, "adam", None, None),      # lazy Adam runs at --lr
])
def test_the_input_rows_default_rate_is_lower_when_a_value_head_learns(name, task, sparse, given, want):
    cfg = _config(name, task)
    cfg.training.sparse_optimizer, cfg.training.sparse_lr = sparse, given
    t = cfg.validate().training
    assert t.sparse_lr == want
    assert t.sparse_lr == cfg.validate().training.sparse_lr   # validating again changes nothing


@pytest.mark.parametrize("train,val,bad", [
    ({"loss": float("nan")}, {"loss": 0.5}, "training loss is nan"),
    ({"loss": 0.5}, {"loss": float("inf")}, "validation loss is inf"),
])
def test_an_epoch_whose_loss_is_not_a_number_ends_the_run_in_words(train, val, bad):
    from lancetnic_flow.training.step import check_finite

    with pytest.raises(UserError, match=bad) as e:
        check_finite(3, train, val)
    assert "after epoch 3" in e.value.message and "--sparse-lr" in e.value.hint
    check_finite(3, {"loss": 0.5}, {})               # finite, or no validation: nothing to say
    check_finite(3, {"loss": None}, {"loss": None})


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
