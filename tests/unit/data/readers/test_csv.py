"""data/readers/csv.py: a header line read as column names (quotes, TSV), a
header that is not UTF-8 or not CSV refused in words; blocks parsed into the
named columns with bad rows counted as malformed."""
from __future__ import annotations

import pytest

from lancetnic_flow.data.readers.csv import header_names, parse_csv
from lancetnic_flow.data.sources import Columns
from lancetnic_flow.errors import UserError


def test_header_names_read_quoted_names_and_tabs():
    assert header_names(b'text,"the label",score\r\n', ",") == ["text", "the label", "score"]
    assert header_names(b"text\tlabel\n", "\t") == ["text", "label"]


def test_a_header_that_is_not_utf8_text_is_refused_naming_the_file_and_encoding():
    with pytest.raises(UserError, match="f.csv: the first line is not UTF-8") as e:
        header_names("texte,étiquette\n".encode("latin-1"), ",", "f.csv")
    assert "--encoding" in e.value.hint
    with pytest.raises(UserError, match="cannot read the first line"):
        header_names(b'text,"unclosed\n', ",", "f.csv")


def test_a_csv_block_gives_the_named_columns_and_counts_wrong_field_counts_as_malformed():
    header = b"text,label,extra\n"
    body = b"good one,pos,x\nno fields\nsecond good,neg,y\ntoo,many,fields,here\n"
    chunk = parse_csv(body, header, "csv", Columns(text=("text",), label="label"), "f.csv")
    assert chunk.table.column("text").to_pylist() == ["good one", "second good"]
    assert chunk.table.column("label").to_pylist() == ["pos", "neg"]
    assert chunk.rows_read == 4 and chunk.skipped == {"malformed": 2}


def test_an_undecodable_byte_skips_its_record_once_across_quoted_line_ends_and_spares_u_fffd_text():
    header = b"text,label\n"
    body = (b'"first, over\ntwo lines",a\n'
            b'"bad one\nwith its bad byte \xff here",b\n'      # the byte on the record's second line
            + "keeps \ufffd as text,c\n".encode()
            + b'"last\none",d\n')
    chunk = parse_csv(body, header, "csv", Columns(text=("text",), label="label"), "f.csv")
    assert chunk.table.column("label").to_pylist() == ["a", "c", "d"]
    assert chunk.table.column("text").to_pylist()[1] == "keeps \ufffd as text"
    assert chunk.skipped == {"undecodable": 1} and chunk.rows_read == 4


@pytest.mark.parametrize("fmt, sep", [("tsv", "\t"), ("csv", ",")])
def test_a_stray_quote_that_takes_the_lines_after_it_costs_its_own_row_only(fmt, sep):
    # row 3's text starts with a quote that a later text's inch mark "closes", with text behind it
    rows = [f"r{i} alpha beta{sep}{'ab'[i % 2]}" for i in range(12)]
    rows[3] = f'"a quote that never closes{sep}b'
    rows[8] = f'the 5" screen{sep}a'
    body = ("\n".join(rows) + "\n").encode()
    header = f"text{sep}label\n".encode()
    chunk = parse_csv(body, header, fmt, Columns(text=("text",), label="label"), f"f.{fmt}")
    texts = chunk.table.column("text").to_pylist()
    assert len(texts) == 11 and chunk.skipped == {"malformed": 1} and chunk.rows_read == 12
    assert 'the 5" screen' in texts and all("\n" not in t for t in texts)
    # prediction keeps every row in place, the stray's as malformed
    listed = parse_csv(body, header, fmt, Columns(text=("text",), all_rows=True), f"f.{fmt}")
    assert listed.table["status"].to_pylist() == ["ok"] * 3 + ["malformed"] + ["ok"] * 8


def test_a_well_formed_quoted_field_over_several_lines_is_no_stray():
    body = b'"one\nover two lines",a\n"say ""hi""\nthen go",b\nplain,c\n'
    chunk = parse_csv(body, b"text,label\n", "csv", Columns(text=("text",), label="label"), "f.csv")
    assert chunk.table.column("label").to_pylist() == ["a", "b", "c"] and chunk.skipped == {}


def test_a_file_with_no_byte_has_no_columns_to_check_and_a_blank_first_line_is_refused():
    # an empty .csv.gz (about 20 bytes on disk) stopped a glob run that skips an empty .csv
    import io

    from lancetnic_flow.data.readers.csv import columns_of

    assert columns_of(io.BytesIO(b""), "file:///d/c.csv.gz", "csv") is None
    with pytest.raises(UserError, match="no header line"):
        columns_of(io.BytesIO(b"\n\nx,y\n"), "file:///d/c.csv", "csv")


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_an_unquoted_lone_cr_ends_a_record_in_prediction_as_in_training_and_pandas(fmt):
    # Python's csv.writer(lineterminator="\n") leaves a field holding "\r" unquoted. Arrow (training, and
    # prediction of a clean block) and pandas end the record there; prediction's per-line path for a
    # block with a bad row cut lines at "\n" only, so the same row was one text there and two rows in training.
    import io

    import pandas as pd

    d = "," if fmt == "csv" else "\t"
    body = f"id{d}text\n1{d}match\rgoal lone cr\n2{d}phone chip\r3{d}team win\r\n".encode()
    records = pd.read_csv(io.BytesIO(body), sep=d, dtype=str, keep_default_na=False).values.tolist()
    assert records == [["1", "match"], ["goal lone cr", ""], ["2", "phone chip"], ["3", "team win"]]   # 4 records
    train = parse_csv(body, None, fmt, Columns(text=("text",)), f"f.{fmt}")
    cols = Columns(text=("text",), keep=("id",), all_rows=True)
    clean = parse_csv(body, None, fmt, cols, f"f.{fmt}")
    slow = parse_csv(body + f"4{d}bad \xff byte\n".encode("latin-1"), None, fmt, cols, f"f.{fmt}")
    assert train.table.column("text").to_pylist() == ["match", "phone chip", "team win"]
    assert train.rows_read == 4 and train.skipped == {"malformed": 1}
    for chunk in (clean, slow):
        rows = [(r["keep:id"], r["text"], r["status"]) for r in chunk.table.to_pylist()][:4]
        assert rows == [("1", "match", "ok"), (None, "", "malformed"), ("2", "phone chip", "ok"), ("3", "team win", "ok")]
