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


@pytest.mark.parametrize("all_rows", [False, True])   # training's and prediction's per-line paths
def test_a_number_label_reads_the_same_whichever_path_reads_its_block(all_rows):
    cols = Columns(text=("text",), label="label", all_rows=all_rows)
    lines = [b'{"text": "words here", "label": %s}' % v for v in (b"2.0", b"1e-07", b"3", b"0.5", b"true")]
    clean = parse_jsonl(b"\n".join(lines) + b"\n", cols, "f.jsonl")
    # one malformed line sends the whole block down the per-line path
    slow = parse_jsonl(b"\n".join(lines) + b"\n{not json\n", cols, "f.jsonl")
    labels = clean.table.column("label").to_pylist()
    assert labels == ["2", "1e-7", "3", "0.5", "true"]
    assert [v for v in slow.table.column("label").to_pylist() if v is not None] == labels


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


@pytest.mark.parametrize("suffix", ["", ".gz", ".bz2", ".xz", ".zst"])
def test_the_columns_of_a_compressed_file_are_read_whatever_its_compression(tmp_path, suffix):
    """Before: a .jsonl.zst file was refused ("cannot read (UnsupportedOperation)"): the head was read
    with ``for line in f``, and zstandard's decompressing stream has no readline."""
    from lancetnic_flow.data.sources import FileInfo
    from lancetnic_flow.data.synth import write_corpus
    from lancetnic_flow.formats import COMPRESSION_SUFFIXES, format_named

    path = tmp_path / f"c.jsonl{suffix}"
    write_corpus(str(path), 50, classes=2, seed=1)
    fi = FileInfo(str(path), path.stat().st_size, "", "jsonl", COMPRESSION_SUFFIXES.get(suffix))
    assert {"text", "label"} <= set(format_named("jsonl").head_columns()(fi, None))


def test_read_lines_gives_every_line_with_its_newline_across_chunk_edges():
    import io

    from lancetnic_flow.data.readers.table import read_lines

    data = b"ab\n\ncdefg\nh"
    for chunk in (1, 2, 3, 64):
        assert list(read_lines(io.BytesIO(data), chunk)) == [b"ab\n", b"\n", b"cdefg\n", b"h"]
