"""ui/tune_lines.py: the tune command's lines — its start, each trial (done
or failed, with the best so far), the result against the defaults — and the
table of the best trials, best first, the defaults' trial always shown."""
from __future__ import annotations

import io

from rich.console import Console

from lancetnic_flow.ui.tune_lines import options_text, trial_line, trials_table, tune_start_line, tuned_line


def test_the_start_line_names_the_space_the_monitor_the_slots_and_the_time():
    line = tune_start_line({"space": [{"name": "lr"}, {"name": "hidden"}], "monitor": "val_loss", "slots": 2,
                            "left": 125, "trials": 20})
    assert line == "tuning lr, hidden by val_loss: 2 trials at a time on the workers, 2m05s left, at most 20 trials"


def test_a_trial_line_gives_its_options_score_and_the_best_so_far_or_its_failure():
    base = {"monitor": "val_accuracy", "number": 3, "params": {"lr": 0.012345, "hidden": 64}, "left": 30}
    done = trial_line({**base, "state": "complete", "value": 0.91234, "best_epoch": 2, "epochs_run": 3,
                       "seconds": 4.21, "worker": "tcp://w1", "best_value": 0.92, "best_number": 1, "stopped": True})
    assert "val_accuracy 0.9123 (epoch 2 of 3) · 4.2s on tcp://w1 · cut at the deadline" in done
    assert done.startswith("trial 3  ") and "0.0123" in done and "hidden 64" in done
    assert "best 0.9200 (trial 1)" in done and done.endswith("30s left")
    failed = trial_line({**base, "state": "fail", "error": "out of memory", "defaults": True})
    assert "trial 3 (defaults)" in failed and "fail: out of memory" in failed and "no best yet" in failed


def test_the_tuned_line_compares_the_best_trial_with_the_defaults_and_names_the_final_run():
    line = tuned_line({"monitor": "val_loss", "seconds": 61, "trials": 8, "run": "runs/x", "final": 0.3,
                       "best": {"number": 5, "value": 0.31, "params": {"lr": 0.01}},
                       "defaults": {"number": 0, "value": 0.4}})
    first, second = line.splitlines()
    assert first == ("tuned in 1m01s, 8 trials: best trial 5 val_loss 0.3100 vs defaults (trial 0) 0.4000; "
                     "final run 0.3000 in runs/x")
    assert second == "best options  " + options_text({"lr": 0.01})


def test_a_label_set_tunes_final_line_says_where_its_figure_decides_and_what_the_saved_model_gives():
    """tune's final line gave a LinearSVM label-set run's micro-F1 at margin 0 (its epochs') as the run's,
    where the model it saved, at its per-label thresholds, gives far more: both are said now."""
    e = {"monitor": "val_micro_f1", "seconds": 5, "trials": 2, "run": "runs/x", "final": 0.5475,
         "best": {"number": 1, "value": 0.55, "params": {"lr": 0.01}}, "defaults": None,
         "decided_at": "margin 0", "at_thresholds": {"micro_f1": 0.768, "macro_f1": 0.7}}
    assert tuned_line(e).splitlines()[0].endswith(
        "final run 0.5475 (at margin 0; the saved model at its thresholds: micro-F1 0.7680) in runs/x")
    trial = trial_line({"monitor": "val_micro_f1", "number": 1, "params": {"lr": 0.01}, "left": 30, "state": "complete",
                        "value": 0.55, "best_epoch": 2, "epochs_run": 2, "seconds": 1.0, "worker": "w",
                        "decided_at": "margin 0"})
    assert "val_micro_f1 0.5500 at margin 0 (epoch 2 of 2)" in trial


def test_the_trials_table_lists_the_best_first_and_keeps_the_defaults_trial():
    trials = [{"number": i, "params": {"lr": 0.1 * (i + 1)}, "value": 1.0 - 0.1 * i, "score": 1.0 - 0.1 * i,
               "seconds": 3.0, "defaults": i == 0, "best": i == 4} for i in range(5)]
    trials.append({"number": 5, "params": {"lr": 0.9}, "value": None, "score": None, "seconds": 1.0})
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=False).print(trials_table(trials, "val_loss", limit=2))
    text = out.getvalue()
    # the title wraps at the table's width; it says the table holds the best only
    assert "(5 of 6 finished; the best 2 and the defaults shown, all in tune.json)" in " ".join(text.split())
    rows = [line.split() for line in text.splitlines()   # a trial's row: its number first, its seconds last
            if len(line.split()) >= 4 and line.split()[0].isdigit() and line.split()[-1].isdigit()]
    assert [r[0] for r in rows] == ["4", "3", "0"] and rows[0][1] == "best" and rows[-1][1] == "defaults"


def test_a_trials_table_of_every_trial_says_nothing_of_a_cut():
    trials = [{"number": i, "params": {"lr": 0.1 * (i + 1)}, "value": 1.0 - 0.1 * i, "score": 1.0 - 0.1 * i,
               "seconds": 3.0} for i in range(3)]
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=False).print(trials_table(trials, "val_loss", limit=10))
    assert "(3 of 3 finished)" in out.getvalue() and "shown" not in out.getvalue()
