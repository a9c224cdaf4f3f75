"""api/estimators.py without training: scikit-learn's own estimator checks
(those that apply to text input; the rest skipped by the tags the estimators
declare), the parameters' round trip and cloning, and answers that are not
one per row refused before anything runs. What needs a fitted model is in
tests/integration/test_estimator_contract.py."""
from __future__ import annotations

import gc
import os
import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import parametrize_with_checks

from lancetnic_flow import TextClassifier, TextRegressor
from lancetnic_flow.errors import UserError


@parametrize_with_checks([TextClassifier(), TextRegressor()])
def test_scikit_learns_checks_that_apply_to_text_input_pass(estimator, check):
    check(estimator)


@pytest.mark.parametrize("est", [TextClassifier(), TextRegressor()], ids=["classifier", "regressor"])
def test_the_tags_say_one_text_per_row_missing_texts_allowed_one_answer_per_row(est):
    tags = get_tags(est)
    assert tags.input_tags.string and tags.input_tags.one_d_array and not tags.input_tags.two_d_array
    assert tags.input_tags.allow_nan and not tags.input_tags.sparse
    assert tags.target_tags.required and not tags.target_tags.multi_output
    assert is_classifier(est) == isinstance(est, TextClassifier) and is_regressor(est) == isinstance(est, TextRegressor)
    if is_classifier(est):   # multi-label here is lists of labels, not scikit-learn's indicator matrix
        assert tags.classifier_tags.multi_class and not tags.classifier_tags.multi_label


@pytest.mark.parametrize("cls", [TextClassifier, TextRegressor])
def test_every_parameter_round_trips_through_set_params_and_clone(cls):
    est = cls()
    changed = {"epochs": 3, "hidden": 32, "random_state": 7, "ngram_range": (1, 3), "stop_words": ["the"],
               "lowercase": False, "text_column": "body", "memory_budget": "2GiB", "track": ["tensorboard"]}
    assert est.set_params(**changed) is est
    assert {k: est.get_params()[k] for k in changed} == changed
    twin = clone(est)
    assert twin is not est and twin.get_params() == est.get_params() and type(twin) is cls
    assert set(est.get_params()) == set(cls().get_params())   # deep=True adds nothing: no sub-estimators
    assert cls(**est.get_params()).get_params() == est.get_params()


@pytest.mark.parametrize("y", [np.eye(4, dtype=int)[[0, 1, 2, 3, 0, 1]], np.ones((6, 2)),
                               pd.DataFrame({"a": range(6), "b": range(6)})], ids=["indicator", "targets", "frame"])
@pytest.mark.parametrize("cls", [TextClassifier, TextRegressor])
def test_an_answer_that_is_not_one_per_row_is_refused_before_training(cls, y, monkeypatch):
    monkeypatch.setattr(cls, "_fit_config", lambda *a: pytest.fail("trained"))
    with pytest.raises(UserError, match="not one answer per row|one answer per row") as e:
        cls().fit([f"text number {i}" for i in range(6)], y)
    assert "list of labels per row" in e.value.hint or "column" in e.value.hint


@pytest.mark.parametrize("cls", [TextClassifier, TextRegressor])
@pytest.mark.parametrize("files", [False, True], ids=["frame", "file"])
def test_answers_named_as_the_text_column_are_refused_before_training(cls, files, tmp_path, monkeypatch):
    # fit(df, y="body") with text_column="body" trained the answers as their own input
    monkeypatch.setattr(cls, "_fit_config", lambda *a: pytest.fail("trained"))
    df = pd.DataFrame({"body": ["1.5", "2.5"] * 3, "other": ["a b"] * 6})
    X = df
    if files:
        X = str(tmp_path / "x.csv")
        df.to_csv(X, index=False)
    with pytest.raises(UserError, match="y='body' is the text column X is read from") as e:
        cls(text_column="body").fit(X, "body")
    assert "two columns" in e.value.hint


def test_a_refused_fit_leaves_the_fitted_labels_values_as_they_were():
    # after a refit was refused, a bool-label classifier read its labels as the strings "False"/"True": all True
    from lancetnic_flow.api.labels import LabelNames

    clf = TextClassifier(progress=False)
    clf._labels = before = LabelNames()
    before.add([True, False])
    with pytest.raises(UserError, match="which would be one class"):
        clf.fit(["a b", "c d"], ["Sports", "Sports "])
    assert clf._labels is before and clf._labels.array(["True", "False"]).tolist() == [True, False]


def test_a_parameter_off_its_default_is_given_so_a_model_that_cannot_honour_it_is_not_chosen():
    """TextClassifier(hidden=64) trained LinearSVM, which has no hidden layer: the value
    64 was the model's own. A parameter set off the estimator's default is given now."""
    from lancetnic_flow.config import DataConfig
    from lancetnic_flow.resolve import resolve

    data = DataConfig(train=["x.parquet"], label="answer")
    cfg = TextClassifier(hidden=64)._config(data, "classify", "runs")
    assert "model.hidden" in cfg.given and resolve(cfg).model.name == "ScalpelMC"
    plain = TextClassifier()._config(data, "classify", "runs")
    assert not plain.given and resolve(plain).model.name == "LinearSVM"


def _fitted_in_a_temporary_folder() -> TextClassifier:
    """A TextClassifier holding a small linear run in its own temporary folder, as fit leaves it:
    "cat" is pos, "dog" is neg."""
    import pyarrow as pa
    import torch

    from lancetnic_flow.features.vectorize import FittedFeatures
    from lancetnic_flow.models.scalpel import ScalpelNet
    from lancetnic_flow.runs.folder import save_run
    from lancetnic_flow.runs.predict import Predictor

    model = ScalpelNet(2, classes=2, regress=False, layers=0, dropout=0.0)
    with torch.no_grad():
        model.input.weight.copy_(torch.tensor([[3.0, -3.0], [-3.0, 3.0]]))
        model.input.bias.zero_()
    features = FittedFeatures(mode="tfidf", vocabulary=pa.array(["cat", "dog"]), idf=np.ones(2, np.float32),
                              labels=["pos", "neg"])
    est = TextClassifier()
    run = os.path.join(est._run_parent(), "20260101-000000")
    save_run(run, config={"data": {"text": ["text"]}}, features=features, model=model,
             model_meta={"net": "ScalpelNet", "kwargs": model.config, "task": "classify"}, metrics={}, history=[])
    est.run_ = run
    est._set_predictor(Predictor(run))
    return est


def test_a_pickled_fitted_estimator_keeps_its_run_folder_after_the_original_is_gone(tmp_path):
    est = _fitted_in_a_temporary_folder()
    first = est.run_
    copy = pickle.dumps(est)
    del est
    gc.collect()
    assert not os.path.exists(first)   # the original's temporary folder went with it

    again = pickle.loads(copy)
    assert list(again.predict(["cat", "dog", ""])) == ["pos", "neg", None]
    assert os.path.exists(os.path.join(again.run_, "model.json"))
    saved = again.save(tmp_path / "saved")   # was FileNotFoundError: the folder it named had gone
    assert list(TextClassifier.load(saved).predict(["dog"])) == ["neg"]
    restored = again.run_
    del again
    gc.collect()
    assert not os.path.exists(restored)   # the copy's folder goes with the copy


def test_a_label_set_models_score_reads_one_label_given_alone_as_a_set_of_one_not_its_characters(monkeypatch):
    clf = TextClassifier()
    clf.multilabel_ = True
    got = np.empty(4, dtype=object)
    got[:] = [["sports"], ["sports", "tech"], [], None]
    monkeypatch.setattr(clf, "predict", lambda X: got)
    texts = ["a", "b", "c", "d"]
    assert clf.score(texts, [["sports"], ["tech", "sports"], [], ["x"]]) == 0.75
    assert clf.score(texts, ["sports", ["tech", "sports"], None, "x"]) == 0.75
    assert clf.score(texts, np.array(["sports", "tech", "tech", "x"], dtype=object)) == 0.25


@pytest.mark.parametrize("multilabel", [False, True])
def test_score_reads_an_answer_the_run_holds_in_another_spelling_of_its_value_as_the_runs_label(monkeypatch,
                                                                                                  multilabel):
    """A run trained from a CSV names its labels 1.0, 2.0; y of floats names them 1, 2 (scored 0.0 for
    a model right on every row): as evaluate reads a Parquet of the same frame, they are the run's."""
    clf = TextClassifier()
    clf.multilabel_, clf.predictor_ = multilabel, type("Run", (), {"labels": ["1.0", "2.0", "True"]})()
    got = np.empty(4, dtype=object)
    got[:] = [["1.0"], ["2.0"], ["True"], ["1.0"]] if multilabel else ["1.0", "2.0", "True", "1.0"]
    monkeypatch.setattr(clf, "predict", lambda X: got)
    y = [[1.0], [2], [True], ["1.0"]] if multilabel else [1.0, 2, True, "1.0"]
    assert clf.score(["a", "b", "c", "d"], y) == 1.0
    assert clf.score(["a", "b", "c", "d"], np.array([1.0, 1.0, 1.0, 2.0])) == 0.25


def test_a_regressors_score_of_a_constant_y_is_1_for_exact_predictions_and_0_otherwise_as_scikit_learns_r2(
        monkeypatch):
    from sklearn.metrics import r2_score

    reg = TextRegressor()
    for got, y in (([3.0, 3.0, 3.0], [3.0, 3.0, 3.0]), ([3.0, 2.0, 3.0], [3.0, 3.0, 3.0]),
                   ([1.0, 2.0, 2.5], [1.0, 2.0, 3.0])):
        monkeypatch.setattr(reg, "predict", lambda X, got=got: np.array(got))
        assert reg.score(["a", "b", "c"], y) == pytest.approx(r2_score(y, got))


def test_a_pickled_or_saved_estimator_carries_its_run_but_not_its_trainers_writer_lock(tmp_path):
    # a trained run's folder keeps its trainer's .lock (runs/run_lock.py): a copy is a run of its own
    est = _fitted_in_a_temporary_folder()
    with open(os.path.join(est.run_, ".lock"), "w") as f:
        f.write('{"pid": 1, "host": "h", "since": 0}')
    again = pickle.loads(pickle.dumps(est))
    assert os.path.exists(os.path.join(again.run_, "model.json"))
    assert not os.path.exists(os.path.join(again.run_, ".lock"))
    saved = again.save(tmp_path / "saved")
    assert ".lock" not in os.listdir(saved)


def test_an_estimators_predictions_say_the_texts_cut_at_max_len_once_a_call_and_keep_the_count(tmp_path):
    """TextClassifier.predict, predict_proba and score of a sequence run say the texts read only
    to --max-len in one RunWarning a call, and ``longer_than_max_len_`` keeps the count: the
    count predict --input notes for the same texts."""
    from lancetnic_flow.errors import RunWarning

    from ..runs.test_predict import LONG_TEXTS, sequence_run

    est = TextClassifier.load(sequence_run(tmp_path / "run"))
    for call in (lambda: est.predict(LONG_TEXTS), lambda: est.predict_proba(LONG_TEXTS),
                 lambda: est.score(LONG_TEXTS, ["pos"] * 5)):
        with pytest.warns(RunWarning) as said:
            call()
        assert [str(w.message).split(" ")[0] for w in said] == ["2"]
        assert est.longer_than_max_len_ == 2
    est.predict(["cat dog"])
    assert est.longer_than_max_len_ == 0


@pytest.mark.parametrize("cls", [TextClassifier, TextRegressor])
@pytest.mark.parametrize("given, meant", [("epoch", "epochs"), ("batchsize", "batch_size"),
                                          ("learning_rate", "lr"), ("seed", "random_state")])
def test_a_misspelled_parameter_is_a_type_error_naming_it_and_the_closest_valid_one(cls, given, meant):
    # Python's own: "_TextEstimator.__init__() got an unexpected keyword argument 'epoch'", naming no valid one
    with pytest.raises(TypeError) as e:
        cls(**{given: 3})
    assert isinstance(e.value, UserError)
    assert f"{cls.__name__}() got an unexpected parameter {given!r} (did you mean {meant!r}" in str(e.value)
    assert "_TextEstimator" not in str(e.value) and "epochs, batch_size" in e.value.hint


def test_an_estimator_with_valid_parameters_still_pickles_and_clones():
    est = TextClassifier(epochs=2, lr=0.5)
    assert pickle.loads(pickle.dumps(est)).get_params() == est.get_params() == clone(est).get_params()


def test_every_unknown_parameter_is_named_and_set_params_names_the_closest_too():
    with pytest.raises(TypeError, match=r"got unexpected parameters 'epoch' \(did you mean 'epochs'\?\); "
                                        r"'lrate' \(did you mean 'lr'"):
        TextClassifier(epoch=3, lrate=0.1)
    with pytest.raises(ValueError, match=r"'epoch' is not a parameter of TextRegressor \(did you mean 'epochs'\?\)"):
        TextRegressor().set_params(epoch=3)


def test_a_fit_whose_every_row_was_skipped_speaks_of_x_not_of_the_estimators_own_file_and_columns():
    """fit(["a b", "c d"], y) was refused as `no training rows in /tmp/lancetnic-flow-data-…/train.parquet`,
    hint `check --text` / `check text`: a file and a column its caller never named."""
    from lancetnic_flow.api.estimators import in_terms_of_x
    from lancetnic_flow.errors import UserError

    path = "/tmp/lancetnic-flow-data-x/train.parquet"
    said = in_terms_of_x(UserError(f"no training rows in {path}: 2 rows read, 2 skipped (2 empty_text)",
                                   "the text column 'text' must hold text the analyzer reads; check text"), path)
    assert str(said).startswith("no training rows in X: 2 rows read, 2 skipped (2 empty_text)")
    assert "one-letter words are not read" in said.hint and "check text" not in said.hint
    other = UserError("lr: must be > 0")
    assert in_terms_of_x(other, path) is other


def test_label_sets_travel_to_the_run_as_lists_so_a_label_holding_a_separator_stays_whole():
    # they were joined by the unit separator for a run reading them split by it: "a\x1fb" became a and b,
    # where the command line keeps a JSON list's "a\x1fb" whole
    import pyarrow as pa

    task, answers = TextClassifier()._answers([["a\x1fb", "c"], ["a|d"], [], None])
    assert task == "multilabel" and answers.type == pa.list_(pa.string())
    assert answers.to_pylist() == [["a\x1fb", "c"], ["a|d"], [], None]
