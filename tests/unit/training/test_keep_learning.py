"""training/keep_learning.py: ``--init-from RUN`` takes the run's features, model,
task and columns, refuses options that contradict them, a damaged run folder and
new data without its columns, each in words naming what differs and what would
work; the labels a continued run trains with keep the old ids and append the new."""
from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest
import torch

from lancetnic_flow.config import TrainConfig, config_from_options
from lancetnic_flow.errors import UserError
from lancetnic_flow.features import register_tokenizer
from lancetnic_flow.features.vectorize import FittedFeatures
from lancetnic_flow.models import create_model
from lancetnic_flow.resolve import resolve
from lancetnic_flow.runs.folder import save_run
from lancetnic_flow.training.keep_learning import (PARTIAL_FIT, check_resolved, continue_config, is_continued,
                                                   key_options, labelled, load_init, refusal)

OLD_LABELS = ["politics", "sports", "tech"]


@pytest.fixture
def old_run(tmp_path):
    """A finished LinearSVM run on hashed words (1,024 buckets) that read its text from
    ``body``, with 7 epochs and a fifth of its rows held out: what --init-from starts from."""
    return _save_old(tmp_path)


def _save_old(tmp_path, **options):
    cfg = resolve(config_from_options({"data": [str(tmp_path / "old.csv")], "text": ["body"], "model": "LinearSVM",
                                       "buckets": 1024, "analyzer": "word", "epochs": 7, "val_fraction": 0.2,
                                       **options}))
    features = FittedFeatures(mode="hashing", buckets=1024, labels=list(OLD_LABELS), label_counts=[5, 4, 3],
                              idf=np.linspace(1.0, 2.0, 1024).astype(np.float32), docs=12)
    torch.manual_seed(0)
    model, meta = create_model("LinearSVM", dim=1024, classes=3, regress=False, hidden=64, layers=0, dropout=0.0,
                               embed=8, numeric=0)
    run = tmp_path / "old"
    save_run(str(run), config=cfg.to_dict(), features=features, model=model, model_meta={**meta, "task": "classify"},
             metrics={}, history=[])
    return run


def _data(tmp_path, header: str = "body,label") -> str:
    path = tmp_path / f"new-{header.split(',')[0]}.csv"
    path.write_text(f"{header}\nthe match went on,sports\nthe vote was close,politics\na cell divides,science\n")
    return str(path)


def _given(data: str, run, **options) -> TrainConfig:
    return config_from_options({"data": [data], "init_from": str(run), **options})


def test_options_left_at_their_defaults_take_the_runs_values(tmp_path, old_run):
    cfg = continue_config(_given(_data(tmp_path), old_run, sparse_lr=0.05))
    assert is_continued(cfg) and cfg.training.init_from == str(old_run)
    assert (cfg.model.name, cfg.model.layers, cfg.training.task) == ("LinearSVM", 0, "classify")
    assert (cfg.features.mode, cfg.features.buckets, cfg.features.analyzer) == ("hashing", 1024, "word")
    assert cfg.data.text == ["body"] and cfg.training.epochs == 7      # the run's column and epochs
    assert cfg.data.val_fraction == 0.2       # the band the run held out: no row it trained on is held out
    assert cfg.training.sparse_lr == 0.05                             # given: as given
    assert continue_config(_given(_data(tmp_path), old_run, val_fraction=0.05)).data.val_fraction == 0.05
    # With a validation file of its own the run holds nothing out by hash: the band is not taken.
    with_val = continue_config(_given(_data(tmp_path), old_run, val=[_data(tmp_path)]))
    with_val.data.validate()
    assert with_val.data.val_fraction == 0.1
    resolve(cfg)   # a merged configuration resolves as any other
    # The same values given again are no contradiction.
    same = continue_config(_given(_data(tmp_path), old_run, model="LinearSVM", buckets=1024, features="hashing"))
    assert same.features == cfg.features


def test_an_option_a_workflow_or_an_estimator_gives_at_its_default_value_is_used_as_given(tmp_path, old_run):
    """A workflow's `epochs: 10` (the default) and `text: text` were taken as not given: the continued
    run trained the old run's 7 epochs and read its `body` column, as the command line's would not."""
    given = config_from_options({"data": [_data(tmp_path, "text,label")], "init_from": str(old_run), "epochs": 10,
                                 "text": ["text"]}, given=["epochs", "text"])
    cfg = continue_config(given)
    assert cfg.training.epochs == 10 and cfg.data.text == ["text"]
    assert continue_config(_given(_data(tmp_path), old_run, epochs=10)).training.epochs == 7   # not given: the run's
    # A value that leaves the choice to the tool (an estimator's model="auto") keeps the run's choice.
    auto = continue_config(config_from_options({"data": [_data(tmp_path)], "init_from": str(old_run),
                                                "model": "auto"}, given=["model"]))
    assert auto.model.name == "LinearSVM"
    # So does the command line's `--model auto --analyzer auto` (it was refused: "--model auto (the run's:
    # LinearSVM)"), where a workflow's `model: auto` was taken.
    typed = continue_config(_given(_data(tmp_path), old_run, model="auto", analyzer="auto"),
                            explicit={"model.name", "features.analyzer"})
    assert (typed.model.name, typed.features.analyzer) == ("LinearSVM", "word")
    buckets = config_from_options({"data": [_data(tmp_path)], "init_from": str(old_run), "buckets": 524288},
                                  given=["buckets"])
    with pytest.raises(UserError, match="buckets=524288 .the run's: 1024"):   # given at its default: refused
        continue_config(buckets)


def _words(text: str) -> list[str]:
    return text.split()


register_tokenizer("keep_learning_words", _words)


def test_a_refused_option_is_said_as_the_caller_types_it(tmp_path, old_run):
    """`--no-idf` was said `--idf False (the run's: True)`, `--ngram-range 1,3` as `--ngrams 3`:
    flags and values no command line takes. Each reader now sees its own spelling."""
    with pytest.raises(UserError) as e:
        continue_config(_given(_data(tmp_path), old_run, idf=False, ngram_range=(1, 3), lowercase=False))
    message = e.value.cli[0]
    assert "--no-idf (the run's: --idf)" in message and "--no-lowercase (the run's: --lowercase)" in message
    assert "--ngram-range 1,3 (the run's: 1,2)" in message and "--ngrams" not in message
    assert "idf=False (the run's: True)" in e.value.message
    assert "ngram_range=(1, 3) (the run's: (1, 2))" in e.value.message
    flow = e.value.workflow[0]   # `run WORKFLOW`: the file's keys and YAML words
    assert flow.startswith(f"init_from {old_run} keeps") and "--" not in flow
    assert "idf: false (the run's: true)" in flow and "ngram_range: 1,3 (the run's: 1,2)" in flow


def test_the_runs_stop_words_file_and_tokenizer_given_again_are_no_contradiction(tmp_path):
    """`--stop-words sw.txt` given again was refused as differing from the run's (which saves the
    file's words, `and,of,the`); a tokenizer given by its registered name, from the run's MODULE:NAME."""
    (tmp_path / "sw.txt").write_text("the\nand\nof\n")
    run = _save_old(tmp_path, stop_words=str(tmp_path / "sw.txt"), tokenizer="keep_learning_words")
    cfg = continue_config(_given(_data(tmp_path), run, stop_words=str(tmp_path / "sw.txt"),
                                 tokenizer="keep_learning_words"))
    assert cfg.features.stop_words == ["and", "of", "the"] and cfg.features.tokenizer.endswith(":keep_learning_words")
    (tmp_path / "other.txt").write_text("a\n")
    with pytest.raises(UserError, match=r"stop_words=.*other.txt. .the run.s: \['and', 'of', 'the'\]"):   # another file: refused
        continue_config(_given(_data(tmp_path), run, stop_words=str(tmp_path / "other.txt")))


def test_options_that_contradict_the_run_are_refused_naming_each_and_what_works(tmp_path, old_run):
    with pytest.raises(UserError) as e:
        continue_config(_given(_data(tmp_path), old_run, features="tfidf", buckets=2048))
    message, hint = e.value.cli
    assert f"--init-from {old_run} keeps the run's features" in message
    assert "--features tfidf (the run's: hashing)" in message and "--buckets 2048 (the run's: 1024)" in message
    assert "drop them" in hint and "without --init-from" in hint
    assert "features='tfidf'" in e.value.message        # the Python API names its parameters
    with pytest.raises(UserError, match="the run's: 'LinearSVM'") as e:
        continue_config(_given(_data(tmp_path), old_run, model="ScalpelMC"))
    assert "--model ScalpelMC" in e.value.cli[0]
    # A default value given on the command line is given: it contradicts the run too.
    with pytest.raises(UserError, match="the run's: 1024"):
        continue_config(_given(_data(tmp_path), old_run), explicit={"features.buckets"})


def test_new_data_split_by_the_delimiter_given_reads_its_columns_and_without_it_names_the_delimiter(tmp_path, old_run):
    """--init-from's column check read the new data's header with commas, whatever --delimiter
    said: a ';' file given --delimiter ';' was refused as having no column 'body', its hint
    '--text body;label'. Now it reads the header as training does, and without the delimiter
    the hint names it."""
    path = tmp_path / "semi.csv"
    path.write_text("body;label\nthe match went on;sports\nthe vote was close;politics\n")
    assert continue_config(_given(str(path), old_run, delimiter=";")).data.text == ["body"]
    with pytest.raises(UserError) as e:
        continue_config(_given(str(path), old_run))
    assert e.value.cli[1] == "the header line is split by ';': pass --delimiter ';'"


def test_a_run_of_another_task_is_refused_first(tmp_path, old_run):
    with pytest.raises(UserError) as e:
        continue_config(_given(_data(tmp_path, "body,label,y"), old_run, task="regress", target="y", features="ids"))
    assert e.value.cli[0] == f"--init-from {old_run} is a classify run (LinearSVM); --task regress asks for a " \
                             "regress run"
    assert "drop --task" in e.value.cli[1]
    with pytest.raises(UserError, match="it predicts labels, and target y asks for a value"):
        continue_config(_given(_data(tmp_path, "body,label,y"), old_run, target="y"))


def test_new_data_without_the_runs_text_column_is_refused_naming_it(tmp_path, old_run):
    data = _data(tmp_path, "text,label")
    with pytest.raises(UserError) as e:
        continue_config(_given(data, old_run))
    message, hint = e.value.cli
    assert f"the new data {data} has no column 'body', where --init-from {old_run} read its text" in message
    assert "(the new data's columns: text, label)" in message and hint.endswith("e.g. --text text")
    # Naming the new data's column (even by the default's name, as the command line tells) works.
    assert continue_config(_given(data, old_run), explicit={"data.text"}).data.text == ["text"]
    with pytest.raises(UserError, match="no column 'label', where .* read its labels") as e:
        continue_config(_given(_data(tmp_path, "body,category"), old_run))
    assert e.value.cli[1].endswith("e.g. --label category")


def test_a_damaged_or_unfinished_run_folder_is_refused_naming_the_file(tmp_path, old_run):
    data = _data(tmp_path)
    (old_run / "model.safetensors").rename(tmp_path / "weights")
    cfg = continue_config(_given(data, old_run))     # the JSON files are whole: the weights are read later
    with pytest.raises(UserError, match=f"^init_from {old_run}: .*model.safetensors is missing") as e:
        load_init(str(old_run), {})
    assert "restore the run folder" in e.value.hint
    assert e.value.cli[0].startswith(f"--init-from {old_run}: ")   # each caller its own word
    (tmp_path / "weights").rename(old_run / "model.safetensors")
    assert load_init(str(old_run), {}).classes == 3
    (old_run / "config.json").rename(tmp_path / "config.json")
    with pytest.raises(UserError, match="config.json is missing"):
        continue_config(_given(data, old_run))
    (tmp_path / "config.json").rename(old_run / "config.json")
    (old_run / "model.json").unlink()
    with pytest.raises(UserError, match="is an unfinished run"):
        continue_config(_given(data, old_run))
    assert cfg.model.name == "LinearSVM"


def test_partial_fits_refusals_name_partial_fit_and_the_estimators_parameters_not_init_from(tmp_path, old_run):
    """partial_fit continues its own last run: its caller typed neither init_from nor task."""
    data = _data(tmp_path)
    with pytest.raises(UserError) as e:
        continue_config(_given(data, old_run, buckets=2048, ngram_range=(1, 1)), by=PARTIAL_FIT)
    assert str(e.value).startswith(f"partial_fit continues the model the earlier calls fitted ({old_run})")
    assert "ngram_range=(1, 1) (the model's: (1, 2)); buckets=2048 (the model's: 1024)" in e.value.message
    assert e.value.hint == "set them back (set_params(ngram_range=(1, 2), buckets=1024)), or call fit(X, y) to train " \
                           "a new model"
    with pytest.raises(UserError) as e:
        continue_config(_given(data, old_run, task="multilabel"), by=PARTIAL_FIT)
    assert "a classify model (LinearSVM), and this y asks for a multilabel one: a list of labels per row" in str(e.value)
    assert e.value.hint.startswith("give y as the earlier calls did, one label per row")
    (old_run / "model.safetensors").unlink()
    with pytest.raises(UserError) as e:
        load_init(str(old_run), {}, by=PARTIAL_FIT)
    assert str(e.value).startswith("partial_fit continues the model") and "model.safetensors is missing" in str(e.value)
    # the folder's hint, as an estimator's caller can act on it: no run to train again by command
    assert e.value.hint == "restore the run folder from a copy, or call fit(X, y) to train a new model"
    for said in (str(e.value),):
        assert "init_from" not in said and "init-from" not in said and "drop task" not in said
    assert refusal("r", None, "it is odd", None).cli[1] == "train a new run without --init-from"   # no "None, …"
    assert refusal("r", PARTIAL_FIT, "it is odd", None).hint == "call fit(X, y) to train a new model"
    unfinished = "train it again with the same command (what was fitted and featurised is cached)"
    assert refusal("r", PARTIAL_FIT, "it is odd", unfinished).hint == "call fit(X, y) to train a new model"
    resume = "continue it from its checkpoint with `lancetnic-flow train --resume r`"
    assert refusal("r", PARTIAL_FIT, "it is odd", resume).hint == "call fit(X, y) to train a new model"
    assert refusal("r", None, "it is odd", resume).hint.startswith(resume)   # the command line's, as it was


def test_training_on_dask_workers_is_refused(tmp_path, old_run):
    cfg = continue_config(_given(_data(tmp_path), old_run, ddp=2, learn_val=False))
    with pytest.raises(UserError) as e:
        check_resolved(resolve(cfg))
    assert e.value.cli == ("--init-from continues a run in this process; --ddp 2 trains on Dask workers, which "
                           "start from fresh weights", "drop --ddp")
    cfg = continue_config(_given(_data(tmp_path), old_run, train_on="cluster"))
    with pytest.raises(UserError, match="pass train_on client"):
        check_resolved(resolve(cfg))
    check_resolved(resolve(continue_config(_given(_data(tmp_path), old_run))))


def test_a_continued_runs_out_or_cache_inside_the_run_it_continues_is_refused(tmp_path, old_run):
    """`--init-from runs/jan --out runs/jan` wrote the new run folder and its shard cache into
    the run that a continued run only reads."""
    for out, cache in [(str(old_run), None), (str(old_run / "more"), None), (str(tmp_path), str(old_run / "c"))]:
        cfg = continue_config(_given(_data(tmp_path), old_run, out=out, cache=cache))
        with pytest.raises(UserError, match="the run this one continues, which is only read") as e:
            check_resolved(resolve(cfg))
        assert e.value.cli[0].startswith("--out" if cache is None else "--cache")
    assert e.value.cli[1] == "give another --cache, or leave it out (OUT/.cache)"
    with pytest.raises(UserError) as e:
        check_resolved(resolve(continue_config(_given(_data(tmp_path), old_run, out=str(old_run)))))
    assert e.value.cli[1] == f"give the folder that holds the runs, e.g. --out {tmp_path}"
    # Beside it (a name that starts as the run's does), or with no cache: as any run.
    check_resolved(resolve(continue_config(_given(_data(tmp_path), old_run, out=str(tmp_path / "old-2")))))
    check_resolved(resolve(continue_config(_given(_data(tmp_path), old_run, out=str(tmp_path), cache="none"))))


def test_the_labels_keep_the_old_ids_and_append_the_new_and_the_declared(old_run):
    init = load_init(str(old_run), {})
    fitted = FittedFeatures(mode="hashing", buckets=1024, labels=["science", "sports", "health"],
                            label_counts=[9, 7, 2], docs=18, idf=np.ones(1024, np.float32),
                            vocabulary=pa.array(["x"]))
    features, added = labelled(fitted, init, ["zoo", "sports"])
    assert features.labels == [*OLD_LABELS, "science", "health", "zoo"] and added == ["science", "health", "zoo"]
    assert features.label_counts == [0, 7, 0, 9, 2, 0] and features.docs == 18
    assert np.array_equal(features.idf, init.features.idf) and features.vocabulary is None   # the old run's
    assert init.features.labels == OLD_LABELS           # the old run's features are left as they were
    alone, added = labelled(fitted, None, ["zoo"])
    assert alone.labels == ["science", "sports", "health", "zoo"] and added == []
    assert np.array_equal(alone.idf, fitted.idf)
    # A continued run's shards are its own in the cache: keyed by the old features, and declared labels.
    options = {"mode": "hashing"}
    assert key_options(options, None, None) == options
    assert key_options(options, init, ["zoo"]) == {"mode": "hashing", "init_from": init.digest, "labels_as_run": 1,
                                                   "classes": ["zoo"]}


def test_a_continued_run_weighs_the_buckets_only_its_new_data_holds_as_it_did_before_they_weighed_0(tmp_path):
    """The old run's idf is kept (its weights learned on inputs weighed by it), and a bucket no
    old training row held is 0 there: the new data's words in it would weigh nothing and never
    be learned. Such a bucket takes the old run's idf of no row (its value before), so the new
    data trains as it did; buckets neither holds stay at 0."""
    from lancetnic_flow.features.vocab import smooth_idf

    run = _save_old(tmp_path)
    init = load_init(str(run), {})
    init.features.idf = np.where(np.arange(1024) % 2 == 0, init.features.idf, np.float32(0.0)).astype(np.float32)
    new_idf = np.where(np.arange(1024) % 3 == 0, np.float32(2.5), np.float32(0.0)).astype(np.float32)
    fitted = FittedFeatures(mode="hashing", buckets=1024, labels=["sports"], label_counts=[3], docs=3, idf=new_idf)
    features, _ = labelled(fitted, init, None)
    even, third = np.arange(1024) % 2 == 0, np.arange(1024) % 3 == 0
    assert np.array_equal(features.idf[even], init.features.idf[even])
    assert (features.idf[~even & third] == smooth_idf(np.zeros(1), init.features.docs)[0]).all()
    assert (features.idf[~even & ~third] == 0).all() and features.docs == 3


def test_another_optimizer_given_to_a_continued_run_takes_no_input_row_step_from_the_old_run(tmp_path):
    # continuing a --sparse-lr 5 run with --optimizer radam was refused: "drop --sparse-lr", which nobody gave
    cfg = resolve(config_from_options({"data": [str(tmp_path / "old.csv")], "text": ["body"], "model": "ScalpelMC",
                                       "buckets": 1024,
                                       "analyzer": "word", "sparse_lr": 5.0}))
    features = FittedFeatures(mode="hashing", buckets=1024, labels=list(OLD_LABELS), label_counts=[5, 4, 3],
                              idf=np.linspace(1.0, 2.0, 1024).astype(np.float32), docs=12)
    model, meta = create_model("ScalpelMC", dim=1024, classes=3, regress=False, hidden=64, layers=1, dropout=0.2,
                               embed=8, numeric=0)
    run = tmp_path / "old"
    save_run(str(run), config=cfg.to_dict(), features=features, model=model, model_meta={**meta, "task": "classify"},
             metrics={}, history=[])
    merged = continue_config(_given(_data(tmp_path), run, optimizer="radam"))
    assert (merged.training.sparse_optimizer, merged.training.sparse_lr) == (None, None)
    assert resolve(merged).training.optimizer == "radam"
    kept = continue_config(_given(_data(tmp_path), run))   # the old run's optimiser: its step too
    assert (kept.training.sparse_optimizer, kept.training.sparse_lr) == ("sgd", 5.0)


def test_labels_of_the_new_data_that_spell_one_of_the_runs_otherwise_are_the_runs_not_new_classes(old_run):
    """A run of labels 0..3 continued on a CSV that pandas wrote with 0.0..3.0 (a missing value made the
    column floats) added them as new classes that learned apart from the old ones: they are the run's now."""
    init = dataclasses.replace(load_init(str(old_run), {}))
    init.features = dataclasses.replace(init.features, labels=["0", "1", "2", "3"])
    fitted = FittedFeatures(mode="hashing", buckets=1024, labels=["1.0", "1", "3.0", "4.0", "x"],
                            label_counts=[5, 2, 4, 3, 1], docs=15, idf=np.ones(1024, np.float32))
    features, added = labelled(fitted, init, None)
    assert features.labels == ["0", "1", "2", "3", "4.0", "x"] and added == ["4.0", "x"]
    assert features.label_counts == [0, 7, 0, 4, 3, 1]
    # equal as float64, two numbers: a new class; the spellings of a boolean are one value
    init.features = dataclasses.replace(init.features, labels=[str(2**53), "True"])
    fitted = dataclasses.replace(fitted, labels=[str(2**53 + 1), "true"], label_counts=[1, 2])
    assert labelled(fitted, init, None)[0].labels == [str(2**53), "True", str(2**53 + 1)]


def test_a_run_that_cannot_be_read_is_refused_in_each_readers_words(monkeypatch):
    """Reading the --init-from run failed with an error naming an option: the refusal built on it
    said the command line's part in Python's words (`format`, not `--format`)."""
    import lancetnic_flow.runs.loading as loading
    from lancetnic_flow.errors import UserError
    from lancetnic_flow.training.keep_learning import read_old_run

    def damaged(*a, **k):
        raise UserError("runs/r/config.json is damaged", "pass {data.format} csv")

    monkeypatch.setattr(loading, "read_run_json", damaged)
    with pytest.raises(UserError) as e:
        read_old_run("runs/r", {})
    assert e.value.field == "training.init_from"
    assert e.value.said("cli") == ("--init-from runs/r: runs/r/config.json is damaged",
                                   "pass --format csv, or train a new run without --init-from")
    assert str(e.value) == ("init_from runs/r: runs/r/config.json is damaged\n"
                            "  hint: pass format csv, or train a new run without init_from")


def test_a_label_separator_given_in_python_with_init_from_counts_as_the_callers_own(tmp_path, old_run):
    """``train(cfg)`` with ``init_from`` and ``label_sep``: the separator is the caller's, checked as the
    command line's ``--label-sep`` is (an idle one refused or warned of), not taken for the old run's."""
    from lancetnic_flow.config import label_sep_given

    cfg = continue_config(_given(_data(tmp_path), old_run, label_sep=";"))
    assert cfg.data.label_sep == ";" and label_sep_given(cfg)
    assert not label_sep_given(continue_config(_given(_data(tmp_path), old_run)))


def test_a_run_of_one_target_value_continued_on_other_values_predicts_them_at_the_scale_its_network_learnt(old_run):
    """A constant target's scale 0 makes every prediction its value: kept by a continued run whose
    new rows hold other values, it would have predicted the old value whatever the network learnt."""
    init = dataclasses.replace(load_init(str(old_run), {}))
    init.features = dataclasses.replace(init.features, target=(3.0, 0.0))
    fitted = FittedFeatures(mode="hashing", buckets=1024, docs=15, target=(5.0, 2.0), idf=np.ones(1024, np.float32))
    assert labelled(fitted, init, None)[0].target == (3.0, 1.0)
    same = dataclasses.replace(fitted, target=(3.0, 0.0))   # the new rows' one value is the old: still exact
    assert labelled(same, init, None)[0].target == (3.0, 0.0)
