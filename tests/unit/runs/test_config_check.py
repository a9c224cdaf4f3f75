"""runs/config_check.py: the config.json fields loading reads are of their kind or damage."""
from __future__ import annotations

from lancetnic_flow.config import TrainConfig
from lancetnic_flow.runs.config_check import config_problem


def test_a_config_field_loading_reads_of_another_kind_is_named_and_a_written_config_passes():
    written = TrainConfig.from_dict({"data": {"train": ["x.csv"]}}).to_dict()
    assert config_problem(written) is None and config_problem({}) is None   # fields not there are not checked
    for section, name, value in [("data", "text", 5), ("data", "text", "text"), ("data", "text", []),
                                 ("data", "numeric", "n"), ("data", "encoding", 7), ("data", "label", ["a"]),
                                 ("data", "storage_options", [1]), ("training", "class_loss", "bogus"),
                                 ("training", "loss_weights", "x"), ("training", "loss_weights", [1, True]),
                                 ("training", "learn_val", "yes"), ("model", "name", None)]:
        config = {**written, section: {**written[section], name: value}}
        assert f"{section}.{name}" in config_problem(config), (section, name, value)
