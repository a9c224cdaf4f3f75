"""training/rules.py: the training rule is chosen from the model's spec, and
each rule trains: a batch step changes the weights the way its loss says."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from lancetnic_flow.config import DataConfig, ModelConfig, TrainConfig, TrainingConfig
from lancetnic_flow.features.rows import RowBlock
from lancetnic_flow.models import create_model
from lancetnic_flow.models.calibrate import calibrate
from lancetnic_flow.models.inputs import model_inputs
from lancetnic_flow.models.margin import has_twin
from lancetnic_flow.models.tasks import Task
from lancetnic_flow.registry import MODELS, ModelSpec
from lancetnic_flow.training.rules import GradientRule, HingeRule, rule_for
from lancetnic_flow.training.step import evaluate_blocks

CPU = torch.device("cpu")


def resolved(name: str, **training) -> TrainConfig:
    return TrainConfig(data=DataConfig(train=["x.csv"]), model=ModelConfig(name=name),
                       training=TrainingConfig(**training)).validate()


def separable(n: int = 240, dim: int = 30, classes: int = 3, seed: int = 0) -> RowBlock:
    """Rows whose first term names their class: a linear model learns them."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n).astype(np.int32)
    noise = rng.integers(classes, dim, (n, 3))
    indices = np.concatenate([labels[:, None], noise], axis=1).astype(np.int32).ravel()
    offsets = np.arange(0, 4 * n + 1, 4, dtype=np.int64)
    return RowBlock(indices, offsets, np.ones(4 * n, np.float32), labels)


def model_for(cfg: TrainConfig, dim: int = 30, classes: int = 3):
    m = cfg.model
    model, _ = create_model(m.name, dim=dim, classes=classes, regress=False, hidden=m.hidden, layers=m.layers,
                            dropout=m.dropout, embed=m.embed, numeric=0)
    return model


def test_the_rule_comes_from_the_models_spec():
    assert isinstance(rule_for(resolved("LinearSVM")), HingeRule)
    assert isinstance(rule_for(resolved("auto")), HingeRule)
    for name in ("ScalpelMC", "FastTextBag", "LancetMC"):
        assert isinstance(rule_for(resolved(name)), GradientRule), name


def test_a_registered_model_with_the_hinge_rule_gets_the_hinge_step(monkeypatch):
    monkeypatch.setitem(MODELS, "MyLinear", ModelSpec("ScalpelNet", {"margin": True}, tasks=("classify",),
                                                      rule="hinge", sparse_optimizer=None, sparse_lr=0.2,
                                                      sets={"model.layers": 0}, label_sets=False))
    assert isinstance(rule_for(resolved("MyLinear")), HingeRule)


@pytest.mark.parametrize("name", ["LinearSVM", "ScalpelMC"])
def test_each_rules_batch_steps_move_the_weights_and_learn_a_separable_block(name):
    cfg = resolved(name, learn_val=False) if name == "LinearSVM" else resolved(name)
    torch.manual_seed(0)
    model, rule = model_for(cfg), rule_for(cfg)
    task = Task("classify", classes=3, class_loss=cfg.training.class_loss, device=CPU)
    opts = rule.optimizers(model)
    block = separable()
    before = model.input.weight.detach().clone()
    start = evaluate_blocks(model, [block], task, CPU).result()["accuracy"]
    for _ in range(5):
        for i in range(0, len(block), 32):
            rule.train_batch(model, task, opts, block.slice(i, i + 32), CPU, cfg.training.lr)
    assert not torch.equal(before, model.input.weight.detach())   # a rule that never steps fails here
    assert evaluate_blocks(model, [block], task, CPU).result()["accuracy"] > max(0.9, start)


def test_the_hinge_steps_rate_is_the_sparse_rate_at_the_schedules_share_of_lr():
    cfg = resolved("LinearSVM", learn_val=False, lr=0.01, sparse_lr=0.3)
    rule = rule_for(cfg)
    assert rule.scale == pytest.approx(30.0) and rule.optimizers(None) == []


def test_the_twin_learns_the_validation_rows_and_becomes_the_saved_model():
    cfg = resolved("LinearSVM", learn_val=True)
    model, rule = model_for(cfg), rule_for(cfg)
    rule.prepare(model)
    assert has_twin(model)
    task = Task("classify", classes=3, class_loss="hinge", device=CPU)
    train, val = separable(seed=1), separable(seed=2)
    rule.train_batch(model, task, [], train, CPU, cfg.training.lr)
    hook = rule.while_validating(model, cfg.training.lr, seed=0, epoch=0)
    evaluate_blocks(model, [val], task, CPU, then=hook)
    model_w, twin_w = model.input.weight.detach().clone(), model.state_dict()["twin_weight"].clone()
    assert not torch.equal(model_w, twin_w)          # the twin saw rows the model never did
    assert calibrate(model, [val], scale=rule.scales_logits).scale != 1.0   # on the model's own scores
    assert float(model.logit_scale) != 1.0 and has_twin(model)
    rule.finish(model)
    assert not has_twin(model)
    assert torch.equal(model.input.weight.detach(), twin_w)


def test_gradient_rules_keep_the_best_epoch_and_the_hinge_rule_the_last_without_early_stopping():
    assert rule_for(resolved("ScalpelMC")).keeps_last_epoch() is False
    assert rule_for(resolved("LinearSVM")).keeps_last_epoch() is True
    assert rule_for(resolved("LinearSVM", early_stopping=2)).keeps_last_epoch() is False


def test_memory_facts_follow_the_rule_and_its_options():
    sgd, adam = rule_for(resolved("ScalpelMC")), rule_for(resolved("ScalpelMC", sparse_optimizer="adam"))
    assert sgd.weight_copies() < adam.weight_copies()
    twin, alone = rule_for(resolved("LinearSVM", learn_val=True)), rule_for(resolved("LinearSVM", learn_val=False))
    assert twin.weight_copies() == pytest.approx(2 * alone.weight_copies())
    assert twin.extra_bytes() > 0 and sgd.extra_bytes() == 0


def test_a_checkpoint_says_whether_a_resumed_run_learns_the_validation_rows():
    """The twin in the checkpoint's weights decides, whatever config.json's learn_val (a plan
    without room for the twin decided against it at the start; an older version had none)."""
    for learn_val in (True, False, None):
        rule = rule_for(resolved("LinearSVM", learn_val=learn_val))
        assert rule.resume_options({"input.weight": None}) == {"learn_val": False}
        assert rule.resume_options({"input.weight": None, "twin_weight": None}) == {"learn_val": True}
    assert rule_for(resolved("ScalpelMC")).resume_options({}) == {}


def test_an_epochs_record_names_the_rate_the_rule_steps_at():
    """LinearSVM steps at --sparse-lr's share of the schedule; its history named --lr's,
    a rate it has not (0.0067 where it stepped at 0.2). A gradient rule's is --lr's."""
    hinge = HingeRule(resolved("LinearSVM", lr=0.01, sparse_lr=0.3).training)
    assert hinge.rate(0.01 * 2 / 3) == pytest.approx(0.2)
    gradient = rule_for(resolved("ScalpelMC", lr=0.02))
    assert gradient.rate(0.015) == 0.015


def test_the_validation_loss_is_the_plain_loss_whatever_the_class_weights():
    """--class-weights steer training; the validation loss (history, --monitor val_loss) is
    evaluate's plain cross-entropy: a weighted one matched no report."""
    cfg = resolved("ScalpelMC")
    torch.manual_seed(0)
    model, block = model_for(cfg), separable()
    plain = evaluate_blocks(model, [block], Task(classes=3), CPU).result()["loss"]
    weighted = Task(classes=3, class_weights=torch.tensor([5.0, 0.2, 1.0]))
    assert evaluate_blocks(model, [block], weighted, CPU).result()["loss"] == pytest.approx(plain, rel=1e-6)
    with torch.no_grad():   # the weights do change the training loss of the same rows
        trained = weighted.loss(model(**model_inputs(block, CPU)), torch.as_tensor(block.labels, dtype=torch.long),
                                None).item()
    assert trained != pytest.approx(plain, rel=1e-3)


def test_sparse_sgd_moves_a_value_heads_row_by_sparse_lr_per_example_of_a_batch_shorter_than_batch_size():
    """A data set smaller than a batch (and an epoch's last batch) is the mean loss of its own
    rows: each example moves a row it uses by --sparse-lr, not by --batch-size / rows times that
    (60 rows at the default 512 stepped 8.5x too far, and a tiny regression trained to nonsense).
    A class head's step keeps the batch size's scale: its gradient is bounded."""
    tc = TrainingConfig(batch_size=512, optimizer="adam", sparse_optimizer="sgd", sparse_lr=0.5, lr=0.01)
    rule = GradientRule(tc)
    for regress, scale in ((True, 6), (False, 512)):
        torch.manual_seed(0)
        model, _ = create_model("ScalpelReg", dim=30, classes=0 if regress else 3, regress=regress, hidden=8,
                                layers=1, dropout=0.0, embed=None, numeric=0)
        block = separable(n=6)
        block.values = np.full(len(block.indices), 0.1, np.float32)   # rows under the value head's cut
        block.targets = np.linspace(-1, 1, 6).astype(np.float32)
        opts = rule.optimizers(model)
        model.input.started(torch.arange(30))   # rows at their starting values before the step is read
        before = model.input.weight.detach().clone()
        rule.backward(model, Task(kind="regress" if regress else "classify", classes=0 if regress else 3), opts,
                      block, CPU)
        used, rows = model.input.active
        grad = rows.grad.clone()
        rule.update(opts, model, tc.lr)
        torch.testing.assert_close(model.input.weight.detach()[used], before[used] - 0.5 * scale * grad)


def test_a_value_heads_input_rows_step_cut_where_many_examples_share_them_a_classifiers_not():
    """Per-example SGD sums a batch's steps of a shared row; a squared error's gradient grows
    with the error, so a value head's rows are cut (optim.VALUE_ROW_CAP), a class head's are not."""
    from lancetnic_flow.training.optim import VALUE_ROW_CAP

    rule = GradientRule(TrainingConfig(optimizer="adam", sparse_optimizer="sgd", sparse_lr=1.0))
    for regress, cap in ((True, VALUE_ROW_CAP), (False, None)):
        model, _ = create_model("ScalpelReg", dim=30, classes=0 if regress else 3, regress=regress, hidden=8,
                                layers=1, dropout=0.0, embed=None, numeric=0)
        assert rule.optimizers(model)[0].cap == cap and model.input.weighs_rows is regress
