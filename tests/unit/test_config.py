"""config.py: each section checks its own fields; a stop-word file is read
once, without a byte-order mark."""
from __future__ import annotations

import pytest

from lancetnic_flow.config import FeatureConfig, config_from_options
from lancetnic_flow.errors import UserError


def test_a_stop_word_file_loses_its_byte_order_mark(tmp_path):
    # "\ufeffmovie" never matched a token: the option was stored and did nothing for that word
    path = tmp_path / "stop.txt"
    path.write_bytes("\ufeffmovie\nFILM\n  Plot \n\n".encode())
    fc = FeatureConfig(stop_words=str(path))
    fc.read_stop_words({})
    assert fc.stop_words == ["FILM", "Plot", "movie"]   # as written: the tokenizer lower-cases them with the text


def test_a_stop_word_file_that_is_a_pipe_is_refused_naming_the_option_not_read_as_empty(tmp_path):
    # `--stop-words <(cmd)`: the options are checked more than once, and a pipe's second read is empty
    import os

    path = str(tmp_path / "pipe")
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        with pytest.raises(UserError, match=rf"{path} is a pipe .*not a regular file") as e:
            FeatureConfig(stop_words=path).read_stop_words({})
    finally:
        os.close(fd)
    assert e.value.field == "features.stop_words" and "write the words to a file" in e.value.hint


def test_a_decimal_min_df_above_one_is_refused_as_scikit_learn_does():
    with pytest.raises(UserError, match=r"a fraction must be in \(0, 1\], got 1.5") as e:
        FeatureConfig(min_df=1.5).validate()
    assert "whole number" in e.value.hint
    FeatureConfig(min_df=0.5).validate()
    FeatureConfig(min_df=2).validate()


@pytest.mark.parametrize("seed", [-1, 2**63, 99999999999999999999])
def test_a_seed_numpy_cannot_take_is_refused_naming_it(seed):
    # --seed -1 ended in an internal error (exit 1) after the fit pass, leaving a run folder behind
    from lancetnic_flow.config import TrainingConfig

    with pytest.raises(UserError, match="a whole number from 0 to 2") as e:
        TrainingConfig(seed=seed).validate()
    assert e.value.field == "training.seed"
    TrainingConfig(seed=2**63 - 1).validate()
    import numpy as np

    numpy_seed = TrainingConfig(seed=np.int64(7))   # what np.arange and parameter grids give: a seed as 7 is
    numpy_seed.validate()
    assert numpy_seed.seed == 7 and type(numpy_seed.seed) is int


@pytest.mark.parametrize("dest, value", [
    ("data", [""]), ("val", ["d.csv", " "]), ("out", ""), ("cache", ""), ("init_from", ""), ("encoding", ""),
    ("scheduler", " "), ("track", [""]), ("stop_words", ""), ("experiment", ""), ("memory_budget", ""),
    ("numeric", ""), ("numeric", ","),   # trained without a numeric column while the run said it was set
])
def test_an_empty_value_of_a_text_option_is_refused_not_read_as_the_current_folder_or_as_not_given(dest, value):
    # --val "" read every file of the current folder as validation data, --out "" wrote the run there,
    # --init-from "" trained from scratch and --encoding "" was recorded and read as utf-8.
    from lancetnic_flow.options import BY_DEST

    values = {"data": ["d.csv"], dest: value}
    with pytest.raises(UserError) as e:
        config_from_options(values, given=values)
    assert e.value.field == BY_DEST[dest].field and "an empty value" in e.value.message


def test_an_experiment_without_mlflow_tracking_is_refused_rather_than_doing_nothing():
    # --experiment x without --track mlflow trained, tracked nothing, and named no experiment anywhere
    from lancetnic_flow.config import OutputConfig

    with pytest.raises(UserError) as e:
        OutputConfig(experiment="x").validate()
    assert e.value.field == "output.experiment" and "tracks nothing" in e.value.message
    OutputConfig().validate()


def test_a_text_or_numeric_column_given_as_one_string_is_that_column_as_the_command_line_reads_it():
    # DataConfig(text="body") read the columns 'b', 'o', 'd', 'y' (text="text": "names the column 't' twice")
    from lancetnic_flow.config import DataConfig

    d = DataConfig(train=["x.csv"], text="text", numeric="value, length")
    d.validate()
    assert d.text == ["text"] and d.numeric == ["value", "length"]
    d.validate()   # as saved: unchanged
    assert d.text == ["text"] and d.numeric == ["value", "length"]


def test_a_cluster_configs_sizes_may_be_written_as_the_command_line_writes_them():
    """`ClusterConfig(memory_budget="4GiB")`, as the estimators and `--memory-budget` take it, ended
    in an internal TypeError ('<' between str and int): it is read as a size, and a size that is
    none is a UserError naming the field."""
    from lancetnic_flow.config import ClusterConfig

    c = ClusterConfig(memory_budget="4GiB", blocksize="64MiB")
    c.validate()
    assert (c.memory_budget, c.blocksize) == (4 * 2**30, 64 * 2**20)
    with pytest.raises(UserError) as e:
        ClusterConfig(memory_budget="GiB").validate()
    assert e.value.field == "cluster.memory_budget" and str(e.value).startswith("memory_budget: 'GiB' has no number")
    assert e.value.said("cli")[0].startswith("--memory-budget: 'GiB'")


def test_a_label_separator_is_the_callers_unless_a_continued_run_took_it_from_the_run_it_continues():
    import dataclasses

    from lancetnic_flow.config import DataConfig, TrainConfig, TrainingConfig, label_sep_given

    fresh = TrainConfig(data=DataConfig(train=["t.csv"], label_sep="|"), training=TrainingConfig(task="multilabel"))
    assert label_sep_given(fresh)
    assert not label_sep_given(dataclasses.replace(fresh, data=DataConfig(train=["t.csv"])))
    continued = dataclasses.replace(fresh, training=TrainingConfig(task="multilabel", init_from="runs/old"))
    assert not label_sep_given(continued)   # merged from the old run: not the caller's
    assert label_sep_given(dataclasses.replace(continued, given=frozenset({"data.label_sep"})))


def test_a_config_built_in_python_counts_the_fields_it_sets_off_their_defaults_as_given():
    from lancetnic_flow.config import ClusterConfig, DataConfig, TrainConfig, with_set_fields

    cfg = TrainConfig(data=DataConfig(train=["d.csv"], storage_options={"anon": True}),
                      cluster=ClusterConfig(workers=2))
    assert with_set_fields(cfg).given == {"data.train", "data.storage_options", "cluster.workers"}
    assert cfg.given == frozenset()   # the caller's configuration is left as it was
    named = TrainConfig(data=DataConfig(train=["d.csv"]), given=frozenset({"training.epochs"}))
    assert with_set_fields(named) is named


def test_validate_refuses_storage_options_with_only_local_paths_as_the_command_line_does(tmp_path):
    from lancetnic_flow.config import DataConfig, OutputConfig, TrainConfig

    cfg = TrainConfig(data=DataConfig(train=[str(tmp_path / "d.csv")], storage_options={"anon": True}),
                      output=OutputConfig(out=str(tmp_path / "runs")))
    with pytest.raises(UserError, match="storage_options anon opens remote storage") as e:
        cfg.validate()
    assert e.value.said("cli")[0].startswith("--storage-option")


def test_validate_refuses_scheduler_wait_without_a_scheduler_as_the_command_line_does(tmp_path, monkeypatch):
    from lancetnic_flow.config import ClusterConfig, DataConfig, TrainConfig

    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    cfg = TrainConfig(data=DataConfig(train=[str(tmp_path / "d.csv")]), cluster=ClusterConfig(scheduler_wait="5m"))
    with pytest.raises(UserError, match="scheduler_wait 5m is how long a lost scheduler"):
        cfg.validate()


@pytest.mark.parametrize("ngrams", [0, -1, 33])
def test_ngrams_out_of_range_is_refused_naming_ngrams_as_typed_not_the_pair_it_stands_for(ngrams):
    # --ngrams 0 was refused as "--ngram-range 1,0: need 1 ≤ MIN ≤ MAX", an option the user never typed
    with pytest.raises(UserError) as e:
        config_from_options({"data": ["d.csv"], "ngrams": ngrams}, given={"data", "ngrams"})
    assert e.value.said("cli") == (f"--ngrams {ngrams}: need a whole number from 1 to 32 (the longest n-gram, in "
                                   "words)", "e.g. --ngrams 2 (words and pairs), or --ngram-range MIN,MAX for "
                                   "n-grams from MIN words")
    assert e.value.said("workflow")[0].startswith(f"ngrams: {ngrams}: need")
    assert config_from_options({"data": ["d.csv"], "ngrams": 32}).features.ngrams == 32


def test_a_config_read_from_a_runs_config_json_and_replaced_still_counts_no_field_as_given(tmp_path):
    # the mark lived in the instance's __dict__, which dataclasses.replace drops: a run's config.json, replaced
    # (new training data), counted its resolved values (--workers 3, the model's name) as the caller's own
    import copy
    import dataclasses

    from lancetnic_flow.config import TrainConfig, with_set_fields
    from lancetnic_flow.runs.folder import write_config
    from lancetnic_flow.runs.loading import read_config

    ran = config_from_options({"data": ["d.csv"], "workers": 3, "model": "LinearSVM", "epochs": 4},
                              given={"data", "workers", "model", "epochs"})
    write_config(str(tmp_path), ran.to_dict())
    assert "given_accounted" not in (tmp_path / "config.json").read_text()
    saved = TrainConfig.from_dict(read_config(str(tmp_path)))
    again = dataclasses.replace(saved, data=dataclasses.replace(saved.data, train=["new.csv"]))
    for cfg in (saved, again, copy.deepcopy(again), dataclasses.replace(again)):
        assert with_set_fields(cfg).given == frozenset()
    made = config_from_options({"data": ["d.csv"], "out": "/tmp/somewhere"})
    assert with_set_fields(dataclasses.replace(made, given=frozenset())).given == frozenset()
    built = dataclasses.replace(TrainConfig(data=saved.data))   # built in Python: its fields set are its given
    assert with_set_fields(built).given == {"data.train"}


def test_a_config_made_from_options_or_read_from_a_run_keeps_its_given_even_empty():
    # an estimator at its defaults names nothing given: the out and run_on it fills in itself are not the caller's
    from lancetnic_flow.config import DataConfig, TrainConfig, with_set_fields

    made = config_from_options({"data": ["d.csv"], "out": "/tmp/somewhere", "run_on": "process"})
    assert with_set_fields(made).given == frozenset()
    saved = TrainConfig.from_dict(TrainConfig(data=DataConfig(train=["d.csv"], label_sep="|")).to_dict())
    assert with_set_fields(saved).given == frozenset()


def test_the_marks_of_keep_learning_are_fields_kept_by_replace_and_copies_and_never_saved():
    # they lived in the instance's __dict__: dataclasses.replace dropped them, so a merged configuration
    # was merged again with the run it continues, and partial_fit's refusals named {training.init_from}
    import copy
    import dataclasses

    from lancetnic_flow.config import DataConfig, TrainConfig
    from lancetnic_flow.training.keep_learning import PARTIAL_FIT, continued_by, is_continued, mark_continued

    cfg = TrainConfig(data=DataConfig(train=["a.csv"]))
    assert not is_continued(cfg) and continued_by(cfg) is None
    mark_continued(cfg, PARTIAL_FIT)
    for other in (dataclasses.replace(cfg, given=frozenset({"training.lr"})), copy.deepcopy(cfg),
                  dataclasses.replace(cfg.validate())):
        assert is_continued(other) and continued_by(other) == PARTIAL_FIT
    assert "continued" not in cfg.to_dict() and "continued_by" not in cfg.to_dict()
    assert cfg == TrainConfig(data=DataConfig(train=["a.csv"]))   # a mark is no difference of configuration
