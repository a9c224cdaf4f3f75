"""data/readers/lines.py: plain text lines (blank lines are no rows) and
fastText lines (__label__ tags, one per row unless multilabel); the line
formats refuse options they have no columns for."""
from __future__ import annotations

import pytest

from lancetnic_flow.data.readers.labels import LabelListError
from lancetnic_flow.data.readers.lines import check_line_columns, parse_lines
from lancetnic_flow.data.sources import Columns
from lancetnic_flow.errors import UserError


def test_text_lines_are_rows_trimmed_and_blank_ones_dropped():
    chunk = parse_lines(b"  first line \n\n   \nsecond\n", "text", Columns(text=("text",)), "f.txt")
    assert chunk.table.column("text").to_pylist() == ["first line", "second"]


def test_fasttext_lines_give_text_and_label():
    chunk = parse_lines(b"__label__pos great film\n__label__neg dull\n", "fasttext",
                        Columns(text=("text",), label="label"), "f.ft")
    assert chunk.table.column("text").to_pylist() == ["great film", "dull"]
    assert chunk.table.column("label").to_pylist() == ["pos", "neg"]


def test_several_tags_are_a_label_set_with_multilabel_and_refused_without():
    data = b"__label__a __label__b both\n__label__c one\n"
    multi = parse_lines(data, "fasttext", Columns(text=("text",), label="label", multilabel=True), "f.ft")
    assert multi.table.column("label").to_pylist() == [["a", "b"], ["c"]]
    with pytest.raises(LabelListError, match="--task multilabel"):
        parse_lines(data, "fasttext", Columns(text=("text",), label="label"), "f.ft")


@pytest.mark.parametrize("columns,match", [(Columns(text=("text",), target="y"), "no numeric columns"),
                                           (Columns(text=("text",), keep=("id",)), "no columns to keep"),
                                           (Columns(text=("text",), label="label"), "text format has no labels")])
def test_the_line_formats_refuse_columns_they_do_not_have(columns, match):
    with pytest.raises(UserError, match=match):
        check_line_columns("f.txt", "text", columns)
