"""scores.py: each validation score's key, its direction for monitoring, and
which --monitor fits which task."""
from __future__ import annotations

import pytest

from lancetnic_flow.scores import BY_KEY, MONITORS, SCORES, lower_is_better, monitor_fits, val_scores


def test_val_scores_rename_a_tasks_metrics_to_their_val_keys_with_none_where_absent():
    got = val_scores({"loss": 0.5, "accuracy": 0.9, "macro_precision": 0.7})
    assert got["val_loss"] == 0.5 and got["val_accuracy"] == 0.9 and got["val_precision"] == 0.7
    assert got["val_r2"] is None and set(got) == {s.key for s in SCORES}


def test_lower_is_better_turns_higher_is_better_scores_negative():
    scores = {"val_loss": 0.3, "val_accuracy": 0.8, "val_rmse": 2.0}
    assert lower_is_better(scores, "val_loss") == 0.3
    assert lower_is_better(scores, "val_accuracy") == -0.8
    assert lower_is_better(scores, "val_rmse") == 2.0
    assert lower_is_better(scores, "val_r2") is None


@pytest.mark.parametrize("monitor,task,fits", [
    ("val_loss", "regress", True), ("val_accuracy", "classify", True), ("val_accuracy", "regress", False),
    ("val_macro_f1", "multilabel", True), ("val_micro_f1", "classify", False), ("val_r2", "multitask", True),
    ("val_accuracy", "multitask", True), ("val_micro_f1", "multitask", False)])
def test_a_monitor_fits_the_tasks_that_produce_its_score(monitor, task, fits):
    assert monitor_fits(monitor, task) is fits


def test_monitors_are_the_loss_and_the_task_scores_only():
    assert "val_loss" in MONITORS and "val_precision" not in MONITORS and "val_baseline_rmse" not in MONITORS
    assert all(BY_KEY[m].key == m for m in MONITORS)


def test_a_runs_scores_hold_evaluates_weighted_and_micro_averages():
    """metrics.json lacked weighted_f1/precision/recall (and a label-set run's micro
    precision and recall), which evaluate --json gives on the same rows."""
    got = val_scores({"weighted_f1": 0.8, "weighted_precision": 0.9, "weighted_recall": 0.7,
                      "micro_precision": 0.6, "micro_recall": 0.5})
    assert (got["val_weighted_f1"], got["val_weighted_precision"], got["val_weighted_recall"]) == (0.8, 0.9, 0.7)
    assert (got["val_micro_precision"], got["val_micro_recall"]) == (0.6, 0.5)


def test_a_score_in_the_targets_units_is_never_shown_as_zero_for_a_target_in_small_units():
    # a target in units of 1e-6: its MAE 7.7e-07 read "0.0000" in the summary and evaluate's line
    mae, rmse, base = BY_KEY["val_mae"], BY_KEY["val_rmse"], BY_KEY["val_baseline_rmse"]
    assert [mae.shown(7.733e-07), rmse.shown(0.009639), base.shown(1.231e-06)] == ["7.733e-07", "0.009639", "1.231e-06"]
    assert [mae.shown(76.71557), rmse.shown(1.0), mae.shown(0.0)] == ["76.7156", "1.0000", "0.0000"]
    assert BY_KEY["val_accuracy"].shown(0.87201) == "0.8720" and BY_KEY["val_r2"].shown(0.36212) == "0.3621"
