"""data/frames.py: in-memory inputs (lists, NumPy, pandas, polars, datasets, Arrow) as
prediction rows: numbers read as text, missing values as empty_text, extra
columns kept by name, and inputs that are no texts refused in words."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from lancetnic_flow.data.frames import as_table, input_rows, is_table, like_input, text_columns_of
from lancetnic_flow.errors import UserError


@pytest.mark.parametrize("data", [["a b", "c d"], np.array(["a b", "c d"]), np.array([["a b"], ["c d"]]),
                                  pd.Series(["a b", "c d"]), pa.array(["a b", "c d"]), iter(["a b", "c d"])])
def test_every_supported_sequence_of_texts_becomes_one_text_column(data):
    assert as_table(data).column("text").to_pylist() == ["a b", "c d"]


def test_a_lone_surrogate_in_a_text_is_read_as_u_fffd_as_undecodable_bytes_are():
    # Predictor.predict(["goal \\ud800 match"]) stopped with a UnicodeEncodeError: one result per row
    want = ["goal \ufffd match", "b\ufffdc"]
    assert as_table(["goal \ud800 match", "b\udc00c"]).column("text").to_pylist() == want
    frame = pd.DataFrame({"text": pd.Series(["goal \ud800 match", "b\udc00c"], dtype=object)})
    assert as_table(frame).column("text").to_pylist() == want


def test_numbers_become_their_text_and_none_or_nan_missing():
    assert as_table([1, 2.5, None, float("nan"), b"by\xfftes"]).column("text").to_pylist() == \
        ["1", "2.5", None, None, "by\ufffdtes"]


def test_pandas_na_and_nat_and_a_numpy_nan_are_missing_not_the_words_na_and_nan():
    # a pd.NA label was learned as the class "<NA>", and a pd.NA text featurised as the word "<NA>"
    import pandas as pd

    series = pd.Series(pd.array(["a b", pd.NA, "c d"], dtype="string"))
    assert as_table(series).column("text").to_pylist() == ["a b", None, "c d"]
    assert as_table([pd.NaT, np.float32("nan"), 3]).column("text").to_pylist() == [None, None, "3"]


@pytest.mark.parametrize("data,match", [("one string", "one string"), (np.zeros((2, 2)), "shape"),
                                        (42, "cannot read texts from a int")])
def test_what_is_not_a_sequence_of_texts_is_refused(data, match):
    with pytest.raises(UserError, match=match):
        as_table(data)


def test_tables_are_tables_and_their_only_column_is_the_text():
    df = pd.DataFrame({"body": ["x y"]})
    assert is_table(df) and is_table(pa.table({"a": [1]})) and not is_table(["x"])
    assert text_columns_of(as_table(df), ("text",)) == ("body",)
    with pytest.raises(UserError, match="no text column 'text'"):
        text_columns_of(pa.table({"a": ["x"], "b": ["y"]}), ("text",))


def test_input_rows_give_one_row_each_in_order_with_a_status_and_kept_columns():
    df = pd.DataFrame({"text": ["good words here", "", None, "more words"], "id": [1, 2, 3, 4], "n": [0.5, 1, 2, 3]})
    chunk = input_rows(df, keep=["id"], numeric=["n"])
    t = chunk.table
    assert t.num_rows == 4 and t.column("keep:id").to_pylist() == ["1", "2", "3", "4"]   # kept as text
    assert t.column("status").to_pylist() == ["ok", "empty_text", "empty_text", "ok"]
    assert "n" in t.column_names
    with pytest.raises(UserError, match="keep: no column 'nope'"):
        input_rows(df, keep=["nope"])
    assert "keep:n" in input_rows(df, keep="all").table.column_names


def _no_pandas_copy(monkeypatch):
    """Making any pandas object fails the test: nothing is copied through pandas."""
    def refuse(*a, **k):
        raise AssertionError("copied through pandas")
    monkeypatch.setattr(pd.DataFrame, "__init__", refuse)
    monkeypatch.setattr(pd.Series, "__init__", refuse)


def test_polars_frames_and_series_are_read_as_their_arrow_data_not_through_pandas(monkeypatch):
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame({"body": ["ab cd", None, "ef gh"], "label": ["x", "y", "x"]})
    monkeypatch.setattr(pl.DataFrame, "to_pandas", lambda *a, **k: pytest.fail("copied through pandas"))
    monkeypatch.setattr(pl.Series, "to_pandas", lambda *a, **k: pytest.fail("copied through pandas"))
    _no_pandas_copy(monkeypatch)
    assert is_table(frame) and not is_table(frame["body"])
    assert as_table(frame).column_names == ["body", "label"]
    assert as_table(frame["body"]).column("text").to_pylist() == ["ab cd", None, "ef gh"]
    rows = input_rows(frame, ("body",), keep=["label"]).table
    assert rows.column("status").to_pylist() == ["ok", "empty_text", "ok"]
    assert type(like_input(frame, rows)) is pl.DataFrame and like_input(pa.table({}), rows) is rows


def test_a_hugging_face_dataset_is_read_as_its_arrow_table_in_its_own_row_order(monkeypatch):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": ["a b", "c d", "e f"], "label": [0, 1, 0]})
    _no_pandas_copy(monkeypatch)
    monkeypatch.setattr(datasets.Dataset, "to_pandas", lambda *a, **k: pytest.fail("copied through pandas"))
    assert is_table(ds) and as_table(ds).column("text").to_pylist() == ["a b", "c d", "e f"]
    assert as_table(ds.select([2, 0])).column("text").to_pylist() == ["e f", "a b"]   # after select/shuffle
    assert input_rows(ds.filter(lambda r: r["label"] == 0)).table.column("text").to_pylist() == ["a b", "e f"]
    with pytest.raises(UserError, match="DatasetDict of splits 'train'") as e:
        as_table(datasets.DatasetDict({"train": ds}))
    assert "ds['train']" in e.value.hint
    with pytest.raises(UserError, match="IterableDataset"):
        as_table(ds.to_iterable_dataset())


def test_polars_and_datasets_are_recognised_without_being_imported(monkeypatch):
    import sys

    for name in [m for m in sys.modules if m.split(".")[0] in ("polars", "datasets")]:
        monkeypatch.delitem(sys.modules, name)
    assert not is_table(["a"]) and as_table(["a b"]).num_rows == 1
    assert "polars" not in sys.modules and "datasets" not in sys.modules


def test_in_memory_rows_are_empty_text_by_the_rule_of_the_runs_analyzer():
    texts = ["好", ":)", "good film", "  "]
    words = input_rows(texts).table.column("status").to_pylist()
    chars = input_rows(texts, text_rule="visible").table.column("status").to_pylist()
    assert words == ["empty_text", "empty_text", "ok", "empty_text"]
    assert chars == ["ok", "ok", "ok", "empty_text"]


def test_pandas_input_comes_back_as_a_pandas_frame_with_the_inputs_index_polars_as_polars():
    pl = pytest.importorskip("polars")
    rows = pa.table({"status": ["ok", "ok"]})
    for data in (pd.DataFrame({"text": ["a b", "c d"]}, index=["x", "y"]), pd.Series(["a b", "c d"], index=["x", "y"])):
        out = like_input(data, rows)
        assert type(out) is pd.DataFrame and list(out.index) == ["x", "y"]
    assert type(like_input(pl.Series(["a b", "c d"]), rows)) is pl.DataFrame


def test_a_frame_without_a_numeric_column_of_the_run_is_refused_as_a_file_is_and_texts_alone_read_the_mean():
    # a file without the run's --numeric column is exit 2; a frame without it was predicted with
    # the training mean in its place, without a word
    df = pd.DataFrame({"text": ["good words here", "more words"], "nn": [0.5, 1.0]})
    with pytest.raises(UserError, match="no column 'n'.*did you mean 'nn'.*numeric n") as e:
        input_rows(df, numeric=["n"])
    assert "a list or a Series" in e.value.hint
    for texts in (["good words here", "more words"], df["text"]):   # texts alone: the mean, as documented
        assert "n" not in input_rows(texts, numeric=["n"]).table.column_names


def test_a_text_column_that_is_a_numeric_column_of_the_run_is_refused():
    # predict_table(df, text_column="n") read one column as the text and as the run's numeric input
    df = pd.DataFrame({"text": ["good words here", "more words"], "n": [0.5, 1.0]})
    with pytest.raises(UserError, match="'n' is both the text column .* and a numeric column of the run"):
        input_rows(df, text=("n",), numeric=["n"])
    assert input_rows(df, text=("text",), numeric=["n"]).table.column_names[:2] == ["text", "n"]


def test_a_column_kept_twice_is_refused():
    # predict --keep id,id stopped with an internal error; predict_table(keep=["id", "id"]) wrote it twice
    df = pd.DataFrame({"text": ["good words here", "more words"], "id": [1, 2]})
    with pytest.raises(UserError, match="keep= names the column 'id' twice"):
        input_rows(df, keep=["id", "id"])
    assert "keep:id" in input_rows(df, keep=["id", "text"]).table.column_names


def test_a_frames_column_mixing_numbers_and_words_is_read_as_the_same_values_in_a_csv_are():
    # Arrow refuses an object column of two kinds: predict_table and fit stopped with ArrowInvalid
    mixed = pd.DataFrame({"text": ["good words here", 15, "more words", "the last words"],
                          "value": [1.5, "n/a", None, 2], "id": [1, "x2", 3, None]})
    as_csv = pd.DataFrame({"text": ["good words here", "15", "more words", "the last words"],
                           "value": ["1.5", "n/a", None, "2"], "id": ["1", "x2", "3", None]})
    got = input_rows(mixed, numeric=["value"], keep=["id"])
    want = input_rows(as_csv, numeric=["value"], keep=["id"])
    assert got.table.equals(want.table) and got.noted == want.noted == {"unreadable_numeric": 1}
    assert got.table.column("value").to_pylist() == [1.5, None, None, 2.0]


def test_a_table_without_the_text_column_is_hinted_the_column_that_holds_text_as_each_caller_types_it():
    """`fit(df, "topic")` on a spreadsheet's `review text, topic, num` was hinted `name the text
    column (text_column=...)`, naming no column of the table to give it."""
    table = pa.table({"id": [1], "review text": ["x"], "topic": ["a"]})
    with pytest.raises(UserError) as e:
        text_columns_of(table, ("text",))
    assert e.value.hint == "name the text column, e.g. text_column='review text', or pass that column alone"
    assert e.value.cli[1] == "name the text column, e.g. --text-column 'review text', or pass that column alone"
