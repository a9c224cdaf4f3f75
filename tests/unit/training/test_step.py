"""training/step.py: the learning-rate schedule a run steps by."""
from __future__ import annotations

import pytest

from lancetnic_flow.config import DataConfig, ModelConfig, TrainConfig, TrainingConfig
from lancetnic_flow.registry import MODELS
from lancetnic_flow.resolve import resolve
from lancetnic_flow.training.rules import rule_for
from lancetnic_flow.training.step import lr_schedule


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
