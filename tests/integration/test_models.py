"""The models with the parts other engineers' modules own, in process (no
cluster): the optimisers of training/optim.py on a Scalpel network (clipping,
sparse SGD beside dense Adam, dense gradients for optimisers without a
row-wise form), every model × task of the registry building and learning a
toy problem, the alias names, and what the config resolves per model.

The networks' own promises (padding invariance, the sparse first layers equal
to their dense formulas, the row-wise optimisers, the task losses) are tests
of tests/unit/models/.
"""
from __future__ import annotations

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
from lancetnic_flow.models.scalpel import ScalpelNet
from lancetnic_flow.models.tasks import Task
from lancetnic_flow.training import optim

from helpers import model_task_pairs

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


def test_clip_grad_cuts_the_global_norm_of_dense_and_sparse_row_gradients_together():
    block, _ = tfidf_block()
    model = ScalpelNet(len(VOCAB), classes=3, hidden=6, dropout=0.0).train()
    opts = optim.make_optimizers(model, "sgd", lr=1.0)
    out = model(*block_inputs(block))
    (100 * F.cross_entropy(out["logits"], torch.tensor([0, 1, 2, 0, 1, 2]))).backward()
    # after the forward pass: the rows it used first took their starting values there (they start at zero)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
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
    out = model(*block_inputs(block))
    F.cross_entropy(out["logits"], torch.tensor([0, 1, 2, 0, 1, 2])).backward()
    before = model.input.weight.detach().clone()   # the used rows started by the forward pass, the rest at zero
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
    """A configuration with the target column where the task reads one (``auto`` reads it as a
    regression; a named classifier refuses a target it would not read)."""
    own = task or (MODELS[name].task if name in MODELS else None)
    value = name not in MODELS or own in ("regress", "multitask")
    return TrainConfig(data=DataConfig(train=["x.csv"], **{"target": "target" if value else None, **data}),
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
    with pytest.raises(UserError, match="needs a numeric target column") as e:
        _config("ScalpelMC", task, target=None).validate()
    assert "pass target COLUMN" in e.value.hint and "--target" in e.value.cli[1]


def test_scalpel_reg_without_a_target_is_a_user_error_because_it_regresses_by_default():
    with pytest.raises(UserError, match="regress needs a numeric target"):
        _config("ScalpelReg", target=None).validate()


def test_auto_model_with_a_target_regresses_and_a_named_classifier_keeps_its_task():
    # Before: --target with the default model trained a classifier on the label column, the target unread.
    auto = _config("auto").validate()
    assert (auto.training.task, auto.model.name, auto.data.label) == ("regress", "ScalpelMC", None)
    named = _config("ScalpelMC").validate()
    assert named.training.task == "classify"
    # ... and a named classifier given the target does not leave it unread either: refused.
    with pytest.raises(UserError, match="is a value to predict, and this run's task, classify, predicts labels"):
        _config("ScalpelMC", target="target").validate()
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
    assert "after epoch 3" in e.value.message and "--sparse-lr" in e.value.cli[1] and "sparse_lr" in e.value.hint
    check_finite(3, {"loss": 0.5}, {})               # finite, or no validation: nothing to say
    check_finite(3, {"loss": None}, {"loss": None})


def test_torchs_csr_beta_warning_is_not_shown_when_another_threads_catch_warnings_ends_during_a_build():
    """torch warns once a process that CSR tensors are "beta"; a ``catch_warnings`` around the
    build was undone when another thread's block, entered before it, ended while it built, and
    the warning reached the terminal in about one run in six. A fresh process: torch's once."""
    import subprocess
    import sys

    code = """if True:
        import warnings, torch
        from lancetnic_flow.models import sparse_input
        outer = warnings.catch_warnings()
        outer.__enter__()                        # another thread's block, begun first
        build = torch.sparse_csr_tensor
        def racing(*args, **kwargs):
            outer.__exit__(None, None, None)     # ... ends while this thread builds
            return build(*args, **kwargs)
        torch.sparse_csr_tensor = racing
        sparse_input.rows_plan(torch.tensor([3, 1, 3]), torch.tensor([0, 2]), torch.tensor([1.0, 2.0, 3.0]))
        print("built")
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "built", out.stderr
    assert "beta" not in out.stderr, out.stderr
