"""data/readers/jsonl.py: JSON Lines blocks give the named columns; a text
that is a number, list or object is skipped as not_text, never trained as its
JSON; a malformed line is counted; a missing column is named; labels may be
numbers."""
from __future__ import annotations

import pytest

from lancetnic_flow.data.readers.jsonl import parse_jsonl
from lancetnic_flow.data.sources import Columns
from lancetnic_flow.errors import UserError

COLS = Columns(text=("text",), label="label")


def test_a_clean_block_gives_the_named_columns_with_number_labels_as_text():
    chunk = parse_jsonl(b'{"text": "one two", "label": 1}\n{"text": "three", "label": "b"}\n', COLS, "f.jsonl")
    assert chunk.table.column("text").to_pylist() == ["one two", "three"]
    assert chunk.table.column("label").to_pylist() == ["1", "b"]
    assert chunk.rows_read == 2 and chunk.skipped == {}


def test_texts_that_are_not_text_and_malformed_lines_are_skipped_by_reason():
    data = (b'{"text": "fine words", "label": "a"}\n{"text": 42, "label": "a"}\n{"text": ["x"], "label": "b"}\n'
            b'{not json\n{"text": "more words", "label": "b"}\n')
    chunk = parse_jsonl(data, COLS, "f.jsonl")
    assert chunk.table.column("text").to_pylist() == ["fine words", "more words"]
    assert chunk.skipped == {"not_text": 2, "malformed": 1} and chunk.rows_read == 5


def test_a_missing_column_is_named_with_the_columns_there_are():
    with pytest.raises(UserError, match="label"):
        parse_jsonl(b'{"text": "x", "tag": "a"}\n', COLS, "f.jsonl")


def test_an_empty_block_has_no_rows():
    assert parse_jsonl(b"\n\n", COLS, "f.jsonl").table.num_rows == 0
