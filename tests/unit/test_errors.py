"""errors.py: a UserError prints its message and hint, survives pickling (as
Dask ships a worker's error back) with both, close matches suggest names, and an estimator
used before fit raises what scikit-learn catches."""
from __future__ import annotations

import pickle

import pytest

from lancetnic_flow.errors import UserError, close_matches
from lancetnic_flow.storage import WriteError


def test_a_user_error_prints_its_message_then_its_hint():
    assert str(UserError("bad column 'txt'", "use --text text")) == "bad column 'txt'\n  hint: use --text text"
    assert str(UserError("no hint")) == "no hint"


def test_a_user_error_and_its_subclasses_keep_message_and_hint_through_pickle():
    for err in (UserError("m", "h"), WriteError("disk full at /x", "free space")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and (back.message, back.hint) == (err.message, err.hint)
    # A field's error keeps each reader's words: a worker's `lr` error still says `--lr` and `lr:`.
    err = UserError("lr: must be > 0", field="training.lr", cli=("--lr: must be > 0", None),
                    workflow=("lr: must be > 0", None))
    back = pickle.loads(pickle.dumps(err))
    assert (back.field, back.cli, back.workflow) == (err.field, err.cli, err.workflow)


def test_close_matches_suggest_the_nearest_names_or_nothing():
    assert close_matches("jsonl", ["csv", "json", "parquet"]) == " (did you mean 'json'?)"
    assert close_matches("zzz", ["csv", "json"]) == ""


def test_an_estimator_used_before_fit_raises_not_fitted_as_scikit_learn_expects():
    from sklearn.exceptions import NotFittedError as SklearnNotFitted
    from sklearn.utils.validation import check_is_fitted

    from lancetnic_flow import TextClassifier, TextRegressor
    from lancetnic_flow.errors import NotFittedError, UserError

    for est in (TextClassifier(), TextRegressor()):
        with pytest.raises(SklearnNotFitted) as e:
            est.predict(["a text"])
        assert isinstance(e.value, NotFittedError) and isinstance(e.value, UserError)
        assert isinstance(e.value, ValueError) and isinstance(e.value, AttributeError)
        assert "not fitted yet" in e.value.message and "fit(X, y)" in e.value.hint
        with pytest.raises(SklearnNotFitted):
            check_is_fitted(est)
        assert est.__sklearn_is_fitted__() is False


def test_a_user_error_naming_options_as_fields_is_read_in_each_callers_words():
    """`UserError("... {features.max_len}")` showed the placeholder raw to every reader: the Python
    API reads `max_len`, the command line `--max-len`, a workflow file `max_len`, through pickling too."""
    err = UserError("texts are longer than {features.max_len}", "raise {features.max_len} or {training.seed}")
    assert str(err) == "texts are longer than max_len\n  hint: raise max_len or random_state"
    assert err.said("cli") == ("texts are longer than --max-len", "raise --max-len or --seed")
    assert err.said("workflow") == ("texts are longer than max_len", "raise max_len or seed")
    back = pickle.loads(pickle.dumps(err))
    assert (back.message, back.said("cli")) == (err.message, err.said("cli"))
    assert UserError("label {x.y} of {name}").message == "label {x.y} of {name}"   # not an option: as written
