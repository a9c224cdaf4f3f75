"""ui/dashboard/summary.py: the final summary shows the scores, rows, times,
memory, the run and how to predict with it, within the width."""
from __future__ import annotations

from rich.cells import cell_len

from lancetnic_flow.ui.dashboard import render_summary

from ..events import GiB, MiB, PLAN, record


def test_summary_has_metrics_rows_time_memory_run_and_predict():
    metrics = {"val_accuracy": 0.9078, "val_macro_f1": 0.9057, "val_loss": 0.3252, "best_epoch": 1,
               "monitor": "val_loss", "model": "ScalpelMC", "vocabulary": 19_951,
               "rows": {"read": 60_000, "trained": 53_900, "validated": 5_973, "skipped": {"empty_text": 120,
                                                                                          "malformed": 7}},
               "stage_seconds": {"cluster_start": 4.2, "fit": 10.1, "train": 16.5, "save": 2.0}, "seconds": 33.0,
               "epochs": [{}, {}],
               "memory": {"budget_bytes": 6 * GiB, "trainer_peak_rss_bytes": 436 * MiB,
                          "workers_peak_bytes": 900 * MiB, "plan": PLAN}}
    for width in (80, 200):
        text, _ = record(render_summary({"run": "/runs/20260101-000000", "metrics": metrics}, width), width)
        for needle in ("training finished", "accuracy", "0.9078", "macro-F1", "read", "60,000", "trained",
                       "validated", "skipped", "empty_text", "malformed", "cluster start", "fit", "train",
                       "save", "total", "33.0s", "peak memory", "trainer", "436M", "57% of its 768M",
                       "workers", "900M", "budget", "6.0G", "run      /runs/20260101-000000",
                       "lancetnic-flow predict /runs/20260101-000000 --text '...'"):
            assert needle in text, (width, needle, text)
        assert all(cell_len(line) <= width for line in text.splitlines())


def test_summary_of_a_run_featurised_in_process_has_no_workers_row():
    from lancetnic_flow.dataflow.plan import plan_in_process, plan_memory

    plan = plan_in_process(plan_memory(6 * GiB, workers=2), 2).to_dict()
    metrics = {"val_accuracy": 0.9, "rows": {"read": 1000, "trained": 900, "validated": 100, "skipped": {}},
               "stage_seconds": {"cluster_start": 0.0, "fit": 0.4, "train": 0.6, "save": 0.4}, "seconds": 1.6,
               "epochs": [{}], "memory": {"budget_bytes": 6 * GiB, "trainer_peak_rss_bytes": 436 * MiB,
                                          "workers_peak_bytes": 0, "plan": plan}}
    text, _ = record(render_summary({"run": "/runs/r", "metrics": metrics}, 100), 100)
    assert "trainer" in text and "436M" in text
    assert not any(line.strip().startswith("workers") for line in text.splitlines())


def test_the_features_line_of_a_regression_names_no_classes():
    from lancetnic_flow.ui.dashboard.summary import fitted_line

    reg = {"vocabulary": 524_288, "labels": 0, "docs": 54_043, "seconds": 4.0}
    assert fitted_line(reg) == "features  524,288 inputs · 54,043 training rows (in 4.0s)"
    assert "· 4 classes ·" in fitted_line({**reg, "labels": 4})


def test_a_resumed_runs_summary_says_its_time_is_this_commands_from_the_epoch_it_resumed_in():
    metrics = {"val_loss": 0.36, "rows": {"read": 100, "trained": 90, "validated": 10, "skipped": {}},
               "stage_seconds": {"train": 12.0}, "seconds": 13.0, "epochs": [{}, {}, {}],
               "resumed": {"epoch": 2, "batches": 216}}
    text, _ = record(render_summary({"run": "/runs/r", "metrics": metrics}, 200), 200)
    assert "13.0s  3 epochs, this command's from epoch 2 (resumed)" in text
    del metrics["resumed"]
    text, _ = record(render_summary({"run": "/runs/r", "metrics": metrics}, 200), 200)
    assert "13.0s  3 epochs" in text and "resumed" not in text
    metrics["epochs"] = [{}]   # said "1 epoch(s)"
    text, _ = record(render_summary({"run": "/runs/r", "metrics": metrics}, 200), 200)
    assert "13.0s  1 epoch " in text


def test_the_workers_peak_of_a_cluster_of_different_limits_is_a_share_of_their_total():
    from lancetnic_flow.dataflow.plan import plan_for_workers

    workers = [{"memory_limit": 4 * GiB}, {"memory_limit": 700 * MiB}, {"memory_limit": 4 * GiB}]
    plan = plan_for_workers(workers, trainer=768 * MiB).to_dict()
    metrics = {"val_loss": 0.3, "rows": {"read": 1, "trained": 1, "validated": 0, "skipped": {}},
               "memory": {"trainer_peak_rss_bytes": 527 * MiB, "workers_peak_bytes": 1229 * MiB, "plan": plan}}
    text, _ = record(render_summary({"run": "/runs/r", "metrics": metrics}, 200), 200)
    assert "14% of 8.7G (3 workers)" in text and "3 × 700M" not in text


def test_the_budget_used_at_peak_is_the_peak_of_trainer_and_workers_together():
    memory = {"budget_bytes": 10 * GiB, "trainer_peak_rss_bytes": 2 * GiB, "workers_peak_bytes": 5 * GiB,
              "peak_rss_bytes": 6 * GiB, "plan": PLAN}   # the two peaks came at different times
    metrics = {"val_loss": 0.3, "rows": {"read": 1, "trained": 1, "validated": 0, "skipped": {}}, "memory": memory}
    text, _ = record(render_summary({"run": "/runs/r", "metrics": metrics}, 200), 200)
    assert "60% used at peak" in text and "70% used at peak" not in text


def test_the_status_line_says_100_percent_only_at_an_epochs_last_row():
    from lancetnic_flow.ui.dashboard import DashboardState
    from lancetnic_flow.ui.dashboard.summary import status_line

    s = DashboardState(clock=lambda: 1.0)
    s.update("stage", {"t": 0.0, "stage": "training", "epoch": 1, "epochs": 2, "total_rows": 54_043})
    s.update("batch", {"t": 0.5, "epoch": 1, "rows": 53_900, "total_rows": 54_043, "loss": 0.4, "tokens": 10})
    assert "rows 53,900/54,043 (99%)" in status_line(s)
    s.update("batch", {"t": 0.6, "epoch": 1, "rows": 54_043, "total_rows": 54_043, "loss": 0.4, "tokens": 10})
    assert "rows 54,043/54,043 (100%)" in status_line(s)


def test_a_label_set_runs_summary_leads_with_the_saved_models_figures_and_says_where_the_epochs_decide():
    """A LinearSVM multi-label run's summary led with micro-F1 0.45 (its epochs' figures, at margin 0)
    where the saved model, at its per-label thresholds, gives 0.77 (a line further down): the saved
    model's figures now come first, and every epoch figure says the margin it decides at."""
    metrics = {"val_micro_f1": 0.5021, "val_subset_accuracy": 0.31, "val_loss": 0.9, "val_decided_at": "margin 0",
               "rows": {"read": 10}, "memory": {"plan": PLAN},
               "val_at_thresholds": {"micro_f1": 0.7674, "macro_f1": 0.6, "subset_accuracy": 0.4512, "rows": 900}}
    text, _ = record(render_summary({"run": "/runs/r", "metrics": metrics}, 120), 120)
    import re

    lines = [x for x in text.splitlines() if re.search(r"[0-9]\.[0-9]{4}", x)]
    assert re.search(r"micro-F1 at the saved thresholds +0\.7674", lines[0]), text
    assert re.search(r"macro-F1 at the saved thresholds +0\.6000", lines[1]), text
    assert re.search(r"subset accuracy at the saved thresholds +0\.4512", lines[2]), text
    assert re.search(r"micro-F1 at margin 0 +0\.5021", text) and re.search(r"\bloss +0\.9000", text), text
    del metrics["val_decided_at"], metrics["val_at_thresholds"]   # a run of one label a row: as it was
    text, _ = record(render_summary({"run": "/runs/r", "metrics": metrics}, 120), 120)
    assert re.search(r"micro-F1 +0\.5021", text) and "thresholds" not in text and "margin" not in text, text


def test_a_label_set_runs_epoch_line_says_where_its_figures_decide_a_label():
    from lancetnic_flow.ui.dashboard.summary import epoch_line

    e = {"epoch": 2, "train_loss": 0.5, "val_loss": 0.4, "val_micro_f1": 0.45, "val_decided_at": "margin 0"}
    assert epoch_line(e) == "epoch 2  train loss 0.5000 · val loss 0.4000 · µF1 0.4500 · at margin 0"
    del e["val_decided_at"]
    assert epoch_line(e) == "epoch 2  train loss 0.5000 · val loss 0.4000 · µF1 0.4500"


def test_a_continued_run_that_kept_its_start_says_so_not_a_best_epoch():
    metrics = {"val_loss": 0.73, "best_epoch": 0, "kept": "start", "monitor": "val_loss", "rows": {"read": 10},
               "memory": {"plan": PLAN}}
    text, _ = record(render_summary({"run": "/runs/r", "metrics": metrics}, 120), 120)
    assert "its start (no epoch beat it)" in text and "best epoch" not in text, text


def test_a_regression_on_a_target_in_small_units_shows_its_errors_not_zero():
    # MAE 7.7e-07, RMSE 9.7e-07: the summary said "MAE 0.0000", "RMSE 0.0000", "baseline RMSE 0.0000"
    metrics = {"val_mae": 7.733e-07, "val_rmse": 9.72e-07, "val_baseline_rmse": 1.231e-06, "val_r2": 0.377,
               "val_loss": 0.65, "rows": {"read": 100, "trained": 90, "validated": 10, "skipped": {}},
               "stage_seconds": {"train": 1.0}, "seconds": 1.0, "epochs": [{}]}
    text, _ = record(render_summary({"run": "/runs/r", "metrics": metrics}, 120), 120)
    assert "7.733e-07" in text and "9.72e-07" in text and "1.231e-06" in text and "0.0000" not in text


def test_the_summarys_times_add_up_to_its_total():
    metrics = {"val_loss": 0.88, "rows": {"read": 100, "trained": 90, "validated": 10, "skipped": {}},
               "stage_seconds": {"cluster_start": 0.0, "fit": 2.8, "train": 4.5, "save": 1.7}, "seconds": 19.0,
               "epochs": [{}, {}]}
    text, _ = record(render_summary({"run": "/runs/r", "metrics": metrics}, 200), 200)
    assert "other" in text and "10.0s" in text   # starting and planning: a third of the run, unnamed
    metrics["stage_seconds"] = {"cluster_start": 4.2, "fit": 10.1, "train": 16.5, "save": 2.2}
    metrics["seconds"] = 33.0
    text, _ = record(render_summary({"run": "/runs/r", "metrics": metrics}, 200), 200)
    assert "other" not in text   # nothing left to name


def test_a_run_in_an_estimators_temporary_folder_names_the_estimators_calls_not_a_command_on_its_path():
    """A Python fit without `out` was told `predict  lancetnic-flow predict /tmp/lancetnic-flow-runs-…`:
    that folder goes with the estimator, so the command, followed, found no run."""
    import os
    import shutil

    from lancetnic_flow.temporary_runs import new_temporary_parent

    parent = new_temporary_parent()
    try:
        run = os.path.join(parent, "20260101-000000")
        text, _ = record(render_summary({"run": run, "metrics": {"rows": {}}}, 200), 200)
    finally:
        shutil.rmtree(parent)
    assert "(temporary: it goes with the estimator; its save(PATH) keeps a copy)" in text
    assert "predict  the estimator's predict(texts), or lancetnic-flow predict PATH after its save(PATH)" in text
    assert f"lancetnic-flow predict {run}" not in text


def test_a_long_run_path_and_its_predict_command_print_whole_on_one_line_each():
    """`--out` deep in a project cut the footer at the width: `lancetnic-flow predict` on one
    line and `…/linear-svm-firs` `t-try --text '...'` on the next two, copied as a wrong path."""
    import io

    from rich.console import Console

    from lancetnic_flow.ui.dashboard.summary import print_summary

    run = "/home/me/experiments/customer-reviews/baseline-models/linear-svm-first-try"
    c = Console(record=True, force_terminal=True, width=60, color_system="truecolor", file=io.StringIO())
    print_summary(c, {"run": run, "metrics": {"rows": {}}})
    lines = c.export_text().splitlines()
    assert f"run      {run}" in lines
    assert f"predict  lancetnic-flow predict {run} --text '...'" in lines
    assert all(cell_len(line) <= 60 for line in lines if not line.startswith(("run ", "predict ")))
