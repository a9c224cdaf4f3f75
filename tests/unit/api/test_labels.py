"""api/labels.py: a run's label names map back to the values of y, of y's
dtype; values the run would merge are refused."""
from __future__ import annotations

import numpy as np
import pytest

from lancetnic_flow.api.labels import LabelNames, run_name
from lancetnic_flow.errors import UserError


def test_names_are_the_runs_and_numbers_are_named_as_numpy_compares_them():
    assert [run_name(v) for v in ["pos\n", " a ", "", None, float("nan"), 3, np.int64(3), 1.0, 2.5, True]] == \
        ["pos", "a", None, None, None, "3", "3", "1", "2.5", "True"]


def test_answers_come_back_as_the_values_given_with_numpys_dtype():
    # "pos\n" was answered "pos" (accuracy 0.0 for a model right on every row); 3 was answered in an object array
    labels = LabelNames()
    assert labels.add(["pos\n", "neg\n", None]) == ["pos", "neg", None]
    got = labels.array(["neg", "pos"])
    assert got.tolist() == ["neg\n", "pos\n"] and got.dtype.kind == "U"
    ints = LabelNames()
    ints.add(np.array([2, 10, 1]))
    got = ints.array(["1", "10", "2"])
    assert got.tolist() == [1, 10, 2] and got.dtype == np.int64
    assert ints.array(["2", None]).dtype == object   # a row with no answer: None, as before
    assert ints.array(["2"], dtype=np.int64).dtype == np.int64


@pytest.mark.parametrize("pair", [["Sports", "Sports "], [1, "1"], ["x\t", "x"]])
def test_two_values_the_run_would_learn_as_one_class_are_refused(pair):
    with pytest.raises(UserError, match="which would be one class"):
        LabelNames().add(pair)
    LabelNames().add([1, 1.0, np.int64(1)])   # equal values: one class, as np.unique has them


def test_the_names_and_values_round_trip_through_json():
    labels = LabelNames()
    labels.add([3, 10, 7])
    back = LabelNames.from_json(labels.to_json())
    assert back.values == {"3": 3, "10": 10, "7": 7} and back.array(["10"]).dtype == np.int64


def test_a_label_holding_a_lone_surrogate_is_named_with_u_fffd_and_comes_back_as_given():
    # fit(X, ["b\\ud800", ...]) stopped with a UnicodeEncodeError (Arrow holds no lone surrogate)
    labels = LabelNames()
    assert labels.add(["a", "b\ud800"]) == ["a", "b\ufffd"]
    assert labels.array(["b\ufffd"]).tolist() == ["b\ud800"]
    again = LabelNames.from_json(labels.to_json())
    assert again.to_json().encode("utf-8") and again.array(["b\ufffd", "a"]).tolist() == ["b\ud800", "a"]
    with pytest.raises(UserError, match="which would be one class"):
        LabelNames().add(["b\ud800", "b\udc00"])
def test_a_labels_file_edited_swapped_or_not_json_is_refused_and_a_saved_one_reads_back():
    # a swapped pair answered "tech" for every "sports" row silently; a cut file was a JSONDecodeError
    names = LabelNames()
    names.add(["sports", " tech ", 3, 2.5, True])
    back = LabelNames.from_json(names.to_json())
    assert back.values == names.values
    for text in ('{"labels": [["sports", "tech"], ["tech", "sports"]]}', '{"labels": [["3", 4]]}',
                 '{"labels": [["a", "a"], ["a", "a"]]}', '{"labels": [["sp', "[1, 2]", '{"labels": 3}', ""):
        with pytest.raises(UserError, match="estimator_labels.json is damaged"):
            LabelNames.from_json(text)


def test_classes_take_the_dtype_np_unique_gives_y_and_keep_it_through_json():
    # int8 answers came back int64, an object or pandas text column's as <U: scikit-learn's classes_ and
    # predict keep np.unique(y)'s dtype
    import pandas as pd
    import pyarrow as pa

    from lancetnic_flow.api.labels import answers_dtype

    cases = [(np.array([0, 1], np.int8), np.int8), (np.array([0, 1], np.uint16), np.uint16),
             (np.array([True, False]), np.bool_), (np.array(["a", "bb"], object), object),
             (pd.Series(["a", "bb"]), object), (pd.Series(["a", "bb"], dtype="category"), object),
             (pd.Series(["a", "bb"], dtype="string"), object), (pd.Series([1, 2], dtype="category"), np.int64),
             (pa.array([0, 1], pa.int8()), np.int8), (pa.array(["a", "bb"]), object)]
    for y, want in cases:
        labels = LabelNames()
        labels.add(y.tolist() if hasattr(y, "tolist") else y.to_pylist())
        labels.note_dtype(y)
        got = labels.array([run_name(v) for v in (y.tolist() if hasattr(y, "tolist") else y.to_pylist())])
        assert got.dtype == np.dtype(want), (y, got.dtype)
        back = LabelNames.from_json(labels.to_json())
        assert back.array([run_name(v) for v in got.tolist()]).dtype == np.dtype(want)
    assert answers_dtype(["a", "bb"]) is None and answers_dtype(np.array(["a", "bb"])) is None   # <U of the longest


def test_answers_of_later_calls_widen_the_dtype_as_numpy_promotes_them():
    labels = LabelNames()
    labels.add([0, 1])
    labels.note_dtype(np.array([0, 1], np.int8))
    labels.add([300])
    labels.note_dtype(np.array([300], np.int16))
    assert labels.array(["0", "300"]).dtype == np.int16
    labels.note_dtype(np.array(["x"], object))
    assert labels.dtype == object


def test_labels_pickled_before_they_kept_a_dtype_answer_as_their_values_decide():
    import pickle

    labels = LabelNames()
    labels.add(np.array([2, 10]))
    state = {k: v for k, v in labels.__dict__.items() if k not in ("dtype", "_dtype_seen")}
    old = pickle.loads(pickle.dumps(labels))
    old.__dict__.clear()
    old.__dict__.update(state)
    assert old.array(["2", "10"]).dtype == np.int64
    old.note_dtype(np.array([3], np.int8))   # a later partial_fit's y: the values still decide
    assert old.array(["2"]).dtype == np.int64


def test_label_sets_classes_take_their_labels_dtype_not_the_object_dtype_of_the_lists():
    labels = LabelNames()
    labels.note_dtype(np.array([["a"], ["b", "c"]], dtype=object))
    labels.of_sets()
    labels.add(["a", "b", "c"])
    assert labels.array(["a", "c"]).dtype.kind == "U"
    labels.note_dtype(np.array([["d"]], dtype=object))   # a later call's sets: still the values'
    assert labels.dtype is None
