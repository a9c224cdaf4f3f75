"""data/readers/jsonl.py: JSON Lines blocks give the named columns; a text
that is a number, list or object is skipped as not_text, never trained as its
JSON; a malformed line is counted; a key no object of a block holds is a
missing value; labels may be numbers."""
from __future__ import annotations

import pytest

from lancetnic_flow.data.readers.jsonl import columns_of, parse_jsonl
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


@pytest.mark.parametrize("bad_line", [b"", b"{not json\n"], ids=["arrow", "line by line"])
def test_a_block_no_object_of_which_holds_a_key_reads_its_rows_missing_that_value_not_a_stop(bad_line):
    # unlabelled rows appended past the file's head (which holds the key, checked before the run) stopped the
    # run mid-way with "no column 'label'", where pandas reads NaN labels; predict was refused for a label key
    # it does not need, and a kept or numeric key absent from a block likewise
    data = b'{"text": "goal match", "tag": "a"}\n{"text": "phone chip", "score": 2}\n' + bad_line
    train = parse_jsonl(data, COLS, "f.jsonl")
    assert train.table.num_rows == 0 and train.rows_read == 2 + bool(bad_line)
    assert train.skipped == {"missing_label": 2, **({"malformed": 1} if bad_line else {})}
    numeric = parse_jsonl(data, Columns(text=("text",), label="tag", numeric=("score", "size")), "f.jsonl")
    assert numeric.rows_read == 2 + bool(bad_line) and numeric.skipped.get("missing_label") == 1
    cols = Columns(text=("text",), label="label", keep=("id",), numeric=("size",), all_rows=True)
    listed = parse_jsonl(data, cols, "f.jsonl")
    rows = [(r["text"], r["keep:id"], r["status"]) for r in listed.table.to_pylist()]
    assert rows[:2] == [("goal match", None, "ok"), ("phone chip", None, "ok")]


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


@pytest.mark.parametrize("all_rows", [False, True])
def test_a_nan_label_is_missing_whichever_path_reads_its_block(all_rows):
    # Python's json.dumps writes a missing float as NaN: it trained a class "nan"
    cols = Columns(text=("text",), label="label", keep=("label",) if all_rows else (), all_rows=all_rows)
    lines = b'{"text": "words here", "label": 1.5}\n{"text": "more words", "label": NaN}\n'
    for data in (lines, lines + b"{not json\n"):
        table = parse_jsonl(data, cols, "f.jsonl").table
        assert table.column("label").to_pylist()[:2 if all_rows else 1] == (["1.5", None] if all_rows else ["1.5"])
        if all_rows:
            assert table.column("keep:label").to_pylist()[:2] == ["1.5", None]
    sets = Columns(text=("text",), label="label", multilabel=True)
    data = b'{"text": "words here", "label": [1.5, NaN]}\n{"text": "more words", "label": [NaN]}\n'
    for block in (data, data + b"{not json\n") if not all_rows else ():
        assert parse_jsonl(block, sets, "f.jsonl").table.column("label").to_pylist() == [["1.5"]]


@pytest.mark.parametrize("all_rows", [False, True])
def test_integers_a_double_cannot_hold_read_as_written_whichever_path_reads_their_block(all_rows):
    # Arrow read them as doubles: two labels past int64 merged into one class, kept ids collapsed to 1e+19
    cols = Columns(text=("text",), label="label", keep=("id",) if all_rows else (), all_rows=all_rows)
    lines = [b'{"id": %d, "text": "words here", "label": %d}' % (10**19 + i, label)
             for i, label in enumerate((18446744073709551001, 18446744073709551002, 7))]
    for data in (b"\n".join(lines) + b"\n", b"\n".join(lines) + b"\n{not json\n"):
        table = parse_jsonl(data, cols, "f.jsonl").table
        assert table.column("label").to_pylist()[:3] == ["18446744073709551001", "18446744073709551002", "7"]
        if all_rows:
            assert table.column("keep:id").to_pylist()[:3] == [str(10**19 + i) for i in range(3)]
    # an integer beside a decimal: Arrow types the column double
    mixed = b'{"text": "words here", "label": 9007199254740993}\n{"text": "more words", "label": 0.5}\n'
    assert parse_jsonl(mixed, COLS, "f.jsonl").table.column("label").to_pylist() == ["9007199254740993", "0.5"]
    sets = Columns(text=("text",), label="label", multilabel=True)
    listed = b'{"text": "words here", "label": [18446744073709551001, 0.5]}\n'
    assert parse_jsonl(listed, sets, "f.jsonl").table.column("label").to_pylist() == [["18446744073709551001", "0.5"]]


def test_strings_that_look_like_dates_stay_strings_as_texts_labels_and_kept_values():
    # Arrow read them as timestamps: kept "2020-05-01" became "2020-05-01 00:00:00", such texts were
    # skipped as not_text, and a label column of them was refused
    data = (b'{"day": "2020-05-01", "text": "2021-01-01", "label": "2021-02-01", "meta": {"n": 1}}\n'
            b'{"day": "2020-05-02", "text": "2021-01-02 10:00:00", "label": "2021-03-01", "meta": {"src": "web"}}\n')
    trained = parse_jsonl(data, COLS, "f.jsonl")
    assert trained.table.column("text").to_pylist() == ["2021-01-01", "2021-01-02 10:00:00"]
    assert trained.table.column("label").to_pylist() == ["2021-02-01", "2021-03-01"] and trained.skipped == {}
    cols = Columns(text=("text",), keep=("day", "meta"), all_rows=True)
    predicted = parse_jsonl(data, cols, "f.jsonl").table
    assert predicted.column("keep:day").to_pylist() == ["2020-05-01", "2020-05-02"]
    assert predicted.column("status").to_pylist() == ["ok", "ok"]
    # an object kept as written, without the keys of other rows' objects
    assert predicted.column("keep:meta").to_pylist() == ['{"n": 1}', '{"src": "web"}']
    sets = Columns(text=("text",), label="day", multilabel=True)
    listed = b'{"text": "words here", "day": ["2020-05-01", "2020-05-02"]}\n'
    assert parse_jsonl(listed, sets, "f.jsonl").table.column("label").to_pylist() == [["2020-05-01", "2020-05-02"]]



@pytest.mark.parametrize("all_rows", [False, True])   # training's and prediction's per-line paths
@pytest.mark.parametrize("bad_line", [b"", b"{not json\n"])   # Arrow refuses the block either way
def test_a_lone_surrogate_escape_makes_its_row_undecodable_and_spares_the_others(all_rows, bad_line):
    # JSON's "\ud800" escape decodes to no Unicode character (json.loads gives a lone surrogate): it
    # stopped the run with a UnicodeEncodeError. A valid pair is one character; a kept value is kept as bytes.
    cols = Columns(text=("text",), label="label", keep=("id",) if all_rows else (), all_rows=all_rows)
    data = (b'{"id": 1, "text": "goal \\ud800 match", "label": "a"}\n'
            b'{"id": "\\udc00", "text": "team \\ud83d\\ude00 win", "label": "b"}\n'
            b'{"id": 3, "text": "phone chip", "label": "b\\udfff"}\n' + bad_line)
    chunk = parse_jsonl(data, cols, "f.jsonl")
    assert chunk.skipped == {"undecodable": 2, **({"malformed": 1} if bad_line else {})}
    assert chunk.rows_read == 3 + bool(bad_line)
    if all_rows:
        rows = chunk.table.to_pylist()
        assert [r["status"] for r in rows] == ["undecodable", "ok", "undecodable"] + (["malformed"] if bad_line else [])
        assert rows[0]["text"] == "" and rows[1]["keep:id"] == b"\xed\xb0\x80"   # as a line of bytes not UTF-8
    else:
        assert chunk.table.to_pylist() == [{"text": "team \U0001F600 win", "label": "b"}]


@pytest.mark.parametrize("raw", [b"", b"\xff"])   # a line of UTF-8, and one read with surrogate escapes
def test_kept_ids_that_differ_in_a_lone_surrogate_escape_stay_distinct(raw):
    # "a\ud800" and "a\udbff" were both kept as "a\ufffd": two rows' ids written as one
    cols = Columns(text=("text",), keep=("id", "meta"), all_rows=True)
    data = (b'{"id": "a\\ud800", "text": "goal' + raw + b'", "meta": {"k": "\\ud800"}}\n'
            b'{"id": "a\\udbff", "text": "goal", "meta": ["\\udbff"]}\n{"id": "b", "text": "goal"}\n')
    rows = parse_jsonl(data, cols, "f.jsonl").table.to_pylist()
    assert [r["keep:id"] for r in rows] == [b"a\xed\xa0\x80", b"a\xed\xaf\xbf", b"b"]
    assert [r["keep:meta"] for r in rows] == [b'{"k": "\xed\xa0\x80"}', b'["\xed\xaf\xbf"]', None]
    assert "a\ud800".encode("utf-8", "surrogatepass") == rows[0]["keep:id"]   # as Python's json and open() round-trip it


@pytest.mark.parametrize("all_rows", [False, True])   # training's and prediction's per-line paths
def test_a_line_of_several_json_values_reads_the_same_rows_whichever_path_reads_its_block(all_rows):
    # Arrow takes each value of a line ({..} {..}, or lines ended by a lone \r); the per-line path read
    # such a line as one malformed row, so a row was trained or predicted only when no bad line was beside it.
    cols = Columns(text=("text",), label="label", all_rows=all_rows)
    lines = (b'{"text": "goal match", "label": "a"} {"text": "phone chip", "label": "b"}\n'
             b'{"text": "team win", "label": "a"}\r{"text": "code tech", "label": "b"}\r\n'
             b'\xef\xbb\xbf{"text": "late goal", "label": "a"}\n')
    clean = parse_jsonl(lines, cols, "f.jsonl")
    slow = parse_jsonl(lines + b'{"text": "cut off\n', cols, "f.jsonl")
    want = ["goal match", "phone chip", "team win", "code tech", "late goal"]
    assert clean.table.column("text").to_pylist() == want and clean.rows_read == 5
    assert slow.table.column("text").to_pylist()[:5] == want and slow.rows_read == 6
    assert slow.skipped == {"malformed": 1} and slow.table.column("label").to_pylist()[:5] == ["a", "b", "a", "b", "a"]



@pytest.mark.parametrize("all_rows", [False, True])
def test_a_null_line_is_the_same_skip_whichever_path_reads_its_block(all_rows):
    # Arrow reads a line "null" as a row without values (empty_text); training's per-line path said malformed
    cols = Columns(text=("text",), label="label", all_rows=all_rows)
    lines = b'{"text": "goal match", "label": "a"}\nnull\n'
    clean = parse_jsonl(lines, cols, "f.jsonl")
    slow = parse_jsonl(lines + b"{bad\n", cols, "f.jsonl")
    assert clean.skipped == {"empty_text": 1}
    assert slow.skipped == {"empty_text": 1, "malformed": 1}



def test_a_first_line_of_several_json_values_gives_the_columns_as_the_readers_read_it():
    # the head check said "the first line is not JSON (Extra data)" (exit 2) for a line both readers read as rows
    import io

    first = io.BytesIO(b'{"text": "goal match", "id": 1} {"text": "phone chip", "id": 2}\n{"text": "x y"}\n')
    assert columns_of(first, "f.jsonl") == ["text", "id"]
    with pytest.raises(UserError, match="the first line is not JSON"):
        columns_of(io.BytesIO(b'{"text": "goal match"} oops\n'), "f.jsonl")


@pytest.mark.parametrize("all_rows", [False, True])   # training's and prediction's paths
def test_an_object_written_across_lines_is_malformed_lines_however_the_file_is_cut(all_rows):
    # Arrow took it as one row when its block held both lines, where a block cut between them (or beside a
    # malformed line) read two malformed lines: the file's rows depended on --blocksize.
    cols = Columns(text=("text",), label="label", all_rows=all_rows)
    first, second = b'{"text": "goal match", "label": "a"}\n{"text": "team win",\n', b'"label": "a"}\n'
    whole = parse_jsonl(first + second, cols, "f.jsonl")
    cut = [parse_jsonl(first, cols, "f.jsonl"), parse_jsonl(second, cols, "f.jsonl")]
    assert whole.rows_read == sum(c.rows_read for c in cut) == 3
    assert whole.skipped == {"malformed": 2} == {"malformed": sum(c.skipped.get("malformed", 0) for c in cut)}
    kept = [t for t in whole.table.column("text").to_pylist() if t]
    assert kept == ["goal match"]


@pytest.mark.parametrize("all_rows", [False, True])
def test_a_line_of_two_objects_does_not_hide_an_object_across_lines_at_any_cut(all_rows):
    # the check compared the block's rows with its lines: a line of two objects (two rows) balanced an
    # object over two lines (one row), so Arrow's one row of the latter was trained in a whole block
    # and two malformed lines in a block cut between its lines
    cols = Columns(text=("text",), label="label", all_rows=all_rows)
    lines = [b'{"text": "goal match", "label": "a"} {"text": "phone chip", "label": "b"}\n',
             b'{"text": "team win",\n', b'"label": "c"}\n', b'{"text": "late goal", "label": "d"}\n']
    want = ["goal match", "phone chip", "late goal"]
    for cut in range(1, len(lines) + 1):
        chunks = [parse_jsonl(b"".join(lines[:cut]), cols, "f.jsonl"), parse_jsonl(b"".join(lines[cut:]), cols, "f.jsonl")]
        texts = [t for c in chunks if c.table.num_rows for t in c.table.column("text").to_pylist() if t]
        assert texts == want, cut
        assert sum(c.skipped.get("malformed", 0) for c in chunks) == 2, cut


@pytest.mark.parametrize("all_rows", [False, True])
@pytest.mark.parametrize("start", [b"null\n", b"  null\n\n", b"\xef\xbb\xbfnull\n", b"null\nnull\n"])
def test_a_block_that_starts_with_a_null_line_reads_it_as_a_row_without_values(all_rows, start):
    # Arrow's reader crashed the worker (a segmentation fault) on a block starting with null,
    # as a --blocksize cut before such a line makes one
    cols = Columns(text=("text",), label="label", all_rows=all_rows)
    chunk = parse_jsonl(start + b'{"text": "goal match", "label": "a"}\n', cols, "f.jsonl")
    assert [t for t in chunk.table.column("text").to_pylist() if t] == ["goal match"]
    assert chunk.skipped == {"empty_text": start.count(b"null")}


def test_the_head_schema_holds_a_wanted_column_only_later_objects_hold(tmp_path):
    from lancetnic_flow.data.readers.jsonl import head_schema
    from lancetnic_flow.data.sources import plan_source

    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "no label yet"}\n{"text": "goal match", "label": ["a"]}\n')
    fi = plan_source([str(path)]).files[0]
    assert head_schema(fi, None).names == ["text"]   # the first object's keys, unless a column is wanted
    assert head_schema(fi, None, wanted=("text", "label")).names == ["text", "label"]


def test_a_kept_value_holding_bytes_that_are_not_utf8_keeps_them_whole_so_two_ids_never_merge():
    # as U+FFFD, "\xff1" and "\xfe1" were both written "\ufffd1": two rows' ids read back as one
    cols = Columns(text=("text",), keep=("id", "n"), all_rows=True)
    data = (b'{"id": "\xff1", "text": "hello world", "n": 2.0}\n{"id": "\xfe1", "text": "good day", "n": 1e-07}\n'
            b'{"id": "ab", "text": "caf\xe9", "n": "x\xff"}\n{"id": "\\udcff", "text": "\xff"}\n')
    rows = parse_jsonl(data, cols, "f.jsonl").table.to_pylist()
    assert [r["keep:id"] for r in rows] == [b"\xff1", b"\xfe1", b"ab", b"\xed\xb3\xbf"]   # JSON's "\udcff": its own bytes
    assert [r["keep:n"] for r in rows] == [b"2.0", b"1e-07", b"x\xff", None]   # numbers as the lines wrote them
    # the line is "undecodable", as training skips it
    assert [r["status"] for r in rows] == ["undecodable"] * 4 and rows[2]["text"] == ""


def test_window_keys_are_the_keys_of_the_objects_in_the_files_first_window_in_order(tmp_path, monkeypatch):
    from lancetnic_flow.data.readers import jsonl
    from lancetnic_flow.data.sources import FileInfo

    data = b'{"id": 1, "text": "a"}\n\n{"text": "b", "extra": 2}\n{"id": 3, "late": 1}\n'
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    fi = FileInfo(str(path), len(data), "", "jsonl", None)
    assert jsonl.window_keys(fi, None) == ["id", "text", "extra", "late"]
    monkeypatch.setattr(jsonl, "KEYS_WINDOW", data.index(b'{"id": 3'))   # that line starts past the window
    assert jsonl.window_keys(fi, None) == ["id", "text", "extra"]


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_json_lines_file_of_lone_cr_line_ends_is_cut_into_bounded_blocks_with_the_same_rows(tmp_path, suffix):
    # partitions were cut at "\n" alone: a file of lone "\r" line ends was one partition, held whole in memory
    import gzip
    import json

    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.readers.jsonl import head_columns
    from lancetnic_flow.data.sources import plan_source

    lines = [json.dumps({"id": i, "text": f"goal match team {i}"}) for i in range(300)]
    data = "\r".join(lines[:150]).encode() + b"\r\n" + "\r".join(lines[150:]).encode() + b"\r{not json\r"
    path = tmp_path / f"f.jsonl{suffix}"
    path.write_bytes(gzip.compress(data) if suffix else data)
    for all_rows in (False, True):
        columns = Columns(text=("text",), keep=("id",) if all_rows else (), all_rows=all_rows)
        for blocksize in (100, 1000, 5000, len(data)):
            plan = plan_source([str(path)], format="jsonl", blocksize=blocksize)
            chunks = [c for p in plan.partitions for c in read_partition(p, columns, chunk_bytes=blocksize)]
            texts = [t for c in chunks for t in c.table.column("text").to_pylist()]
            assert texts == [f"goal match team {i}" for i in range(300)] + ([""] if all_rows else []), blocksize
            assert sum(c.skipped.get("malformed", 0) for c in chunks) == 1, blocksize
            assert max(c.rows_read for c in chunks) <= blocksize // len(lines[0]) + 2, blocksize
        assert head_columns(plan.files[0], None) == ["id", "text"]


def test_read_lines_ends_a_line_at_a_lone_cr_and_keeps_a_crlf_whole_across_reads():
    import io

    from lancetnic_flow.data.readers.table import read_lines

    data = b"a\rb\r\nc\nd\r"
    for chunk in (1, 2, 3, 64):
        assert list(read_lines(io.BytesIO(data), chunk)) == [b"a\r", b"b\r\n", b"c\n", b"d\r"], chunk


def test_a_key_holding_a_lone_surrogate_escape_is_refused_naming_it_not_said_as_an_unreadable_url(tmp_path):
    # the head's schema failed on the name (UnicodeEncodeError) and the run said "cannot read ... check the URL"
    from lancetnic_flow.data.heads import head_schema
    from lancetnic_flow.data.readers import jsonl
    from lancetnic_flow.data.sources import FileInfo

    data = b'{"id\\ud83d\\ude00": 1, "text": "a"}\n{"k\\ud800": "1", "text": "b"}\n'
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    fi = FileInfo(str(path), len(data), "", "jsonl", None)
    with pytest.raises(UserError, match=r'line at byte 35 has the key "k\\ud800", which holds a lone surrogate'):
        jsonl.window_keys(fi, None)
    path.write_bytes(data.split(b"\n", 1)[1])
    with pytest.raises(UserError, match=r'line at byte 0 has the key "k\\ud800"'):
        head_schema(fi, None)
    # past the keys read ahead, a block's rows: every key is a column of --keep all
    cols = Columns(text=("text",), keep_all=True, all_rows=True)
    with pytest.raises(UserError, match=r'f.jsonl: an object has the key "k\\ud800"'):
        parse_jsonl(data, cols, "f.jsonl")


@pytest.mark.parametrize("bad_line", [False, True])
def test_a_kept_number_is_written_as_the_line_wrote_it_whichever_block_holds_it(bad_line):
    # Arrow's float column wrote 1.0 as "1" (one id with 1) and, in a block with a decimal, 1000000000000000
    # as "1e+15" where a block of whole numbers wrote it out: an id's text depended on where the file was cut
    lines = [b'{"text": "goal match", "id": 1.0, "n": 1}', b'{"text": "phone chip", "id": 1, "n": 2}',
             b'{"text": "vote law", "id": 2.50, "n": 3}', b'{"text": "vote law", "id": 1e3, "n": 4}',
             b'{"text": "vote law", "id": 1000000000000000, "n": 5}', b'{"text": "vote law", "id": -0.0, "n": 6}']
    if bad_line:
        lines.insert(2, b"{not json")
    cols = Columns(text=("text",), keep=("id", "n"), all_rows=True)
    want = ["1.0", "1", "2.50", "1e3", "1000000000000000", "-0.0"]

    def kept(block: list[bytes]) -> list:
        rows = parse_jsonl(b"\n".join(block) + b"\n", cols, "f.jsonl").table.to_pylist()
        return [(r["keep:id"], r["keep:n"]) for r in rows if r["status"] == "ok"]

    assert kept(lines) == list(zip(want, "123456"))
    assert [v for line in lines for v in kept([line])] == list(zip(want, "123456"))
    # a block of clean lines takes the numbers' text from its lines; one naming the key again (in a nested
    # object, or escaped in a text) is read line by line: the same text either way
    clean = [b'{"text": "goal match", "id": %s, "n": 1}' % n.encode() for n in want]
    assert kept(clean) == [(n, "1") for n in want]
    odd = [b'{"text": "a \\"id\\": 5 note", "id": 7.0, "n": 1}', b'{"text": "bb cc", "id": 2.50, "n": 1, "m": {"id": 1}}']
    assert kept(clean + odd) == [(n, "1") for n in want] + [("7.0", "1"), ("2.50", "1")]
    # a label is read as training reads it, a float as Arrow writes it: the class a run learned
    labelled = Columns(text=("text",), label="id", all_rows=True)
    assert parse_jsonl(b"\n".join(lines[:2]) + b"\n", labelled, "f.jsonl").table.column("label").to_pylist() == \
        ["1", "1"]


@pytest.mark.parametrize("bad_line", [False, True])
def test_a_kept_list_or_objects_numbers_are_written_as_the_line_wrote_them(bad_line):
    """json.dumps wrote a kept object's 2.50 as 2.5 and 1e3 as 1000.0, where a kept top-level
    number was already written as its line had it: now nested numbers are too, in any block."""
    lines = [b'{"text": "goal match", "m": {"a": 1.0, "b": [2.50, "x", 1e3, -0.0, 7]}, "l": [1.50, 2]}',
             b'{"text": "phone chip", "m": {"c": {"d": 1E-5}}, "l": []}']
    if bad_line:
        lines.insert(1, b"{not json")
    cols = Columns(text=("text",), keep=("m", "l"), all_rows=True)
    rows = [r for r in parse_jsonl(b"\n".join(lines) + b"\n", cols, "f.jsonl").table.to_pylist() if r["status"] == "ok"]
    assert [(r["keep:m"], r["keep:l"]) for r in rows] == [
        ('{"a": 1.0, "b": [2.50, "x", 1e3, -0.0, 7]}', "[1.50, 2]"), ('{"c": {"d": 1E-5}}', "[]")]
