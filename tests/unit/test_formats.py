"""The format registry's conformance: every registered format (taken from the
registry, not a list here) reads back what its writer wrote, is found by each
of its extensions with or without a compression suffix, and, when it splits
by bytes, gives every row once wherever the byte ranges are cut. And a format
registered here is read, written by make-data and by prediction outputs,
with nothing else to change. Pure unit tests: files in tmp_path, no cluster."""
from __future__ import annotations

import dataclasses
import io
import json
import math
import random

import pyarrow as pa
import pytest

from lancetnic_flow import formats
from lancetnic_flow.data.readers import read_partition
from lancetnic_flow.data.sources import Columns, Partition, plan_source
from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.data.writers import json_lines
from lancetnic_flow.errors import UserError
from lancetnic_flow.formats import Format, format_for_path, format_named, register_format, registered
from lancetnic_flow.runs.outputs import encode, output_format

FORMATS = registered()
IDS = [f.name for f in FORMATS]


def sample(fmt: Format, line_ends: bool = True) -> pa.Table:
    """Rows that test a format: commas, quotes, tabs, unicode, an empty text,
    a text with a line end where the format holds one, labels, a number."""
    texts = ["plain words here", 'commas, "quoted" words, and more', "ünïcödé 日本語 ‘curly’ text",
             "a tab\tinside it", '"starts with a quote', "ends with a backslash \\"]
    if fmt.holds_line_ends and line_ends:
        texts += ["two\nlines of text", "a carriage\r\nreturn too"]
    if fmt.columns != ("text",):   # a blank line is no row: text lines cannot hold an empty text
        texts.append("")
    cols = {"text": texts}
    if fmt.holds(["label"]):
        cols["label"] = [["pos", "neg", "ünï"][i % 3] for i in range(len(texts))]
    if fmt.columns is None:
        cols["score"] = [i * 0.25 - 1 for i in range(len(texts))]
    return pa.table(cols)


def written(tmp_path, fmt: Format, table: pa.Table, suffix: str = "") -> str:
    path = tmp_path / f"data{fmt.extensions[0]}{suffix}"
    path.write_bytes(encode(table, fmt.name))
    return str(path)


def columns_for(table: pa.Table, **kw) -> Columns:
    return Columns(text=("text",), label="label" if "label" in table.column_names else None,
                   target="score" if "score" in table.column_names else None, **kw)


def read_back(partitions, columns: Columns) -> tuple[pa.Table, int]:
    tables, rows = [], 0
    for part in partitions:
        for chunk in read_partition(part, columns):
            if chunk.table.num_rows:   # a range with no line start in it has no rows (nor columns)
                tables.append(chunk.table)
            rows += chunk.rows_read
    return pa.concat_tables(tables), rows


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_every_registered_format_reads_back_what_its_writer_wrote(tmp_path, fmt):
    table = sample(fmt)
    plan = plan_source([written(tmp_path, fmt, table)])
    assert plan.files[0].format == fmt.name
    got, rows = read_back(plan.partitions, columns_for(table, all_rows=True))
    assert rows == table.num_rows
    expected = table.column("text").to_pylist()
    if not fmt.holds_line_ends:   # a line format's reader trims each line
        expected = [t.strip() for t in expected]
    assert got.column("text").to_pylist() == expected
    assert got.column("status").to_pylist() == ["ok" if t else "empty_text" for t in expected]
    if "label" in table.column_names:
        assert got.column("label").to_pylist() == table.column("label").to_pylist()
    if "score" in table.column_names:
        assert got.column("target").to_pylist() == table.column("score").to_pylist()


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f.columns is not None], ids=lambda f: f.name)
def test_a_line_format_writes_a_line_end_inside_a_text_as_a_space_and_keeps_the_rows(tmp_path, fmt):
    table = pa.table({"text": ["one\ntwo", "three\r\nfour"], **({"label": ["a", "b"]} if fmt.holds(["label"]) else {})})
    got, rows = read_back(plan_source([written(tmp_path, fmt, table)]).partitions, columns_for(table, all_rows=True))
    assert rows == 2 and got.column("text").to_pylist() == ["one two", "three four"]


def _cases():
    for fmt in FORMATS:
        for ext in fmt.extensions:
            for suffix, comp in [("", None), *(formats.COMPRESSION_SUFFIXES.items() if fmt.compressible else ())]:
                yield pytest.param(fmt, ext, suffix, comp, id=f"{fmt.name}-{ext}{suffix}")


@pytest.mark.parametrize("fmt,ext,suffix,comp", list(_cases()))
def test_every_registered_extension_names_its_format_with_or_without_compression(fmt, ext, suffix, comp):
    for url in (f"data{ext}{suffix}", f"s3://bucket/a.b/data{ext}{suffix}".upper().replace("S3://", "s3://"),
                f"https://host/data{ext}{suffix}?version=2"):
        assert format_for_path(url) == (fmt, comp), url
    assert format_named(fmt.name) is fmt
    assert formats.EXTENSIONS[ext] == fmt.name and fmt.name in formats.FORMATS


@pytest.mark.parametrize("fmt", [f for f in FORMATS if not f.compressible], ids=lambda f: f.name)
def test_a_format_that_compresses_itself_refuses_a_compression_suffix(tmp_path, fmt):
    path = written(tmp_path, fmt, sample(fmt), ".gz")
    with pytest.raises(UserError, match="cannot be compressed"):
        plan_source([path])
    with pytest.raises(UserError, match="compresses itself"):
        output_format(path)


def test_an_unknown_extension_or_name_is_no_format():
    assert format_for_path("notes.md") == (None, None)
    assert format_for_path("notes.md.gz") == (None, "gzip")
    with pytest.raises(UserError, match="unknown format 'xls'"):
        format_named("xls")


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f.splits_by_bytes], ids=lambda f: f.name)
def test_byte_ranges_give_every_row_once_wherever_they_are_cut(tmp_path, fmt):
    # Line ends inside a field are kept out: a byte range is cut at any b"\n".
    table = pa.concat_tables([sample(fmt, line_ends=False)] * 7)
    path = written(tmp_path, fmt, table)
    fi = plan_source([path]).files[0]
    columns = columns_for(table, all_rows=True)
    whole, _ = read_back([Partition(0, fi, 0, fi.size)], columns)
    assert whole.num_rows == table.num_rows
    rng = random.Random(7)
    for cuts in ([1], list(range(1, fi.size, 5)), *[sorted(rng.sample(range(1, fi.size), k)) for k in (2, 9, 40)]):
        bounds = [0, *cuts, fi.size]
        parts = [Partition(i, fi, a, b - a) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]
        got, rows = read_back(parts, columns)
        assert rows == table.num_rows and got.equals(whole), cuts[:5]


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_every_registered_format_names_a_reader_and_writer_that_exist(fmt):
    assert callable(fmt.parse())
    assert fmt.writer is not None and fmt.open_writer(io.BytesIO(), sample(fmt).schema) is not None
    assert fmt.splits_by_bytes or callable(fmt.pieces_of())
    assert fmt.columns is not None or callable(fmt.head_columns())


def test_json_lines_are_what_json_dumps_writes_and_read_back_as_the_same_values():
    table = pa.table({
        "text": ['q "x" \\ y', "nl\ncr\r\ttab", "ctl \x00\x01\x1f \x7f ü", None],
        "n": [1, None, -3, 2**40], "ok": [True, False, None, True],
        "p": [0.5, 1.0, float("nan"), 1e-05], "tags": [["a", 'b"'], [], None, ["ü"]],
        "probs": [[0.25, 1.0], [], None, [2e-7]], "nested": [{"k": 1}, None, {"k": 2}, {"k": 3}],
    })
    got = json_lines(table).decode().splitlines()

    def clean(v):
        return None if isinstance(v, float) and not math.isfinite(v) else v

    want = [json.dumps({k: clean(v) for k, v in row.items()}, ensure_ascii=False) for row in table.to_pylist()]
    assert [json.loads(g) for g in got] == [json.loads(w) for w in want]
    no_floats = table.drop_columns(["p", "probs"])
    assert json_lines(no_floats).decode().splitlines() == [
        json.dumps(r, ensure_ascii=False) for r in no_floats.to_pylist()]
    assert '"p": 1.0' in got[1]   # a whole float stays a float


def test_prediction_outputs_refuse_a_format_that_cannot_hold_their_columns():
    for fmt in FORMATS:
        if not fmt.holds(["text", "status", "predicted"]):
            with pytest.raises(UserError, match=f"the {fmt.shown} format cannot hold") as e:
                output_format(f"out{fmt.extensions[0]}")
            assert ".csv" in e.value.hint and ".parquet" in e.value.hint
    with pytest.raises(UserError, match="cannot tell the format"):
        output_format("out.xlsx")


@pytest.fixture
def psv():
    """A toy format, pipe-separated values, registered for one test."""
    fmt = register_format(Format(
        "psv", (".psv",), True, "lancetnic_flow.data.readers.csv:parse_csv",
        writer="lancetnic_flow.data.writers:DelimitedWriter", head="lancetnic_flow.data.readers.csv:head_columns",
        header=True, delimiter="|", title="PSV"))
    yield fmt
    formats.unregister_format("psv")


def test_a_registered_format_is_read_written_by_make_data_and_by_predictions(tmp_path, psv):
    assert format_for_path("x.PSV.gz") == (psv, "gzip") and "psv" in formats.FORMATS
    info = write_corpus(str(tmp_path / "corpus.psv"), 300, classes=3, seed=1)
    assert info["format"] == "psv"
    assert (tmp_path / "corpus.psv").read_text().startswith("text|label|value|target\n")
    assert write_corpus(str(tmp_path / "named.data"), 10, format="psv")["format"] == "psv"
    plan = plan_source([str(tmp_path / "corpus.psv")], blocksize=4096)
    assert len(plan.partitions) > 1 and plan.files[0].format == "psv"
    got, rows = read_back(plan.partitions, Columns(text=("text",), label="label", target="target"))
    assert rows == got.num_rows == 300 and set(got.column("label").to_pylist()) == {"sports", "tech", "politics"}
    assert output_format(str(tmp_path / "out.psv.zst")) == "psv"
    table = sample(psv)
    back, _ = read_back(plan_source([written(tmp_path, psv, table)]).partitions, columns_for(table, all_rows=True))
    assert back.column("text").to_pylist() == table.column("text").to_pylist()
    with pytest.raises(ValueError, match="belongs to 'csv'"):
        register_format(Format("csv2", (".csv",), True, psv.reader))


# ---------------------------------------------------------------- sniffing: a name that does not settle the format


def head(text: str, names=()) -> formats.Head:
    return formats.Head.of(text.encode(), True, names)


@pytest.mark.parametrize("text,names,want,why", [
    ("__label__a __label__b some text\n__label__c more text\n", (), "fasttext", "lines start with __label__"),
    ("__label__a one\nno label on this line\n__label__b two\n", (), "fasttext", "lines start with __label__"),
    ('{"text": "a, b", "label": "x"}\n{"text": "c", "label": "y"}\n', (), "jsonl", "lines are JSON objects"),
    ("text,label\nhello there,a\n", ("text", "label"), "csv", "names the columns text, label, split by commas"),
    ("id,body,tag\n1,hello,a\n2,bye,b\n", (), "csv", "names 3 columns (id, body, tag)"),
    ("text\tlabel\nhello, there\ta\n", ("text",), "tsv", "names the column text, split by tabs"),
    ("PAR1\x15\x04\x15\x10", (), "parquet", "PAR1"),
    ("the match ended, late\nshares fell\n", ("text", "label"), "text", "fits none of CSV, TSV, JSON Lines"),
    ("one line, then a comma\nanother, with one\nand a third, too\nfour, more\n", (), "text", "fits none"),
    ("[1, 2]\n[3, 4]\n", (), "text", "fits none"),
    ("the label __label__a is inside\n__label__b\n", (), "text", "fits none"),
    ("", (), "text", "holds no line"),
])
def test_the_start_of_a_file_shows_its_format(text, names, want, why):
    fmt, reason = formats.sniff(head(text, names), format_named("text"))
    assert (fmt.name, why in reason) == (want, True), reason


def test_a_head_keeps_only_whole_lines_unless_the_file_ended_in_it():
    cut = formats.Head.of(b"\xef\xbb\xbf__label__a one\n__label__b tw", False)
    assert cut.lines == ("__label__a one",) and cut.cut == "__label__b tw" and cut.data.startswith(b"__label__")
    assert formats.Head.of(b"first\nsecond", True).lines == ("first", "second")
    long = formats.Head.of(b'{"text": "' + b"x" * 100, False)   # one JSON line longer than the head
    assert formats.sniff(long, format_named("text"))[0].name == "jsonl"


def test_a_head_of_lone_cr_line_ends_shows_its_lines_and_a_csv_file_sniffs_as_csv():
    # a classic Mac CSV named train.txt: one "line" of \r-joined rows sniffed as plain text
    mac = formats.Head.of(b"text,label\rhello world,a\rbad day,b\rgood,a\r", True)
    assert mac.lines == ("text,label", "hello world,a", "bad day,b", "good,a")
    assert formats.sniff(mac, format_named("text"))[0].name == "csv"
    cut = formats.Head.of(b"a\r\nb\rc", False)
    assert (cut.lines, cut.cut) == (("a", "b"), "c")


def test_a_txt_split_by_the_runs_delimiter_sniffs_as_csv_and_one_split_by_another_is_refused(tmp_path):
    """--delimiter ';' on a .txt semicolon CSV was refused as idle (the file sniffed as plain text,
    only commas and tabs looked for); and a comma CSV under --delimiter ';' read as whole lines."""
    from lancetnic_flow.errors import UserError

    semi = tmp_path / "semi.txt"
    semi.write_text("text;label\nhello there;a\nbad day;b\n")
    plan = plan_source([str(semi)], names=("text", "label"), delimiter=";")
    assert plan.files[0].format == "csv" and "split by ';'" in plan.sniffed[0].reason
    comma = formats.Head.of(b"text,label\nhello there,a\nbad day,b\n", True, ("text",), ";", "c.txt")
    with pytest.raises(UserError, match="split by commas"):
        formats.sniff(comma, format_named("text"))
    with pytest.raises(UserError, match="split by ';'"):
        plan_source([str(semi)], names=("text", "label"))


@pytest.mark.parametrize("url,want", [
    ("train.txt", "text"), ("s3://b/TRAIN.TXT.gz", "text"), ("data/part-00000", "text"), ("data.zst", "text"),
    ("https://host/corpus?v=2", "text"), ("a.csv", None), ("a.ft", None), ("notes.md", None), ("a.tar.gz", None),
])
def test_a_txt_name_or_no_extension_is_sniffed_and_any_other_keeps_its_format(url, want):
    fmt = formats.sniffed_from(url)
    assert (fmt.name if fmt else None) == want


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f.sniff or f.vague], ids=lambda f: f.name)
def test_every_sniffed_format_is_found_in_what_its_writer_wrote_under_no_extension(tmp_path, fmt):
    table = sample(fmt)
    path = tmp_path / "data"
    path.write_bytes(encode(table, fmt.name))
    plan = plan_source([str(path)], names=columns_for(table).names())
    assert plan.files[0].format == fmt.name and plan.sniffed[0].format == fmt.name


def test_a_registered_format_with_a_sniff_is_found_by_its_start(tmp_path, psv):
    register_format(dataclasses.replace(psv, sniff="lancetnic_flow.data.readers.csv:sniff_header"), replace=True)
    (tmp_path / "corpus.txt").write_text("id|text|label\n1|some words|a\n2|more words|b\n")
    plan = plan_source([str(tmp_path / "corpus.txt")])
    assert plan.files[0].format == "psv" and "split by '|'" in plan.sniffed[0].reason


@pytest.mark.parametrize("url, name", [
    ("data/what?.csv.gz", "what?.csv.gz"), ("/d/q?m.jsonl", "q?m.jsonl"), ("file:///d/q?m.csv.gz", "q?m.csv.gz"),
    ("https://h/d/a.csv.gz?sig=x.txt", "a.csv.gz"), ("s3://b/a.csv?versionId=7", "a.csv"),
    ("s3://b/d/q?m.csv.gz", "q?m.csv.gz"), ("memory://d/q?m.jsonl", "q?m.jsonl"),
])
def test_a_question_mark_in_a_local_name_is_part_of_it_and_only_a_remote_urls_query_is_left_out(url, name):
    assert formats.file_name(url) == name
    assert format_for_path(url)[0].name == ("jsonl" if ".jsonl" in name else "csv")
    assert format_for_path(url)[1] == ("gzip" if name.endswith(".gz") else None)


def test_a_delimiter_is_one_character_the_comma_is_the_default_and_only_csv_takes_it():
    from lancetnic_flow.errors import UserError

    assert formats.csv_delimiter(None) is None and formats.csv_delimiter(",") is None   # a comma file keys as before
    assert [formats.csv_delimiter(d) for d in (";", "|", "tab", "\\t", "semicolon")] == [";", "|", "\t", "\t", ";"]
    for bad in ('"', ";;", "", "\n", " "):
        with pytest.raises(UserError, match="one character") as e:
            formats.csv_delimiter(bad)
        assert "--delimiter ';'" in e.value.said("cli")[1]
    csv, tsv = formats.format_named("csv"), formats.format_named("tsv")
    assert formats.delimited(csv, ";").delimiter == ";" and formats.delimited(csv, None) is csv
    assert formats.delimited(tsv, ";") is tsv   # a TSV file's fields are split by tabs whatever --delimiter says
