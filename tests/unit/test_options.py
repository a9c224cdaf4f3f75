"""Each option is declared once (lancetnic_flow/options.py): the dataclass
defaults, the parser's, the estimators' and the workflow keys come from the
declaration and cannot drift; a validation error names its field, as a flag
on the command line and as a parameter in Python. Pure: no cluster, no
subprocess."""
from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

from lancetnic_flow import options as opts
from lancetnic_flow.api.estimators import TextClassifier, TextRegressor
from lancetnic_flow.cli.main import cli_words
from lancetnic_flow.cli.parser import build_parser
from lancetnic_flow.config import (ADDED_FIELDS, DataConfig, FeatureConfig, ModelConfig, TrainConfig, TrainingConfig,
                                   config_from_options)
from lancetnic_flow.errors import UserError

SECTION_CLASSES = {"data": DataConfig, "features": FeatureConfig, "model": ModelConfig, "training": TrainingConfig,
                   **{s: type(getattr(TrainConfig(data=DataConfig(train=["x"])), s)) for s in ("cluster", "output")}}


def _train_parser():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices["train"], sub.choices["tune"]


def _dataclass_default(f: dataclasses.Field):
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _same(declared, value) -> bool:
    """A declared tuple stands for the list a dataclass field builds anew."""
    return (list(declared) if isinstance(declared, tuple) and isinstance(value, list) else declared) == value


def test_every_dataclass_field_is_declared_and_takes_the_declared_default():
    for section, cls in SECTION_CLASSES.items():
        for f in dataclasses.fields(cls):
            o = opts.option(f"{section}.{f.name}")
            assert f.metadata.get("option") is o, f"{section}.{f.name}: its default is not default(...)"
            if o.default is opts.REQUIRED:
                assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            else:
                assert _same(o.default, _dataclass_default(f)), f"{section}.{f.name}"


def test_every_declared_field_is_a_dataclass_field():
    for field in opts.BY_FIELD:
        section, name = field.split(".")
        assert name in {f.name for f in dataclasses.fields(SECTION_CLASSES[section])}, field


def test_parser_defaults_are_the_declared_ones_and_build_the_default_config():
    train, tune = _train_parser()
    for o in opts.command_options("train"):
        action = next(a for a in train._actions if o.flag in a.option_strings)
        assert action.default == o.parser_default, o.flag
        assert o.kind != "value" or o.parser_default in (None, o.default) or o.cli_default is not opts.SAME
    # What `train x.csv` means is the dataclasses' defaults, field by field, but where the command
    # line declares its own (--wait-for-plots: the command ends before its charts are drawn).
    parsed = config_from_options(vars(build_parser().parse_args(["train", "x.csv"])))
    expected = TrainConfig(data=DataConfig(train=["x.csv"]))
    own = {o.field: o.cli_default for o in opts.command_options("train")
           if o.field and o.cli_default is not opts.SAME and o.cli_default not in (None, [])}
    assert own == {"output.wait_for_plots": False}
    for field, value in own.items():
        section, name = field.split(".")
        setattr(getattr(expected, section), name, value)
    assert parsed == expected


def test_every_train_and_tune_flag_is_declared_once():
    train, tune = _train_parser()
    declared = {o.flag for o in opts.OPTIONS if o.flag}
    for parser, command in ((train, "train"), (tune, "tune")):
        flags = [s for a in parser._actions for s in a.option_strings
                 if s.startswith("--") and not s.startswith("--no-")]
        own = {"--help", "--debug", "--quiet", "--json-log", "--time-budget", "--trials"}
        assert set(flags) - own == {o.flag for o in opts.command_options(command)}, command
        assert set(flags) - own <= declared
    flags = [o.flag for o in opts.OPTIONS if o.flag]
    assert len(flags) == len(set(flags))
    assert {"--resume", "--init-from", "--ddp", "--sync-every", "--sync-rows", "--train-on"} == \
        {o.flag for o in opts.command_options("train")} - \
        {o.flag for o in opts.command_options("tune")}


def test_help_shows_the_declared_default():
    train, _ = _train_parser()
    helps = {s: a.help for a in train._actions for s in a.option_strings}
    assert "(default 0.2)" in helps["--dropout"] and "(default 0.01)" in helps["--lr"]
    assert "{default}" not in " ".join(h or "" for h in helps.values())


@pytest.mark.parametrize("cls", [TextClassifier, TextRegressor])
def test_estimator_defaults_are_the_declared_ones(cls):
    params = inspect.signature(cls.__init__).parameters
    for o in opts.api_options():
        assert o.api in params, o.api
        assert params[o.api].default == o.estimator_default, o.api
    # The one that stands for two fields agrees with both.
    assert opts.api_default("ngram_range") == (FeatureConfig().ngram_min, FeatureConfig().ngrams)
    assert opts.api_default("random_state") == TrainingConfig().seed


def test_estimator_parameters_set_their_declared_fields():
    est = TextClassifier(epochs=3, lr=0.5, random_state=7, ngram_range=(1, 3), memory_budget="1KiB", dropout=0.1)
    cfg = est._config(DataConfig(train=["x"]), "classify", "out")
    assert (cfg.training.epochs, cfg.training.lr, cfg.training.seed) == (3, 0.5, 7)
    assert (cfg.features.ngram_min, cfg.features.ngrams, cfg.model.dropout) == (1, 3, 0.1)
    assert cfg.cluster.memory_budget == 1024 and cfg.output.out == "out" and cfg.model.name == "auto"


def test_values_as_written_are_parsed_by_their_declaration():
    cfg = config_from_options({"data": ["x"], "loss_weights": "1,0.5", "numeric": "a, b", "min_df": "2",
                               "max_df": "0.9", "memory_budget": "2KiB", "storage_option": ["a.b=1"],
                               "ngram_range": "2,4"})
    assert cfg.training.loss_weights == (1.0, 0.5) and cfg.data.numeric == ["a", "b"]
    assert (cfg.features.min_df, cfg.features.max_df) == (2, 0.9) and cfg.cluster.memory_budget == 2048
    assert cfg.data.storage_options == {"a": {"b": 1}}
    assert (cfg.features.ngram_min, cfg.features.ngrams) == (2, 4)


def test_saved_configs_still_load():
    old = TrainConfig(data=DataConfig(train=["x"])).to_dict()
    for section, names in ADDED_FIELDS.items():
        for name in names:
            old[section].pop(name)
    cfg = TrainConfig.from_dict(old)
    assert cfg.features.idf is False and cfg.training.sparse_optimizer == "adam"


# ---------------------------------------------------------------- errors name the field


@pytest.mark.parametrize("make, field, python, flag", [
    (lambda: TrainingConfig(lr=-1).validate(), "training.lr", "lr: must be > 0", "--lr: must be > 0"),
    (lambda: TrainingConfig(seed=0, early_stopping=-1).validate(), "training.early_stopping", "early_stopping:",
     "--early-stopping:"),
    (lambda: ModelConfig(dropout=2).validate(), "model.dropout", "dropout: must be in [0, 1)", "--dropout: must"),
    (lambda: FeatureConfig(analyzer="chars").validate(), "features.analyzer", "analyzer: 'chars'", "--analyzer: "),
    (lambda: FeatureConfig(ngram_min=3, ngrams=1).validate(), "features.ngram_min", "ngram_range=(3, 1)",
     "--ngram-range 3,1"),
    (lambda: config_from_options({"data": ["x"], "workers": 0, "dashboard": True}).validate(), "cluster.workers",
     "workers: must be > 0", "--workers: must be > 0"),
    (lambda: config_from_options({"data": ["x"], "worker_threads": 0}).validate(), "cluster.threads",
     "threads: must be > 0", "--worker-threads: must be > 0"),
    (lambda: config_from_options({"data": ["x"], "memory_budget": "8XB"}), "cluster.memory_budget",
     "memory_budget: cannot read '8XB'", "--memory-budget: cannot read '8XB'"),
    (lambda: DataConfig(train=["x"], val_fraction=2).validate(), "data.val_fraction", "val_fraction: must",
     "--val-fraction: must"),
    # Beside a validation source no row is held out by hash: a fraction given would do nothing.
    (lambda: DataConfig(train=["x"], val=["v"], val_fraction=0.3).validate(), "data.val_fraction",
     "val_fraction 0.3 holds rows of the training data out by hash", "--val-fraction 0.3 holds rows"),
    (lambda: config_from_options({"data": ["x"], "run_on": "here"}).validate(), "cluster.run_on",
     "run_on: 'here' is not one of auto, process, cluster", "--run-on: 'here'"),
    (lambda: config_from_options({"data": ["x"], "scheduler_wait": "soon"}).validate(), "cluster.scheduler_wait",
     "scheduler_wait: 'soon' is not a duration", "--scheduler-wait: 'soon'"),
])
def test_a_validation_error_names_its_field_as_a_flag_and_as_a_parameter(make, field, python, flag):
    with pytest.raises(UserError) as e:
        make()
    assert e.value.field == field
    assert str(e.value).startswith(python) and "--" not in e.value.message
    message, hint = cli_words(e.value)
    assert message.startswith(flag)


def test_hints_name_other_options_in_each_audience():
    with pytest.raises(UserError) as e:
        FeatureConfig(analyzer="char", stop_words="english").validate()
    assert e.value.message == "stop_words applies to words, not to analyzer char"
    assert e.value.cli[0] == "--stop-words applies to words, not to --analyzer char"
    assert "--analyzer word" in e.value.cli[1] and "analyzer word" in e.value.hint
    with pytest.raises(UserError) as e:
        TextClassifier(random_state=0)._config(DataConfig(train=["x"], val_fraction=3), "classify", "o").validate()
    assert e.value.message.startswith("val_fraction:") and e.value.cli[1].startswith("e.g. --val-fraction 0.1")


def test_a_field_error_keeps_its_field_and_both_renderings_through_pickle():
    err = opts.bad("training.seed", "{name}: bad", "try {training.lr}")
    assert (err.message, err.hint, err.cli) == ("random_state: bad", "try lr", ("--seed: bad", "try --lr"))
    back = pickle.loads(pickle.dumps(err))
    assert (back.message, back.hint, back.field, back.cli) == (err.message, err.hint, err.field, err.cli)


def test_an_error_without_a_field_still_names_its_flag_on_the_command_line():
    assert cli_words(UserError("max_features: must be > 0, got -1")) == ("--max-features: must be > 0, got -1", None)


def test_a_quoted_switch_word_is_refused_saying_to_unquote_it():
    # lowercase: 'false' said "expected true or false, got 'false'", naming what it was given as the fix
    from lancetnic_flow.options import BY_DEST, typed_value

    with pytest.raises(ValueError, match="without quotes"):
        typed_value(BY_DEST["lowercase"], "false")
    with pytest.raises(ValueError) as e:
        typed_value(BY_DEST["lowercase"], "1")
    assert "quotes" not in str(e.value)
    assert typed_value(BY_DEST["lowercase"], False) is False


def test_an_option_given_a_value_is_said_as_each_caller_types_it():
    """`--idf False` and `--ngrams 3` (for `--ngram-range 1,3`) named no command line, and a
    workflow run was told of flags its file never held:
    a --x/--no-x option is said `--x`/`--no-x`, the n-gram range as MIN,MAX, and the Python API
    its parameter=value; every bool option's both spellings are flags the parser offers."""
    from lancetnic_flow.cli.parser import build_parser
    from lancetnic_flow.options import Words

    cli, api, flow = Words("cli"), Words("python"), Words("workflow")
    assert (cli.setting("features.idf", False), cli.setting("features.idf", True)) == ("--no-idf", "--idf")
    assert cli.setting("features.ngrams", (1, 3)) == "--ngram-range 1,3" == cli.setting("features.ngram_min", [1, 3])
    assert (api.setting("features.idf", False), api.setting("features.ngrams", [1, 3])) == ("idf=False",
                                                                                         "ngram_range=(1, 3)")
    assert cli.setting("features.max_features", None) == "--max-features (none)"
    assert cli.setting("data.text", "review text") == "--text 'review text'"   # one shell word, as typed
    assert (cli.value("features.idf", True), cli.value("features.ngrams", (1, 2))) == ("--idf", "1,2")
    # A workflow's keys, its YAML words: what `run` says where the values came from a file or --set.
    assert (flow.setting("features.idf", False), flow.setting("features.ngrams", (1, 3))) == ("idf: false",
                                                                                          "ngram_range: 1,3")
    assert (flow("training.seed"), flow("features.max_features")) == ("seed", "max_features")
    parser = build_parser()
    for o in opts.OPTIONS:
        if o.field and o.flag and o.kind in ("bool", "flag") and "train" in o.commands:
            for value in (True, False) if o.kind == "bool" else (True,):
                a = parser.parse_args(["train", "x.csv", cli.setting(o.field, value)])   # the parser takes it
                assert getattr(a, o.dest) is value


def test_a_workflows_empty_list_of_numeric_columns_is_none_and_a_list_names_its_columns():
    # numeric: [] joined to "" read as the empty value the command line's --numeric "" is, refused
    from lancetnic_flow.options import BY_DEST, typed_value

    assert typed_value(BY_DEST["numeric"], []) == []
    assert typed_value(BY_DEST["numeric"], ["a", "b"]) == "a,b"
