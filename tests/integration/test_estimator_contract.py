"""scikit-learn's estimator contract where its generic checks cannot go: they
feed numeric 2-D matrices, and these estimators read text (the checks that do
apply run in tests/unit/api/test_estimators.py). Tiny fits in this process
(a few hundred rows, 1–2 epochs): fit returns the estimator and repeats
itself under one random_state, predictions depend on each row alone, the
fitted attributes are scikit-learn's, and cross_val_score, GridSearchCV on
two joblib workers and a Pipeline with a text-cleaning step work, for the
classifier and the regressor."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.validation import check_is_fitted

from lancetnic_flow import TextClassifier, TextRegressor, write_corpus

ROWS = 400


@pytest.fixture(scope="module")
def corpus(data_dir) -> pd.DataFrame:
    path = data_dir / "contract.csv"
    if not path.exists():
        write_corpus(str(path), ROWS, classes=3, seed=11)
    return pd.read_csv(path)


def xy(corpus: pd.DataFrame, cls) -> tuple[np.ndarray, np.ndarray]:
    return corpus["text"].to_numpy(), corpus["target" if cls is TextRegressor else "label"].to_numpy()


def tiny(cls, **kw):
    return cls(epochs=2, random_state=3, progress=False, **kw)


def clean(texts) -> list[str]:
    """A text-cleaning step: lower case, outer blanks and runs of spaces gone."""
    return [" ".join(str(t).lower().split()) for t in texts]


BOTH = pytest.mark.parametrize("cls", [TextClassifier, TextRegressor], ids=["classifier", "regressor"])


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return np.allclose(a, b, equal_nan=True) if a.dtype.kind == "f" else list(a) == list(b)


@BOTH
def test_fit_returns_the_estimator_and_the_same_random_state_gives_the_same_predictions(corpus, cls):
    X, y = xy(corpus, cls)
    est = tiny(cls)
    assert est.fit(X, y) is est
    check_is_fitted(est)
    first = est.predict(X)
    assert same(est.fit(X, y).predict(X), first)          # fit again: the same model
    assert same(clone(est).fit(X, y).predict(X), first)   # a clone: the same model


@BOTH
def test_each_prediction_depends_on_its_row_alone_not_on_order_or_company(corpus, cls):
    X, y = xy(corpus, cls)
    est = tiny(cls).fit(X, y)
    whole = est.predict(X)
    order = np.random.default_rng(0).permutation(len(X))
    assert same(est.predict(X[order]), whole[order])
    assert same(est.predict(X[:37]), whole[:37]) and same(est.predict(X[[5]]), whole[[5]])
    if cls is TextClassifier:
        proba = est.predict_proba(X)
        assert np.allclose(est.predict_proba(X[order]), proba[order])
        assert np.allclose(est.predict_proba(X[100:140]), proba[100:140])


def test_classes_are_the_labels_seen_in_order_and_probabilities_follow_them(corpus):
    X, y = xy(corpus, TextClassifier)
    clf = tiny(TextClassifier).fit(X, y)
    assert list(clf.classes_) == sorted(set(y))   # as np.unique(y) gives them
    proba = clf.predict_proba(X)
    assert proba.shape == (len(X), len(clf.classes_)) and np.allclose(proba.sum(axis=1), 1)
    assert list(clf.classes_[proba.argmax(axis=1)]) == list(clf.predict(X))


@BOTH
def test_n_features_in_is_not_set_for_text_input(corpus, cls):
    """Like scikit-learn's own text vectorisers: one text per row has no feature count to check."""
    X, y = xy(corpus, cls)
    est = tiny(cls).fit(X, y)
    assert not hasattr(est, "n_features_in_") and not hasattr(est, "feature_names_in_")


@BOTH
def test_a_pipeline_with_a_text_cleaning_step_fits_and_cleans_what_it_predicts(corpus, cls):
    X, y = xy(corpus, cls)
    pipe = Pipeline([("clean", FunctionTransformer(clean)), ("est", tiny(cls, lowercase=False))]).fit(X, y)
    shouted = np.array([f"  {t.upper()}  " for t in X], dtype=object)
    assert same(pipe.predict(shouted), pipe.predict(X))   # cleaned before the estimator sees it
    direct = tiny(cls, lowercase=False).fit(clean(X), y)
    assert same(pipe.predict(X), direct.predict(clean(X)))
    assert np.isfinite(pipe.score(X, y))


@BOTH
def test_cross_val_score_and_grid_search_run_a_pipeline_on_two_joblib_workers(corpus, cls):
    X, y = xy(corpus, cls)
    pipe = Pipeline([("clean", FunctionTransformer(clean)), ("est", tiny(cls))])
    scores = cross_val_score(pipe, X, y, cv=3, n_jobs=2, error_score="raise")
    assert len(scores) == 3 and np.isfinite(scores).all()
    assert (scores > 0.5).all() if cls is TextClassifier else (scores > 0).all()
    gs = GridSearchCV(pipe, {"est__epochs": [1, 2]}, cv=2, n_jobs=2, error_score="raise").fit(X, y)
    assert np.isfinite(gs.cv_results_["mean_test_score"]).all() and gs.best_params_["est__epochs"] in (1, 2)
    assert len(gs.predict(X[:10])) == 10


def test_numeric_and_spaced_labels_come_back_as_given_with_numpys_dtype_and_survive_save_and_load(corpus, tmp_path):
    # int labels came back in object arrays (accuracy_score failed, scorers gave NaN); "pos\n" came back "pos"
    # (accuracy 0.0 for a right model); a saved and loaded model named 10 before 2 and moved predict_proba's columns
    from sklearn.metrics import accuracy_score

    X, names = xy(corpus, TextClassifier)
    codes = {n: c for n, c in zip(sorted(set(names)), (2, 10, 1))}
    y = np.array([codes[n] for n in names])
    clf = tiny(TextClassifier).fit(X, y)
    assert clf.classes_.dtype == np.int64 and clf.classes_.tolist() == [1, 2, 10]
    got = clf.predict(X)
    assert got.dtype == np.int64 and accuracy_score(y, got) == clf.score(X, y) > 0.5
    assert (cross_val_score(tiny(TextClassifier), X, y, cv=2, scoring="f1_macro") > 0.3).all()
    loaded = TextClassifier.load(clf.save(tmp_path / "saved"))
    assert loaded.classes_.tolist() == [1, 2, 10] and loaded.get_params()["epochs"] == 2
    assert loaded.predict(X[:20]).tolist() == got[:20].tolist()
    np.testing.assert_allclose(loaded.predict_proba(X[:20]), clf.predict_proba(X[:20]))
    spaced = np.array([f"{n}\n" for n in names])
    clf = tiny(TextClassifier).fit(X, spaced)
    assert sorted(clf.classes_) == sorted(set(spaced)) and accuracy_score(spaced, clf.predict(X)) > 0.5


@pytest.mark.parametrize("kind", ["int8", "uint16", "bool", "object", "pandas-str", "category", "string"])
def test_classes_and_predictions_have_np_unique_of_y_s_dtype_as_scikit_learns(corpus, kind):
    # int8 and uint16 answers came back int64 and text in object arrays or pandas columns as <U: scikit-learn's
    # classifiers answer in np.unique(y)'s dtype (pandas text and categories: object)
    X, names = xy(corpus, TextClassifier)
    first = sorted(set(names))[0]
    codes = (names == first).astype(np.int64)
    y = {"int8": codes.astype(np.int8), "uint16": codes.astype(np.uint16), "bool": codes.astype(bool),
         "object": names.astype(object), "pandas-str": pd.Series(names.tolist()),
         "category": pd.Series(names.tolist(), dtype="category"), "string": pd.Series(names.tolist(), dtype="string")}[kind]
    want = np.unique(np.asarray(y)).dtype
    clf = tiny(TextClassifier).fit(X, y)
    assert clf.classes_.dtype == want and clf.classes_.tolist() == np.unique(np.asarray(y)).tolist()
    got = clf.predict(X)
    assert got.dtype == want and clf.score(X, y) == np.mean(got == np.asarray(y)) > 0.5
