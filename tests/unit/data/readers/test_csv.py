"""data/readers/csv.py: a header line read as column names (quotes, TSV), a
header that is not UTF-8 or not CSV refused in words; blocks parsed into the
named columns with bad rows counted as malformed."""
from __future__ import annotations

import pytest

from lancetnic_flow.data.readers.csv import columns_of, header_names, parse_csv, split_header
from lancetnic_flow.data.sources import Columns
from lancetnic_flow.errors import UserError


def test_header_names_read_quoted_names_and_tabs():
    assert header_names(b'text,"the label",score\r\n', ",") == ["text", "the label", "score"]
    assert header_names(b"text\tlabel\n", "\t") == ["text", "label"]


def test_a_header_that_is_not_utf8_text_is_refused_naming_the_file_and_encoding():
    with pytest.raises(UserError, match="f.csv: the first line is not UTF-8") as e:
        header_names("texte,étiquette\n".encode("latin-1"), ",", "f.csv")
    assert "encoding NAME" in e.value.hint and "--encoding NAME" in e.value.said("cli")[1]
    with pytest.raises(UserError, match="cannot read the first line"):
        header_names(b'text,"unclosed\n', ",", "f.csv")


def test_a_csv_block_gives_the_named_columns_reads_short_rows_missing_and_counts_long_ones_malformed():
    header = b"text,label,extra\n"
    body = b"good one,pos,x\nno fields\nsecond good,neg,y\ntoo,many,fields,here\nthird one,neg\n"
    chunk = parse_csv(body, header, "csv", Columns(text=("text",), label="label"), "f.csv")
    assert chunk.table.column("text").to_pylist() == ["good one", "second good", "third one"]
    assert chunk.table.column("label").to_pylist() == ["pos", "neg", "neg"]
    assert chunk.rows_read == 5 and chunk.skipped == {"malformed": 1, "missing_label": 1}


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


def test_a_file_with_no_byte_has_no_columns_to_check_and_one_of_blank_lines_only_is_refused():
    # an empty .csv.gz (about 20 bytes on disk) stopped a glob run that skips an empty .csv
    import io

    from lancetnic_flow.data.readers.csv import columns_of

    assert columns_of(io.BytesIO(b""), "file:///d/c.csv.gz", "csv") is None
    for blank in (b"\n\n", b"  \n\t\r\n", b"\n  "):   # pandas: "No columns to parse from file"
        with pytest.raises(UserError, match="holds only blank lines"):
            columns_of(io.BytesIO(blank), "file:///d/c.csv", "csv")


# Lines before the header as pandas.read_csv skips them (skip_blank_lines): empty, spaces, tabs
# (in TSV a tab is a field), CRLF, after a byte-order mark; a file of them was refused as headerless.
_LEADS = ["\n\n", "\r\n  \r\n", "\ufeff\n\n", " \t\n" * 40, "\n" * 300]


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
@pytest.mark.parametrize("lead", _LEADS)
def test_blank_lines_before_the_header_are_skipped_as_pandas_skips_them(fmt, lead):
    import io

    import pandas as pd

    from lancetnic_flow.data.readers.csv import columns_of

    d = "," if fmt == "csv" else "\t"
    if d == "\t":
        lead = lead.replace("\t", " ")
    text = lead + f"text{d}label\n" + "".join(f"row {i}{d}l{i % 3}\n" for i in range(5))
    want = pd.read_csv(io.StringIO(text.lstrip("\ufeff")), sep=d)
    assert columns_of(io.BytesIO(text.encode()), f"f.{fmt}", fmt) == list(want.columns)
    for all_rows in (False, True):   # training's and prediction's paths
        chunk = parse_csv(text.encode(), None, fmt, Columns(text=("text",), label="label", all_rows=all_rows), "f")
        assert chunk.table.column("text").to_pylist() == want["text"].tolist()


def test_a_tab_line_before_a_tsv_header_is_a_header_of_empty_names_as_in_pandas():
    # pandas: a line of delimiters is no blank line, so "\t\n" is the header, not the line after it
    import io

    from lancetnic_flow.data.readers.csv import columns_of

    assert columns_of(io.BytesIO(b"\t\ntext\tlabel\n"), "f.tsv", "tsv") == ["", ""]


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_a_byte_order_mark_at_a_rows_start_is_no_text_wherever_the_file_is_cut(tmp_path, fmt):
    # files joined by cat: a BOM before a row was dropped where a partition started there (Arrow's parser
    # drops it at a block's start) and kept elsewhere, a label "\ufeffb" a class of its own at a large block
    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import plan_source

    d = "," if fmt == "csv" else "\t"
    bom = "\ufeff"
    path = tmp_path / f"f.{fmt}"
    path.write_bytes(f"{bom}label{d}text\na{d}goal match\n{bom}b{d}phone chip\r\n{bom}a{d}vote law\n".encode())
    for all_rows in (False, True):
        cols = Columns(text=("text",), label="label", all_rows=all_rows)
        for blocksize in (8, 1 << 20):
            rows = [r for p in plan_source([str(path)], blocksize=blocksize).partitions
                    for c in read_partition(p, cols) for r in c.table.to_pylist()]
            assert [(r["label"], r["text"]) for r in rows] == [("a", "goal match"), ("b", "phone chip"),
                                                               ("a", "vote law")], (blocksize, all_rows)


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
@pytest.mark.parametrize("compression", [None, "gzip"])
def test_every_cut_of_a_file_with_blank_lines_before_its_header_reads_each_row_once(tmp_path, fmt, compression):
    # Partitions past the start read the header separately: cut inside the blank lines or the
    # header, a partition read a blank line as the header, or the header line as a row.
    import gzip

    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import FileInfo, Partition

    d = "," if fmt == "csv" else "\t"
    rows = [f"row {i}" for i in range(30)]
    data = ("\n \r\n" * 20 + f"text{d}label\n" + "".join(f"{r}{d}x\n" for r in rows)).encode()
    path = tmp_path / f"f.{fmt}"
    path.write_bytes(gzip.compress(data) if compression else data)
    fi = FileInfo(path.as_uri(), path.stat().st_size, "v", fmt, compression)
    steps = (1 << 20,) if compression else (3, 17, 1 << 20)
    for step in steps:
        parts = [Partition(0, fi, 0, -1)] if compression else \
            [Partition(i, fi, s, min(step, fi.size - s)) for i, s in enumerate(range(0, fi.size, step))]
        for all_rows in (False, True):
            cols = Columns(text=("text",), label="label", all_rows=all_rows)
            got = [t for p in parts for c in read_partition(p, cols, chunk_bytes=16)
                   for t in c.table.column("text").to_pylist()]
            assert got == rows, (step, all_rows)


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
    assert train.rows_read == 4 and train.skipped == {"empty_text": 1}   # pandas' text of that record is missing
    for chunk in (clean, slow):
        rows = [(r["keep:id"], r["text"], r["status"]) for r in chunk.table.to_pylist()][:4]
        assert rows == [("1", "match", "ok"), ("goal lone cr", "", "empty_text"), ("2", "phone chip", "ok"),
                        ("3", "team win", "ok")]


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
@pytest.mark.parametrize("slow", [False, True], ids=["block", "row-by-row"])
def test_a_line_of_spaces_between_rows_is_blank_as_pandas_reads_it_not_a_malformed_row(fmt, slow):
    # pandas skips it (skip_blank_lines); training counted it malformed and prediction wrote a row for it
    import io

    import pandas as pd

    d = "," if fmt == "csv" else "\t"
    spaces = ["   ", " \r", "\t  " if fmt == "csv" else "  "]
    rows = [f"row number {i}{d}l{i % 3}" for i in range(6)]
    body = [rows[0], spaces[0], rows[1], rows[2], spaces[1], rows[3], spaces[2], rows[4], rows[5]]
    if slow:   # a field count that is wrong sends prediction to its row-by-row reader
        body.insert(2, f"a{d}b{d}c")
    text = f"text{d}label\n" + "\n".join(body) + "\n"
    want = pd.read_csv(io.StringIO(text), sep=d, on_bad_lines="skip")
    for all_rows in (False, True):
        chunk = parse_csv(text.encode(), None, fmt, Columns(text=("text",), label="label", all_rows=all_rows), "f")
        texts = chunk.table.column("text").to_pylist()
        if all_rows and slow:   # prediction keeps the malformed record's place, as its own row
            texts = [t for t, s in zip(texts, chunk.table.column("status").to_pylist()) if s != "malformed"]
        assert texts == want["text"].tolist(), (all_rows, texts)
        assert chunk.skipped.get("malformed", 0) == (1 if slow else 0), chunk.skipped


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
@pytest.mark.parametrize("slow", [False, True], ids=["arrow", "row by row"])
def test_a_line_of_spaces_in_a_one_column_file_is_blank_as_pandas_reads_it(fmt, slow):
    # a file of text alone: its line of spaces was a row (empty_text in training, a row of prediction's
    # output) where pandas skips it; a quoted field of spaces, or one holding a line of them, stays
    import io

    import pandas as pd

    d = "," if fmt == "csv" else "\t"
    body = ["hello world", "   ", '"   "', '"first line', "   ", 'last line"', " \t " if fmt == "csv" else "  ", "",
            "bye now", "  "]
    if slow:   # a wrong field count sends prediction to its row-by-row reader
        body.insert(1, f"a{d}b")
    text = "text\n" + "\n".join(body)
    want = pd.read_csv(io.StringIO(text), sep=d, dtype=str, keep_default_na=False, on_bad_lines="skip")["text"]
    assert want.tolist() == ["hello world", "   ", "first line\n   \nlast line", "bye now"]
    for all_rows in (False, True):
        chunk = parse_csv(text.encode(), None, fmt, Columns(text=("text",), all_rows=all_rows), "f")
        texts = chunk.table.column("text").to_pylist()
        if all_rows:
            texts = [t for t, s in zip(texts, chunk.table.column("status").to_pylist()) if s != "malformed"]
            assert texts == want.tolist(), texts
        else:   # training skips the text of spaces as empty_text, and reads no other row for them
            assert texts == ["hello world", "first line\n   \nlast line", "bye now"]
            assert chunk.skipped.get("empty_text") == 1
        assert chunk.rows_read == len(want) + slow, (all_rows, chunk.rows_read)


def test_a_short_row_holding_an_undecodable_byte_is_a_status_in_prediction_not_an_internal_error():
    # the row-by-row reader asked whether the short line was blank by encoding it: UnicodeEncodeError
    text = b"text,label\nhello world,a\n\xff\nbye now,b\n"
    chunk = parse_csv(text, None, "csv", Columns(text=("text",), label="label", all_rows=True), "f")
    assert chunk.table.column("status").to_pylist() == ["ok", "undecodable", "ok"]   # a short row is a row
    assert chunk.rows_read == 3


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_a_classic_mac_file_of_lone_cr_line_ends_reads_its_header_and_rows_as_pandas_does(fmt):
    import io

    import pandas as pd

    d = "," if fmt == "csv" else "\t"
    body = f'text{d}label\rhello world{d}a\r"bad\rday"{d}b\r'.encode()
    want = pd.read_csv(io.BytesIO(body), sep=d, dtype=str).values.tolist()
    assert want == [["hello world", "a"], ["bad\rday", "b"]]
    assert split_header(body, d) == (f"text{d}label\n".encode(), 11)
    assert columns_of(io.BytesIO(body), f"f.{fmt}", fmt) == ["text", "label"]
    got = parse_csv(body, None, fmt, Columns(text=("text",), label="label"), f"f.{fmt}").table
    assert list(zip(got.column("text").to_pylist(), got.column("label").to_pylist())) == [tuple(r) for r in want]


@pytest.mark.parametrize("end", ["\r", "\r\n"])
@pytest.mark.parametrize("bad", ['2,"an unclosed quote,b', '2,"starts with a quote,b{e}3,good day,b{e}4,a 5" screen,a'])
def test_a_malformed_quote_in_a_file_of_cr_line_ends_costs_the_rows_it_costs_with_newlines(end, bad):
    # inside an open quote a lone \r stays one: the lines an unclosed quote took were re-read at "\n" alone (the
    # rows after it lost unsaid), and a stray quote's lines were one row of three rows' text
    def read(e: str, all_rows: bool) -> list:
        body = ("id,text,label{e}1,hello world,a{e}" + bad + "{e}5,last one,b{e}").format(e=e).encode()
        cols = Columns(text=("text",), keep=("id",), all_rows=True) if all_rows else Columns(text=("text",), label="label")
        chunk = parse_csv(body, None, "csv", cols, "f.csv")
        return [chunk.rows_read, chunk.skipped, [r for r in chunk.table.to_pylist()]]

    for all_rows in (False, True):
        assert read(end, all_rows) == read("\n", all_rows), all_rows
    assert read("\n", False)[0] == 3 + bad.count("{e}") and read("\n", False)[2][-1]["text"] == "last one"


# Files the fuzzer of a session found read otherwise cut than whole: a quote opened on a malformed line was
# re-read over the lines after it past the record a cut ends, an unclosed one spent a budget of re-reads
# per block, and a stray quote's lines were re-scanned past the record a cut saw.
_CUT_CASES = [
    b'text,label\n1,z","\ndog,"\n,\na b,\r\n,z"\n1,\r\n"q\n",",a b\n z","\r\n""z""\na\n,cat\nx"y,,\n"""",dog\n',
    b'text,label\r\n,\r\n\r\n\r\n"\r",,hi there\r\n"\n\r"z""\r\nbc\r\nhi there,\r\n\n\r,, """\r\nhi there,hi there\r\n'
    b'""q x"y","a z""",\r \r\n"z""\r\ncat,hi there, \r\nbc,1,"q\r\n',
    b'text,label\rhi there,\r"x"y"q",",\r\r\n"\rdog,dog,"""\r\n\r"\ndog,"""bca",a b\r""\r\n,"a\n\r"",a \r\n\ncat,"a\n""\n"\r,"q,""',
    b'text,label\n"stray,a\nx,"b\ny",c\nlast, d" e\nz,f\n',
    # U+FFFF as text beside an undecodable byte: lines were dropped whole, breaking a quoted record
    "text,label\n\"two\nlines \uffff\",a\n".encode() + b'"bad \xff\nbyte, here",b\nnext,c\n"x\ny",d\n',
    # TSV, where a partition holding a line of tabs alone read no row
    b'text\tlabel\r\n\t\r\n\r\n\r\n""q"\t\thi there\r\n"bc"q"x"y"\r\n\t\r\nhi there\t"qz"bcbc\t" \ta"""\r\n\r\n'
    b'hi there\thi there\r\n"\r\na\n"\t",ax"y""\t"q\r\r\n"\r\n"""qx"y"\t\r\n1\t""az"""',
]


@pytest.mark.parametrize("data", _CUT_CASES)
def test_a_malformed_csv_reads_the_same_rows_texts_labels_and_statuses_however_it_is_cut(tmp_path, data):
    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import FileInfo, Partition

    fmt = "tsv" if data.startswith(b"text\t") else "csv"
    path = tmp_path / f"f.{fmt}"
    path.write_bytes(data)
    fi = FileInfo(path.as_uri(), len(data), "v", fmt, None)

    def read(step: int, cols: Columns) -> tuple:
        parts = [Partition(i, fi, s, min(step, fi.size - s)) for i, s in enumerate(range(0, fi.size, step))]
        chunks = [c for p in parts for c in read_partition(p, cols)]
        skipped: dict[str, int] = {}
        for c in chunks:
            for k, v in c.skipped.items():
                skipped[k] = skipped.get(k, 0) + v
        rows = [r for c in chunks for r in c.table.to_pylist()]
        return rows, {k: v for k, v in skipped.items() if v}, sum(c.rows_read for c in chunks)

    for cols in (Columns(text=("text",), label="label"), Columns(text=("text",), keep_all=True, all_rows=True)):
        whole = read(len(data), cols)
        for step in (1, 2, 3, 5, 7, 11, 16, 23, 32, 64, 97):
            assert read(step, cols) == whole, (step, cols.all_rows)


def test_a_tsv_block_of_a_line_of_tabs_alone_is_a_row_of_empty_fields_not_nothing():
    # a partition holding only "\t\n" was taken for whitespace: prediction wrote one row fewer there
    for all_rows in (False, True):
        chunk = parse_csv(b"\t\n", b"text\tlabel\n", "tsv", Columns(text=("text",), label="label", all_rows=all_rows),
                          "f.tsv")
        assert chunk.rows_read == 1 and chunk.skipped == {"empty_text": 1}
    assert parse_csv(b" \n\n", b"text\tlabel\n", "tsv", Columns(text=("text",)), "f.tsv").rows_read == 0


def test_a_line_of_tabs_an_unclosed_tsv_quote_took_is_read_again_as_a_row():
    listed = parse_csv(b'"open\n\t\n', b"text\tlabel\n", "tsv", Columns(text=("text",), all_rows=True), "f.tsv")
    assert listed.table["status"].to_pylist() == ["malformed", "empty_text"]


# A stray quote (its record's rows read again: the screen's), a quoted field over two lines in a row of three
# fields (its second line read again, one field too many), a quote never closed (to the block's end), a row of
# three fields on one line (prediction lists it in place).
_ONE_BAD = [('"a stray quote{d}b\nthe 5" screen{d}a', 1), ('"a text over\ntwo lines"{d}b{d}extra', 2),
            ('"never closed{d}b', 1), ("one{d}too{d}many", 1)]


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
@pytest.mark.parametrize("bad, malformed", _ONE_BAD)
def test_a_block_with_one_bad_record_reads_that_record_alone_one_by_one_and_the_same_rows_as_all_of_them(
        fmt, bad, malformed, monkeypatch):
    # a stray quote, or a quoted field over two lines in a row of three fields (in prediction any malformed
    # row), sent every record of its block through Python's csv module one by one: 0.7 s for a 29 MB block
    # where the clean block takes 0.15 s
    from lancetnic_flow.data.readers import csv as reader

    d = "," if fmt == "csv" else "\t"
    rows = [f"row {i} text{d}{'ab'[i % 2]}" for i in range(400)]
    rows = rows[:150] + [bad.format(d=d)] + (rows[150:] if not bad.startswith('"never') else [])
    header = f"text{d}label\n".encode()
    calls = []
    one_row = reader._one_row
    monkeypatch.setattr(reader, "_one_row", lambda *a: calls.append(1) or one_row(*a))
    for cols in (Columns(text=("text",), label="label"), Columns(text=("text",), keep_all=True, all_rows=True)):
        # training marks an undecodable byte in the rows Arrow reads, as in a clean block
        lines = rows if cols.all_rows else rows[:20] + [f"an undecodable \udcff byte{d}a"] + rows[21:]
        body = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
        calls.clear()
        got = parse_csv(body, header, fmt, cols, f"f.{fmt}")
        assert len(calls) <= 2, len(calls)
        names = reader.header_names(header, d)
        want = reader._rows_in_order(body, names, d, cols.read_names(names), cols)   # every record one by one
        assert (got.table.to_pylist(), got.skipped, got.rows_read) == (want.table.to_pylist(), want.skipped,
                                                                       want.rows_read)
        assert got.skipped.get("malformed") == malformed and len(want.table) > 100


@pytest.mark.parametrize("bad, malformed", _ONE_BAD)
def test_a_block_with_one_bad_record_is_scanned_for_stray_quotes_once_and_for_misfits_once(bad, malformed,
                                                                                             monkeypatch):
    # the slow path scanned the whole block for stray quotes again after the fast read had: each scan is about
    # as long as Arrow's parse of the block
    from lancetnic_flow.data.readers import csv as reader

    rows = [f"row {i} text,{'ab'[i % 2]}" for i in range(300)]
    body = ("\n".join(rows[:150] + [bad.format(d=",")] + rows[150:]) + "\n").encode()
    scans: list[str] = []

    def counted(name: str, scan):
        def counting(data, *args):
            if len(data) == len(body):   # the whole block, not one record read on its own
                scans.append(name)
            return scan(data, *args)
        return counting

    for name in ("records", "misfit_records"):
        monkeypatch.setattr(reader, name, counted(name, getattr(reader, name)))
    for cols in (Columns(text=("text",), label="label"), Columns(text=("text",), keep_all=True, all_rows=True)):
        scans.clear()
        got = parse_csv(body, b"text,label\n", "csv", cols, "f.csv")
        assert got.skipped.get("malformed", 0) + (got.table["status"].to_pylist().count("malformed")
                                                  if cols.all_rows else 0) >= 1
        assert scans.count("records") == 1 and scans.count("misfit_records") <= 1, scans


def test_a_block_with_a_few_short_rows_puts_them_in_place_without_reading_it_again_as_the_padded_read_does(
        monkeypatch):
    # a block holding one short row was read twice by Arrow (the second time with the delimiters it lacks):
    # 0.27 s for a 29 MB block where the clean one takes 0.13 s. Random blocks of short and long rows, quoted
    # line ends, blank lines and CRLF read the same either way.
    import random

    from lancetnic_flow.data.readers import csv as reader

    pieces = ['a b', '"q,\nx"', '', ' ', '"z""y"', 'w\r', 'hi there', '"\n"', 'x"y']
    padded = []
    real = reader.padded_short_records
    monkeypatch.setattr(reader, "padded_short_records", lambda *a: padded.append(1) or real(*a))
    for seed in range(60):
        rng = random.Random(seed)
        d, width = rng.choice([",", "\t"]), rng.randint(2, 4)
        body = "".join(d.join(rng.choice(pieces) for _ in range(rng.choice([0, 1, width, width - 1, width + 1])))
                       + rng.choice(["\n", "\r\n"]) for _ in range(rng.randint(1, 40))).encode()
        header = d.join(["text", "label", "c", "e"][:width]).encode() + b"\n"
        fmt = "csv" if d == "," else "tsv"
        for cols in (Columns(text=("text",), label="label"), Columns(text=("text",), keep_all=True, all_rows=True)):
            monkeypatch.setattr(reader, "_SPLICED", 256)
            padded.clear()
            spliced = parse_csv(body, header, fmt, cols, "f")
            assert not padded, seed
            monkeypatch.setattr(reader, "_SPLICED", 0)   # every block with a short row read again padded
            again = parse_csv(body, header, fmt, cols, "f")
            assert (spliced.table.to_pylist(), spliced.skipped, spliced.rows_read) == (
                again.table.to_pylist(), again.skipped, again.rows_read), seed


def test_a_kept_column_holding_bytes_that_are_not_utf8_keeps_them_whole_so_two_ids_never_merge():
    # as U+FFFD, "\xff1" and "\xfe1" were both written "\ufffd1": two rows' ids read back as one
    cols = Columns(text=("text",), keep=("id",), all_rows=True)
    chunk = parse_csv(b"id,text\n\xff1,hello world\n\xfe1,good day\nab,caf\xe9 x\n", None, "csv", cols, "f")
    rows = chunk.table.to_pylist()
    assert [r["keep:id"] for r in rows] == [b"\xff1", b"\xfe1", b"ab"]
    # the row is "undecodable" where the text holds such a byte, not where a kept value alone does (as in
    # Parquet): prediction writes the rows training reads
    assert [r["status"] for r in rows] == ["ok", "ok", "undecodable"] and rows[2]["text"] == ""
    trained = parse_csv(b"id,text\n\xff1,hello world\n\xfe1,good day\nab,caf\xe9 x\n", None, "csv",
                        Columns(text=("text",)), "f")
    assert trained.table.column("text").to_pylist() == ["hello world", "good day"]


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_a_byte_order_mark_after_a_line_end_inside_a_quoted_field_is_the_fields_text_at_every_blocksize(
        tmp_path, fmt):
    # only a BOM at a row's start is no text: one after a quoted field's line end was dropped with them
    import csv as pycsv
    import io

    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import plan_source

    d = "," if fmt == "csv" else "\t"
    bom = "\ufeff"
    text = (f'label{d}text\na{d}"quoted\n{bom}second line"\n{bom}b{d}plain\n'
            f'a{d}"two\r\n{bom}lines\r\n{bom}more"\r\n')
    path = tmp_path / f"f.{fmt}"
    path.write_bytes(text.encode())
    want = [(r[0].lstrip(bom), r[1]) for r in pycsv.reader(io.StringIO(text, newline=""), delimiter=d)][1:]
    assert want[0] == ("a", f"quoted\n{bom}second line")
    for all_rows in (False, True):
        cols = Columns(text=("text",), label="label", all_rows=all_rows)
        for blocksize in (8, 20, 40, 1 << 20):
            rows = [r for p in plan_source([str(path)], blocksize=blocksize).partitions
                    for c in read_partition(p, cols) for r in c.table.to_pylist()]
            assert [(r["label"], r["text"]) for r in rows] == want, (blocksize, all_rows)


@pytest.mark.parametrize("delimiter", [";", "|"])
def test_a_csv_file_split_by_another_delimiter_reads_as_pythons_csv_module_reads_it_at_every_blocksize(
        tmp_path, delimiter):
    # a ';' file (common in Europe) could not be read at all: its header was one column 'id;text;label'
    import csv as pycsv
    import io

    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.readers.csv import head_columns
    from lancetnic_flow.data.sources import plan_source

    out = io.StringIO(newline="")
    w = pycsv.writer(out, delimiter=delimiter, lineterminator="\n")
    w.writerow(["id", "text", "label"])
    texts = ["goal; match", "phone, chip", 'a "quoted"; b', f"two\nlines{delimiter} here", "plain text", "xx|yy;zz,ww"]
    for i in range(30):
        w.writerow([i, texts[i % len(texts)], "ab"[i % 2]])
    path = tmp_path / "f.csv"
    path.write_text(out.getvalue(), newline="")
    want = [(r[1], r[2], r[0]) for r in pycsv.reader(io.StringIO(out.getvalue(), newline=""),
                                                     delimiter=delimiter)][1:]
    plan = plan_source([str(path)])
    assert head_columns(plan.files[0], None, None, delimiter) == ["id", "text", "label"]
    for all_rows in (False, True):
        cols = Columns(text=("text",), label="label", keep=("id",) if all_rows else (), all_rows=all_rows,
                       delimiter=delimiter)
        for blocksize in (16, 64, 200, 1 << 20):
            rows = [r for p in plan_source([str(path)], blocksize=blocksize).partitions
                    for c in read_partition(p, cols) for r in c.table.to_pylist()]
            got = [(r["text"], r["label"], r["keep:id"] if all_rows else want[i][2]) for i, r in enumerate(rows)]
            assert got == want, (blocksize, all_rows)
    with pytest.raises(UserError, match="no column 'text'") as e:   # read with ',': the hint names the option
        list(read_partition(plan.partitions[0], Columns(text=("text",), label="label")))
    assert f"--delimiter '{delimiter}'" in e.value.said("cli")[1]
