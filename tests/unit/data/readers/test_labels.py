"""data/readers/labels.py: a label column read as label sets from lists,
JSON-list strings, a separator or fastText tags (trimmed, empty ones
dropped); a single-label task refuses lists instead of cutting them."""
from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from lancetnic_flow.data.readers.labels import (LabelListError, check_single, fasttext_sets, label_sets,
                                                tag_counts)


def test_strings_become_sets_by_separator_json_list_or_as_one_label():
    label = pa.array(["a|b", ' ["x", "y"] ', "solo", " | c |", "[deleted]", None])
    assert label_sets(label, "|").to_pylist() == [["a", "b"], ["x", "y"], ["solo"], ["c"], ["[deleted]"], []]
    assert label_sets(pa.array(["a|b", "solo"]), None).to_pylist() == [["a|b"], ["solo"]]


def test_list_columns_keep_their_labels_as_text():
    label = pa.array([["a", " b "], [], None], pa.list_(pa.string()))
    assert label_sets(label, None).to_pylist() == [["a", "b"], [], []]
    numbers = pa.array([[1, 2], [3]], pa.list_(pa.int64()))
    assert label_sets(numbers, None).to_pylist() == [["1", "2"], ["3"]]


def test_fasttext_tags_become_sets_and_are_counted_per_line():
    tags = pa.array(["__label__a __label__b", "__label__c", " __label__d  "])
    assert fasttext_sets(tags).to_pylist() == [["a", "b"], ["c"], ["d"]]
    assert tag_counts(tags).to_pylist() == [2, 1, 1]


@pytest.mark.parametrize("label,what", [(pa.array([["a", "b"]], pa.list_(pa.string())), "a list of labels"),
                                        (pa.array(["plain", '["a", "b"]', '["c"]']), "a JSON list of labels")])
def test_a_single_label_task_refuses_lists_of_labels_and_says_to_use_multilabel(label, what):
    with pytest.raises(LabelListError) as e:
        check_single(label)
    assert what in e.value.message and "--task multilabel" in e.value.hint
    assert e.value.at("f.csv").message.startswith("f.csv: ")
    back = pickle.loads(pickle.dumps(e.value))
    assert type(back) is LabelListError and back.hint == e.value.hint


def test_plain_labels_and_bracketed_names_pass_a_single_label_task():
    check_single(pa.array(["pos", "[deleted]", "[draft]", None]))
    check_single(pa.array([1, 2]))
    check_single(pa.array([None, None], pa.list_(pa.string())))
