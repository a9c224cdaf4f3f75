"""features/labelsets.py: label sets as multi-hot rows, in the run's label
order; unseen labels left out; per-label row counts count a row once."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lancetnic_flow.features.labelsets import (chunk_multi_hot, is_label_sets, left_out, multi_hot, remap, set_counts,
                                               unseen_per_row)

SETS = pa.array([["a", "b"], [], ["c"], ["b", "b", "zz"], None], pa.list_(pa.string()))


def test_only_list_columns_are_label_sets():
    assert is_label_sets(SETS) and is_label_sets(pa.chunked_array([SETS]))
    assert not is_label_sets(pa.array(["a", "b"]))


def test_multi_hot_has_a_column_per_known_label_and_leaves_unseen_labels_out():
    hot = multi_hot(SETS, ["b", "a", "c"])
    assert hot.dtype == np.uint8
    assert hot.tolist() == [[1, 1, 0], [0, 0, 0], [0, 0, 1], [1, 0, 0], [0, 0, 0]]
    assert multi_hot(pa.chunked_array([SETS[:2], SETS[2:]]), ["a"]).tolist() == [[1], [0], [0], [0], [0]]


def test_set_counts_count_rows_per_label_once_each():
    assert set_counts(SETS) == {"a": 1, "b": 2, "c": 1, "zz": 1}
    assert set_counts(pa.array([[]], pa.list_(pa.string()))) == {}


def test_a_label_the_run_never_had_named_twice_in_a_row_counts_once_as_its_set_holds_it_once():
    # scikit-learn's multi-hot holds such a label once: one missed label of its row, one row of its name
    sets = pa.array([["b", "zz", "zz"], ["zz", "q"], ["q", "q", "q"], ["a"], None], pa.list_(pa.string()))
    per_row, names = unseen_per_row(sets, ["a", "b"])
    assert per_row.tolist() == [1, 2, 1, 0, 0] and per_row.dtype == np.int32
    assert names == {"zz": 2, "q": 2}
    hot, own = chunk_multi_hot(sets)   # what the counting fit pass's raw shard finishes to
    raw_per_row, raw_names = left_out(hot, own, ["a", "b"])
    assert raw_per_row.tolist() == per_row.tolist() and raw_names == names
    plain = unseen_per_row(pa.array(["zz", "zz", "a", None]), ["a"])   # one label a row: each row counts
    assert plain[0].tolist() == [1, 1, 0, 0] and plain[1] == {"zz": 2}


def test_a_chunks_own_multi_hot_remapped_to_the_run_labels_equals_multi_hot_over_them():
    hot, names = chunk_multi_hot(SETS)
    assert sorted(names.tolist()) == ["a", "b", "c", "zz"]
    labels = ["c", "b", "a", "never"]
    assert np.array_equal(remap(hot, names, labels), multi_hot(SETS, labels))
    empty, none = chunk_multi_hot(pa.array([[], []], pa.list_(pa.string())))
    assert empty.shape == (2, 0) and remap(empty, none, ["a"]).tolist() == [[0], [0]]


def test_two_names_of_a_chunk_remapped_to_one_run_label_set_its_column_where_either_is_set():
    """Two spellings of one value read as the run's one label (``1`` and ``1.0`` as ``1.0``)."""
    hot = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]], np.uint8)
    got = remap(hot, np.array(["1.0", "1.0", "b"]), ["b", "1.0"])
    assert got.tolist() == [[0, 1], [0, 1], [1, 0], [0, 1]]


def test_single_labels_joined_by_a_separator_are_named_and_other_names_are_not():
    from lancetnic_flow.features.labelsets import joined_labels

    assert joined_labels(["sports", "tech", "politics", "sports|tech", "politics|tech"]) == (
        "|", ["sports|tech", "politics|tech"])
    assert joined_labels(["a", "b", "c", "a;b", "b; c"]) == (";", ["a;b", "b; c"])
    # One combination is not yet a pattern; parts that are not labels are names, not sets.
    assert joined_labels(["sports", "tech", "sports|tech"]) is None
    assert joined_labels(["Science|Physics", "Science|Biology", "Arts, Culture", "Food, Drink"]) is None
    assert joined_labels(["1", "2", "3"]) is None and joined_labels([]) is None


def test_label_sets_joining_the_runs_labels_are_refused_naming_the_separator_in_each_callers_words():
    from lancetnic_flow.errors import UserError
    from lancetnic_flow.features.labelsets import refuse_joined_sets

    with pytest.raises(UserError) as err:
        refuse_joined_sets({"sports|tech": 3, "weather": 1}, ["sports", "tech"])
    assert err.value.cli[1] == "pass --label-sep '|'" and err.value.workflow[1] == "pass label_sep: |"
    refuse_joined_sets({"weather": 1, "sports|weather": 2}, ["sports", "tech"])   # new labels: nothing to split


def test_a_multilabel_runs_labels_joined_by_a_separator_it_did_not_split_by_are_named():
    from lancetnic_flow.features.labelsets import joined_in_sets

    assert joined_in_sets(["sports", "tech", "sports|tech"], None) == ("|", ["sports|tech"])   # one is enough
    assert joined_in_sets(["sports", "tech", "sports|tech"], "|") is None   # a list item: warned of by count
    assert joined_in_sets(["a", "b", "a;b"], "|") == (";", ["a;b"])
    assert joined_in_sets(["Science|Physics", "Science"], None) is None


def test_list_items_joined_by_the_separator_the_data_was_read_with_are_refused_as_items_not_told_to_pass_it():
    """A --val (or evaluate) file of lists whose items join the run's labels (["sports|tech"]) read
    with --label-sep '|' was refused with the hint `pass --label-sep '|'`, the option already given:
    a list's items are never split, and the error now says so."""
    from lancetnic_flow.errors import UserError
    from lancetnic_flow.features.labelsets import refuse_joined_sets

    labels = ["sports", "tech"]
    with pytest.raises(UserError) as e:
        refuse_joined_sets({"sports|tech": 4}, labels, "|")
    message, hint = e.value.said("cli")
    assert message.startswith("items of the label lists join this run's labels by '|' ('sports|tech' 4)")
    assert "never split by --label-sep" in message and "--label-sep" not in hint and "item of its own" in hint
    with pytest.raises(UserError) as e:
        refuse_joined_sets({"sports;tech": 4}, labels, "|")   # joined by another separator: pass that one
    assert e.value.said("cli")[1] == "pass --label-sep ';'"
