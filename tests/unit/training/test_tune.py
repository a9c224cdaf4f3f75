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
