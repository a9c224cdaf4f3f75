"""data/frames.py: in-memory inputs (lists, NumPy, pandas, Arrow) as
prediction rows: numbers read as text, missing values as empty_text, extra
columns kept by name, and inputs that are no texts refused in words."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from lancetnic_flow.data.frames import as_table, input_rows, is_table, text_columns_of
from lancetnic_flow.errors import UserError


@pytest.mark.parametrize("data", [["a b", "c d"], np.array(["a b", "c d"]), np.array([["a b"], ["c d"]]),
                                  pd.Series(["a b", "c d"]), pa.array(["a b", "c d"]), iter(["a b", "c d"])])
def test_every_supported_sequence_of_texts_becomes_one_text_column(data):
    assert as_table(data).column("text").to_pylist() == ["a b", "c d"]


def test_numbers_become_their_text_and_none_or_nan_missing():
    assert as_table([1, 2.5, None, float("nan"), b"by\xfftes"]).column("text").to_pylist() == \
        ["1", "2.5", None, None, "by\ufffdtes"]


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
    chunk = input_rows(df, keep=["id"], numeric=["n", "absent"])
    t = chunk.table
    assert t.num_rows == 4 and t.column("keep:id").to_pylist() == ["1", "2", "3", "4"]   # kept as text
    assert t.column("status").to_pylist() == ["ok", "empty_text", "empty_text", "ok"]
    assert "n" in t.column_names and "absent" not in t.column_names
    with pytest.raises(UserError, match="keep: no column 'nope'"):
        input_rows(df, keep=["nope"])
    assert "keep:n" in input_rows(df, keep="all").table.column_names
