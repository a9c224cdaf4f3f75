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


def test_a_model_json_task_its_heads_cannot_do_sizes_not_numbers_or_thresholds_not_probabilities_are_named():
    # task "regress" on a classifier was evaluate's KeyError 'value'; an unknown task scored "0 rows";
    # kwargs.dim "524288" and thresholds ["a"] were internal errors
    from lancetnic_flow.runs.config_check import meta_problem

    kw = {"dim": 16, "classes": 3, "regress": False, "hidden": 8, "layers": 1, "dropout": 0.2, "numeric": 0}
    for fine in ({"kwargs": kw, "task": "classify"}, {"kwargs": kw, "task": "multilabel", "thresholds": [0.5, 0.3, 1]},
                 {"kwargs": kw}, {"kwargs": {**kw, "regress": True}, "task": "multitask"},
                 {"kwargs": {**kw, "classes": 0, "regress": True}, "task": "regress"}):
        assert meta_problem(fine) is None, fine
    for meta, said in [({"kwargs": kw, "task": "regress"}, 'task is "regress"'),
                       ({"kwargs": kw, "task": "zzz"}, 'task is "zzz"'), ({"kwargs": kw, "task": 3}, "task is 3"),
                       ({"kwargs": {**kw, "regress": True}, "task": "classify"}, "do multitask"),
                       ({"kwargs": {**kw, "dim": "16"}}, "kwargs.dim"), ({"kwargs": {**kw, "classes": True}}, "kwargs.classes"),
                       ({"kwargs": {**kw, "margin": "yes"}}, "kwargs.margin"), ({"kwargs": {**kw, "dropout": "x"}}, "dropout"),
                       ({"kwargs": kw, "thresholds": ["a"]}, "thresholds"), ({"kwargs": kw, "thresholds": 0.5}, "thresholds")]:
        assert said in (meta_problem(meta) or ""), (meta, said)


def test_a_model_json_without_one_threshold_per_label_is_named_not_blamed_on_another_runs_files():
    # a truncated or hand-edited thresholds list passed, then read as features.json "from different runs"
    from lancetnic_flow.runs.config_check import meta_problem

    kw = {"dim": 16, "classes": 3, "regress": False, "hidden": 8, "layers": 1, "dropout": 0.2, "numeric": 0}
    assert meta_problem({"kwargs": kw, "task": "multilabel", "thresholds": [0.5, 0.3, 0.4]}) is None
    for cuts in ([0.5, 0.3], [0.5, 0.3, 0.4, 0.2], []):
        said = meta_problem({"kwargs": kw, "task": "multilabel", "thresholds": cuts}) or ""
        assert f"{len(cuts)} thresholds for the 3 labels" in said, cuts
