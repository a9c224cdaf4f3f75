"""data/readers/labels.py: a label column read as label sets from lists,
JSON-list strings, a separator or fastText tags (trimmed, empty ones
dropped); a single-label task refuses lists instead of cutting them."""
from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from lancetnic_flow.data.readers.labels import (SEP_IN_LISTS, SEP_SPLIT, LabelListError, check_single, fasttext_sets,
                                                label_sets, separator_counts, separator_warnings, strings_array,
                                                tag_counts)


def test_strings_become_sets_by_separator_json_list_or_as_one_label():
    label = pa.array(["a|b", ' ["x", "y"] ', "solo", " | c |", "[deleted]", None])
    assert label_sets(label, "|").to_pylist() == [["a", "b"], ["x", "y"], ["solo"], ["c"], ["[deleted]"], []]
    assert label_sets(pa.array(["a|b", "solo"]), None).to_pylist() == [["a|b"], ["solo"]]


def test_a_json_list_in_a_cell_reads_as_json_does_escapes_unicode_and_numbers_included():
    import json

    sets = [["say \"hi\"", "tech"], ["tech", "say \"hi\""], ["café", "a, b"], ["back\\slash"], ["x"]]
    cells = [json.dumps(s) for s in sets] + [json.dumps(s, ensure_ascii=False) for s in sets]
    assert label_sets(pa.array(cells), None).to_pylist() == sets + sets
    # numbers named as a JSON Lines list's are (Arrow's text of the value), mixed lists item by item
    assert label_sets(pa.array(["[1, 2.0, true]", '[1, "a"]', "[1, 2]"]), None).to_pylist() == [
        ["1", "2", "true"], ["1", "a"], ["1", "2"]]
    assert label_sets(pa.array([[1.0, 2.0]], pa.list_(pa.float64())), None).to_pylist() == [["1", "2"]]


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
                                        (pa.array(["plain", '["a", "b"]', '["c"]']), "a JSON list of labels"),
                                        (pa.array(["plain", "['a', 'b']"]), "a Python list of labels")])
def test_a_single_label_task_refuses_lists_of_labels_and_says_to_use_multilabel(label, what):
    with pytest.raises(LabelListError) as e:
        check_single(label)
    assert what in e.value.message and "task multilabel" in e.value.hint and "--task multilabel" in e.value.said("cli")[1]
    assert e.value.at("f.csv").message.startswith("f.csv: ")
    back = pickle.loads(pickle.dumps(e.value))
    assert type(back) is LabelListError and back.hint == e.value.hint


def test_a_python_list_in_a_cell_is_a_label_set_as_pandas_wrote_it():
    """pandas' to_csv writes a list column as ['a', 'b']: each cell was a label of its own
    ("['sports', 'x']", subset accuracy 0.0). Now read as the list (literals only, never code)."""
    cells = pa.array(["['sports', 'x']", "[ 'it\\'s' ,'é']", "['tech']", "[]", "['a', __import__('os')]", "plain"])
    assert label_sets(cells, None).to_pylist() == [["sports", "x"], ["it's", "é"], ["tech"], [],
                                                   ["['a', __import__('os')]"], ["plain"]]


def test_plain_labels_and_bracketed_names_pass_a_single_label_task():
    check_single(pa.array(["pos", "[deleted]", "[draft]", "['quoted'", None]))
    check_single(pa.array([1, 2]))
    check_single(pa.array([None, None], pa.list_(pa.string())))


def test_rows_naming_a_label_twice_are_counted_once_each():
    from lancetnic_flow.data.readers.labels import repeated_rows

    sets = pa.array([["a", "a"], ["a", "b"], [], ["b", "b", "b", "c", "c"], ["c"], ["a", "c", "a"]],
                    pa.list_(pa.string()))
    assert repeated_rows(sets) == 3
    assert repeated_rows(pa.array([["a"], ["b", "a"], []], pa.list_(pa.string()))) == 0
    assert repeated_rows(pa.array([], pa.list_(pa.string()))) == 0


@pytest.mark.parametrize("name,content", [
    ("r.jsonl", '{"text": "one", "label": ["a", "a"]}\n{"text": "two", "label": ["a", "b"]}\n'
                '{"text": "three", "label": ["b", " b", "c"]}\n'),
    ("r.csv", "text,label\none,a|a\ntwo,a|b\nthree,b| b|c\n"),
    ("r.ft", "__label__a __label__a one\n__label__a __label__b two\n__label__b __label__b __label__c three\n"),
])
def test_a_read_chunk_notes_the_rows_whose_label_set_repeats_a_label_and_keeps_them(tmp_path, name, content):
    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import Columns, plan_source

    path = tmp_path / name
    path.write_text(content)
    cols = Columns(text=("text",), label="label", multilabel=True, label_sep="|" if name.endswith("csv") else None)
    chunks = list(read_partition(plan_source([str(path)]).partitions[0], cols))
    assert sum(c.table.num_rows for c in chunks) == 3 and not any(c.skipped for c in chunks)
    split = {"label_sep_split": 3} if name.endswith("csv") else {}   # the separator's own count, no row changed
    assert [c.noted for c in chunks] == [{"repeated_label": 2, **split}]


def test_a_separator_counts_the_label_strings_it_split_and_the_list_items_holding_it_that_stay_whole():
    noted: dict = {}
    sets = label_sets(pa.array(["a|b", "c", '["d|e", "f"]', "g| ", None]), "|", noted)
    assert sets.to_pylist() == [["a", "b"], ["c"], ["d|e", "f"], ["g"], []]
    assert noted == {SEP_SPLIT: 2, SEP_IN_LISTS: 1}
    noted = {}
    lists = label_sets(pa.array([["a|b", "c|d"], ["e"], None, ["f|g"]]), "|", noted)
    assert lists.to_pylist() == [["a|b", "c|d"], ["e"], [], ["f|g"]] and noted == {SEP_IN_LISTS: 2}   # rows, not items
    noted = {}
    label_sets(pa.array([["a"], ["b", "c"]]), "|", noted)
    label_sets(pa.array(["a|b"]), None, noted)   # no separator: nothing to count
    assert noted == {}


def test_a_separator_that_split_no_label_is_said_and_list_items_holding_it_are_named():
    assert separator_warnings("|", {"split": 5}) == [] and separator_warnings(None, {}) == []
    idle = separator_warnings("|", {})
    assert len(idle) == 1 and "{data.label_sep} '|' split no label" in idle[0] and "changed nothing" in idle[0]
    both = separator_warnings("|", {"in_lists": 3})
    assert len(both) == 2 and both[0].startswith("3 rows whose labels are a list") and "kept whole" in both[0]
    assert "rows.label_sep in metrics.json" in both[0]
    noted = {SEP_SPLIT: 4, SEP_IN_LISTS: 0, "repeated_label": 1}
    assert separator_counts(noted) == {"split": 4} and noted == {"repeated_label": 1}


def test_a_json_lines_file_of_lists_past_the_head_reads_with_a_separator_that_split_nothing_counted(tmp_path):
    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import Columns, plan_source

    path = tmp_path / "lists.jsonl"
    path.write_text("".join(f'{{"text": "row {i}", "label": ["a", "b|c"]}}\n' for i in range(50)))
    cols = Columns(text=("text",), label="label", multilabel=True, label_sep="|")
    chunks = list(read_partition(plan_source([str(path)]).partitions[0], cols))
    noted: dict = {}
    for c in chunks:
        for k, v in c.noted.items():
            noted[k] = noted.get(k, 0) + v
    assert noted == {SEP_IN_LISTS: 50}


def test_a_lone_surrogate_in_a_label_or_value_is_written_as_u_fffd_not_a_stopped_run():
    # a CSV cell ["a\\ud800", "b"] read by json.loads held a lone surrogate, which Arrow refuses
    sets = label_sets(pa.array(['["a\\ud800", "b"]', '["c"]']), None)
    assert sets.to_pylist() == [["a\ufffd", "b"], ["c"]]
    values, bad = strings_array(["x\udc00y", None, "ok \U0001F600"])
    assert values.to_pylist() == ["x\ufffdy", None, "ok \U0001F600"] and bad.tolist() == [True, False, False]
    assert strings_array(["plain"])[1] is None


@pytest.mark.parametrize("name", ["r.parquet", "r.arrow", "r.jsonl"])
@pytest.mark.parametrize("multilabel", [False, True])
def test_a_float_label_minus_zero_is_the_class_zero_as_pandas_and_scikit_learn_read_it(tmp_path, name, multilabel):
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import Columns, plan_source

    label = [[-0.0], [0.0], [1.5]] if multilabel else [-0.0, 0.0, 1.5]
    table = pa.table({"text": ["good film", "bad film", "fine film"], "label": label})
    path = str(tmp_path / name)
    if name.endswith("parquet"):
        pq.write_table(table, path)
    elif name.endswith("arrow"):
        feather.write_feather(table, path)
    else:   # one value, and a list (read line by line by json.loads)
        rows = ["-0.0", "0.0", "1.5"]
        with open(path, "w") as f:
            for text, v in zip(table["text"].to_pylist(), rows):
                f.write(f'{{"text": "{text}", "label": {"[" + v + "]" if multilabel else v}}}\n')
    cols = Columns(text=("text",), label="label", multilabel=multilabel)
    got = [c.table["label"].to_pylist() for c in read_partition(plan_source([path]).partitions[0], cols)][0]
    assert got == ([["0"], ["0"], ["1.5"]] if multilabel else ["0", "0", "1.5"])


def test_a_list_column_of_dates_is_a_set_of_the_labels_a_csv_of_them_holds():
    import datetime as dt

    sets = label_sets(pa.array([[dt.date(2024, 1, 5), dt.date(2024, 2, 1)], []]), None)
    assert sets.to_pylist() == [["2024-01-05", "2024-02-01"], []]


@pytest.mark.parametrize("large", [False, True])
def test_a_column_of_list_views_reads_as_the_label_sets_it_shows_in_row_order(large):
    # pyarrow and polars write list views to Arrow IPC: they were refused ("labels of type
    # list_view<item: string> cannot be read"), and a view's values need not lie in row order
    from lancetnic_flow.data.readers.labels import check_single, label_sets

    kind = pa.LargeListViewArray if large else pa.ListViewArray
    int_type = pa.int64() if large else pa.int32()
    views = kind.from_arrays(pa.array([3, 0, 1, 2], int_type), pa.array([1, 2, 0, 2], int_type),
                             pa.array(["d", "a", "b", "c"]), mask=pa.array([False, False, True, False]))
    assert views.to_pylist() == [["c"], ["d", "a"], None, ["b", "c"]]
    assert label_sets(views, None).to_pylist() == [["c"], ["d", "a"], [], ["b", "c"]]
    assert label_sets(pa.chunked_array([views.slice(1), views]), None).to_pylist() == \
        [["d", "a"], [], ["b", "c"], ["c"], ["d", "a"], [], ["b", "c"]]
    with pytest.raises(LabelListError, match="a list of labels"):
        check_single(views)
