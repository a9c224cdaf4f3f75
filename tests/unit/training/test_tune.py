"""training/tune.py: a search that could score no trial is refused before any work."""
from __future__ import annotations

import pytest

from lancetnic_flow.config import DataConfig, TrainConfig
from lancetnic_flow.errors import UserError
from lancetnic_flow.training.tune import tune


def test_tune_without_validation_rows_is_refused_up_front_not_blamed_on_the_time_budget():
    # every trial "failed: stopped by the deadline", then "raise --time-budget": none could be scored
    cfg = TrainConfig(data=DataConfig(train=["x.csv"], val_fraction=0.0))
    with pytest.raises(UserError, match="tune scores each trial on validation rows") as e:
        tune(cfg, time_budget=1, trials=1)
    assert e.value.cli[0].startswith("tune scores") and "--val FILE" in e.value.cli[1]


def test_a_search_whose_trials_all_failed_names_the_failure_not_the_time_budget():
    from lancetnic_flow.training.tune import no_trial_finished

    failed = {"number": 0, "state": "failed", "error": "RuntimeError: worker lost", "seconds": None}
    stopped = {"number": 1, "state": "failed", "error": "stopped by the deadline before its first epoch ended",
               "seconds": 3.0}
    e = no_trial_finished([stopped, failed], 20.0)
    assert "trial 0 failed: RuntimeError: worker lost" in e.message and "--time-budget" not in e.hint
    skipped = {"number": 0, "state": "skipped", "error": "needs ~900 MiB, a worker thread has 300 MiB", "seconds": 0.0}
    assert "trial 0 skipped: needs ~900 MiB" in no_trial_finished([skipped], 20.0).message
    assert "raise --time-budget" in no_trial_finished([stopped], 20.0).hint
