"""training/step.py: the learning-rate schedule a run steps by; validation figures that
count a validation row's labels training never had, as evaluate does."""
from __future__ import annotations

import numpy as np
import pytest

from lancetnic_flow.config import DataConfig, ModelConfig, TrainConfig, TrainingConfig
from lancetnic_flow.registry import MODELS
from lancetnic_flow.resolve import resolve
from lancetnic_flow.training.rules import rule_for
from lancetnic_flow.features.rows import RowBlock
from lancetnic_flow.training import step as steps
from lancetnic_flow.training.step import kept_steps, lr_schedule, schedule_start


def test_the_linear_schedule_decays_to_5_percent_over_the_run():
    rate = lr_schedule("linear", 0.01, 100)
    assert rate(0) == pytest.approx(0.01)
    assert rate(50) == pytest.approx(0.005)
    assert rate(99) == pytest.approx(0.0005)


def test_a_run_shorter_than_the_models_decay_steps_keeps_most_of_its_rate():
    # 168 steps: 12,000 rows, batches of 128, 2 epochs
    short = lr_schedule("linear", 0.01, 168, decay_steps=1000)
    assert short(167) == pytest.approx(0.01 * (1 - 167 / 1000))
    # a run longer than the decay steps decays over itself, as without them
    long = lr_schedule("linear", 0.01, 5000, decay_steps=1000)
    assert long(4999) == pytest.approx(0.0005)
    assert lr_schedule("constant", 0.01, 168, decay_steps=1000)(167) == 0.01


@pytest.mark.parametrize("name,steps", [("LancetMC", 1000), ("LancetMCA_gru", 1000), ("LancetReg", 0),
                                        ("LinearSVM", 0), ("ScalpelMC", 0)])
def test_each_models_rule_carries_its_specs_decay_steps(name, steps):
    target = "y" if "regress" in MODELS[name].tasks[:1] else None   # a classifier refuses a target it would not read
    cfg = resolve(TrainConfig(data=DataConfig(train=["x.csv"], target=target), model=ModelConfig(name=name),
                              training=TrainingConfig()))
    assert rule_for(cfg).decay_steps == steps


def test_an_epoch_continued_from_a_checkpoint_reports_the_whole_epochs_seconds_and_rows_per_second():
    from lancetnic_flow.training.step import EpochClock

    clock = EpochClock(rows=6000, seconds=30.0)   # trained before the checkpoint
    clock.rows += 6000                            # and after the resume, in far less time
    clock.stop()
    assert clock.seconds >= 30.0
    assert clock.rate() == pytest.approx(12000 / clock.seconds) and clock.rate() <= 400


def test_validation_figures_count_every_label_of_a_row_as_evaluate_and_scikit_learn_do():
    """A validation row's labels that training never had (the blocks' ``missed``) are each a
    false negative, and such a row is no exact match: an epoch's figures, and those at the
    saved thresholds, are scikit-learn's over the training labels and the new ones together."""
    import torch
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score
    from sklearn.preprocessing import MultiLabelBinarizer

    from lancetnic_flow.models import create_model
    from lancetnic_flow.models.calibrate import calibrate
    from lancetnic_flow.models.tasks import Task

    names, new = ["a", "b", "c"], ["new1", "new2"]
    model, _ = create_model("LinearSVM", dim=20, classes=3, regress=False, hidden=64, layers=0, dropout=0.0,
                            embed=8, numeric=0)
    with torch.no_grad():
        model.input.weight.copy_(torch.randn(20, 3, generator=torch.Generator().manual_seed(0)))
    rng = np.random.default_rng(3)
    sets = [set(rng.choice(names + new, int(rng.integers(1, 4)))) for _ in range(200)]
    blocks = []
    for part in (sets[:120], sets[120:]):   # two shards, each naming its own rows' new labels
        n = len(part)
        b = RowBlock(rng.integers(0, 20, 3 * n).astype(np.int32), np.arange(0, 3 * n + 1, 3, dtype=np.int64),
                     np.ones(3 * n, np.float32), np.array([[x in s for x in names] for s in part], np.uint8))
        b.set_missed(np.array([len(s - set(names)) for s in part]),
                     {x: sum(x in s for s in part) for x in new if any(x in s for s in part)})
        blocks.append(b)
    logits = np.concatenate([steps.outputs_of(model, b, "cpu")["logits"].detach().numpy() for b in blocks])
    mlb = MultiLabelBinarizer(classes=names + new).fit([names + new])
    truth = mlb.transform(sets)

    def sk(pred: np.ndarray) -> dict:
        p = np.concatenate([pred, np.zeros((len(pred), len(new)), int)], 1)
        seen = [i for i in range(len(names + new)) if truth[:, i].any() or p[:, i].any()]
        return {"micro_f1": f1_score(truth, p, average="micro", zero_division=0),
                "micro_precision": precision_score(truth, p, average="micro", zero_division=0),
                "micro_recall": recall_score(truth, p, average="micro", zero_division=0),
                "macro_f1": f1_score(truth, p, average="macro", labels=seen, zero_division=0),
                "weighted_f1": f1_score(truth, p, average="weighted", labels=seen, zero_division=0),
                "subset_accuracy": accuracy_score(truth, p)}

    got = steps.evaluate_blocks(model, blocks, Task("multilabel", classes=3), "cpu", batch_size=50).result()
    for key, value in sk((logits >= 0).astype(int)).items():
        assert got[key] == pytest.approx(value), key
    assert got["rows"] == 200 and got["unseen_labels"] == {x: sum(x in s for s in sets) for x in new}
    at = calibrate(model, blocks, scale=True)
    proba = 1 / (1 + np.exp(-logits.astype(np.float64) * at.scale))
    assert at.rows == 200   # a row whose every label is new is scored too
    for key, value in sk((proba >= at.thresholds).astype(int)).items():
        if key in at.at_thresholds:
            assert at.at_thresholds[key] == pytest.approx(value, abs=2e-6), key


def test_a_diverged_runs_error_names_the_learning_rates_as_each_caller_typed_them():
    """train(cfg) and the estimators were told to lower `--lr`, `--sparse-lr` and to give `--clip-grad`."""
    import pytest

    from lancetnic_flow.errors import UserError
    from lancetnic_flow.training.step import check_finite

    with pytest.raises(UserError) as e:
        check_finite(3, {"loss": float("nan")}, {})
    assert "(lr, and sparse_lr for the input rows), or clip the gradient with clip_grad 1.0" in e.value.hint
    assert "(--lr, and --sparse-lr for the input rows)" in e.value.cli[1] and "--clip-grad 1.0" in e.value.cli[1]


def test_a_continued_runs_linear_schedule_goes_on_from_the_steps_its_weights_took():
    # 300 steps before, 100 now: one run of 400 steps would be at 75 % when this one starts
    rate = lr_schedule("linear", 0.01, 100, start=300)
    assert rate(0) == pytest.approx(0.01 * (1 - 300 / 400))
    assert rate(99) == pytest.approx(0.0005)   # the floor, as a run of its own ends
    assert lr_schedule("constant", 0.01, 100, start=300)(0) == 0.01


def test_the_steps_a_run_saved_are_read_from_model_json_else_from_its_kept_epochs():
    assert schedule_start({"steps": 120}, {}, {}) == 120
    # saved before model.json kept them: each epoch's rows over the batch size, up to the epoch kept
    metrics = {"epochs": [{"rows": 1000}, {"rows": 1000}, {"rows": 1000}], "best_epoch": 2}
    assert schedule_start({}, metrics, {"training": {"batch_size": 64}}) == 2 * 16
    assert schedule_start({}, {**metrics, "best_epoch": 0}, {"training": {"batch_size": 64}}) == 0
    assert schedule_start({}, {}, {}) == 0


def test_kept_steps_counts_every_epoch_when_no_epoch_was_kept():
    assert kept_steps([{"rows": 130}, {"rows": 130}], None, 64) == 6


def test_a_label_set_epochs_record_says_where_its_figures_decide_a_label_and_a_class_epochs_says_nothing():
    """The epochs of a multi-label run are scored at margin 0 (probability 0.5), the saved model at its
    per-label thresholds: the record (epoch lines, history.csv, metrics.json) now says which."""
    from lancetnic_flow.models.tasks import Task
    from lancetnic_flow.training.step import EpochClock, decided_at, epoch_record

    assert decided_at(Task(kind="multilabel", classes=3, class_loss="hinge")) == "margin 0"
    assert decided_at(Task(kind="multilabel", classes=3)) == "probability 0.5"
    assert decided_at(Task(kind="classify", classes=3, class_loss="hinge")) is None
    train = Task(kind="multilabel", classes=2).new_metrics()
    record = epoch_record(1, train, {"loss": 0.5, "micro_f1": 0.4}, EpochClock(), 0.1, "margin 0")
    assert record["val_decided_at"] == "margin 0" and record["val_micro_f1"] == 0.4
    assert "val_decided_at" not in epoch_record(1, train, {}, EpochClock(), 0.1, "margin 0")   # no validation


def test_a_regression_no_better_than_its_mean_is_warned_by_validation_r2_else_its_last_training_loss():
    """A regression that diverged to a constant (or learnt nothing) reported success in silence:
    R² of 0 or less on the validation rows, or without them a last epoch's squared error on the
    standardised target at or past the mean's 1, is said; a run that does better, or a classifier, is not."""
    from lancetnic_flow.models.tasks import Task
    from lancetnic_flow.training.step import no_better_than_the_mean

    reg = Task(kind="regress")
    assert "R² -0.0034 on the validation rows" in no_better_than_the_mean(reg, {"r2": -0.0034}, [])
    assert no_better_than_the_mean(reg, {"r2": 0.0}, []) is not None
    assert no_better_than_the_mean(reg, {"r2": 0.31}, [{"train_loss": 5.0}]) is None
    said = no_better_than_the_mean(reg, {}, [{"train_loss": 0.2}, {"train_loss": 1.0032}])
    assert "1.0032" in said and "the mean scores 1" in said
    assert no_better_than_the_mean(reg, {}, [{"train_loss": 0.09}]) is None
    assert no_better_than_the_mean(Task(kind="regress", value_loss="l1"), {}, [{"train_loss": 3.0}]) is None
    assert no_better_than_the_mean(Task(kind="multitask", classes=3), {"r2": -1.0}, []) is not None
    assert no_better_than_the_mean(Task(kind="classify", classes=3), {"r2": -1.0}, [{"train_loss": 9.0}]) is None


def test_a_constant_target_is_said_as_the_value_every_text_gets_not_as_a_failure_to_beat_the_mean():
    from lancetnic_flow.models.tasks import Task
    from lancetnic_flow.training.step import constant_target, no_better_than_the_mean

    const = Task(kind="regress", target=(3.0, 0.0))
    said = constant_target(const)
    assert "every training row's target is 3," in said and "predicts 3 for every text" in said
    assert "R² is not defined" in said
    assert no_better_than_the_mean(const, {}, [{"train_loss": 0.0}]) is None
    assert constant_target(Task(kind="regress", target=(3.0, 1.5))) is None
    assert constant_target(Task(kind="classify", classes=2, target=(0.0, 0.0))) is None


def test_an_epoch_scored_on_fewer_rows_than_the_floor_is_kept_whatever_its_score_and_nothing_goes_stale():
    """Five validation rows (a 50-row file's tenth) stopped a run after two epochs that scored a
    row worse and saved the epoch they picked; below the floor every epoch is kept as it comes
    (no weight copy: the last epoch's weights are the model's), so none stops and the last is saved."""
    import torch

    from lancetnic_flow.models.tasks import Task
    from lancetnic_flow.training.step import CHOOSING_ROWS, keep_best

    model = torch.nn.Linear(2, 2)
    scored = Task(kind="classify", classes=2).new_metrics()
    best, stale = keep_best(None, 0, {"loss": 0.5, "rows": 5}, scored, model, 1, "val_loss", floor=CHOOSING_ROWS)
    best, stale = keep_best(best, stale, {"loss": 0.9, "rows": 5}, scored, model, 2, "val_loss", floor=CHOOSING_ROWS)
    assert (best["epoch"], best["few"], stale) == (2, 5, 0) and "state" not in best
    # A continued run's starting weights (epoch 0) give way only to an epoch that beats them.
    start, _ = keep_best(None, 0, {"loss": 0.5, "rows": 5}, scored, model, 0, "val_loss")
    kept, stale = keep_best(start, 0, {"loss": 0.9, "rows": 5}, scored, model, 1, "val_loss", floor=CHOOSING_ROWS)
    assert (kept["epoch"], stale) == (0, 1)
    kept, stale = keep_best(kept, stale, {"loss": 0.4, "rows": 5}, scored, model, 2, "val_loss", floor=CHOOSING_ROWS)
    kept, stale = keep_best(kept, stale, {"loss": 0.45, "rows": 5}, scored, model, 3, "val_loss", floor=CHOOSING_ROWS)
    assert (kept["epoch"], kept["few"], stale) == (3, 5, 0)
    # Enough rows, or no floor (a typed patience): the best epoch, its weights copied, the worse one stale.
    for rows, floor in ((CHOOSING_ROWS, CHOOSING_ROWS), (5, 0)):
        best, stale = keep_best(None, 0, {"loss": 0.5, "rows": rows}, scored, model, 1, "val_loss", floor=floor)
        best, stale = keep_best(best, stale, {"loss": 0.9, "rows": rows}, scored, model, 2, "val_loss", floor=floor)
        assert (best["epoch"], stale) == (1, 1) and "few" not in best and "state" in best
