"""data/readers/lines.py: plain text lines (blank lines are no training rows;
prediction writes each line a row) and fastText lines (__label__ tags
anywhere, one per row unless multilabel); the line
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


@pytest.mark.parametrize("data", [b"first\n\n   \n!!\nlast\n", b"first\r\n\r\n   \r\n!!\r\nlast",
                                  b"first\n\n\xff\xfe\n!!\nlast\n"])
def test_prediction_writes_every_line_a_row_so_its_output_lines_up_with_the_input(data):
    """A blank line had no output row: every later prediction sat a line early, and a
    text file has no column to join them back on. Now each is an empty_text row
    (fast path; and the slow one of a block with an undecodable line)."""
    chunk = parse_lines(data, "text", Columns(text=("text",), all_rows=True), "f.txt")
    status = chunk.table.column("status").to_pylist()
    assert len(status) == 5 and status[0] == status[4] == "ok" and status[1] == status[3] == "empty_text"
    assert status[2] in ("empty_text", "undecodable")
    assert chunk.table.column("text").to_pylist()[4] == "last"


def test_fasttext_reads_a_label_tag_anywhere_in_the_line_as_fasttext_does():
    """A tag after the text was trained as the word __label__b (and a line whose only
    tag came last was missing_label): every tag is a label, none a word."""
    data = b"__label__a good film __label__b\nnice one __label__c\n__label__d plain foo__label__x\n"
    multi = parse_lines(data, "fasttext", Columns(text=("text",), label="label", multilabel=True), "f.ft")
    assert multi.table.column("label").to_pylist() == [["a", "b"], ["c"], ["d"]]
    assert multi.table.column("text").to_pylist() == ["good film", "nice one", "plain foo__label__x"]
    with pytest.raises(LabelListError, match="several __label__ tags"):   # one label a row: never cut silently
        parse_lines(data, "fasttext", Columns(text=("text",), label="label"), "f.ft")
    single = parse_lines(data.split(b"\n", 1)[1], "fasttext", Columns(text=("text",), label="label"), "f.ft")
    assert single.table.column("label").to_pylist() == ["c", "d"] and not single.skipped
    ask = parse_lines(b"__label__a nice one __label__b\n", "fasttext", Columns(text=("text",), all_rows=True), "f.ft")
    assert ask.table.column("text").to_pylist() == ["nice one"]   # prediction reads the text training read


def test_fasttext_lines_give_text_and_label():
    chunk = parse_lines(b"__label__pos great film\n__label__neg dull\n", "fasttext",
                        Columns(text=("text",), label="label"), "f.ft")
    assert chunk.table.column("text").to_pylist() == ["great film", "dull"]
    assert chunk.table.column("label").to_pylist() == ["pos", "neg"]


def test_several_tags_are_a_label_set_with_multilabel_and_refused_without():
    data = b"__label__a __label__b both\n__label__c one\n"
    multi = parse_lines(data, "fasttext", Columns(text=("text",), label="label", multilabel=True), "f.ft")
    assert multi.table.column("label").to_pylist() == [["a", "b"], ["c"]]
    with pytest.raises(LabelListError, match="task multilabel") as e:
        parse_lines(data, "fasttext", Columns(text=("text",), label="label"), "f.ft")
    assert "--task multilabel" in e.value.said("cli")[0]


def test_one_label_tagged_twice_is_one_label_for_a_single_label_task():
    # "__label__a __label__a" was refused as "several __label__ tags": the line has one label to learn
    data = b"__label__a __label__a twice\n__label__b  __label__b\t__label__b thrice\n__label__c once\n"
    chunk = parse_lines(data, "fasttext", Columns(text=("text",), label="label"), "f.ft")
    assert chunk.table.column("label").to_pylist() == ["a", "b", "c"]
    assert chunk.table.column("text").to_pylist() == ["twice", "thrice", "once"]
    with pytest.raises(LabelListError, match="1 row holds several __label__ tags"):   # two labels still are
        parse_lines(data + b"__label__a __label__b x\n__label__d __label__d y\n", "fasttext",
                    Columns(text=("text",), label="label"), "f.ft")


@pytest.mark.parametrize("columns,match", [(Columns(text=("text",), target="y"), "no numeric columns"),
                                           (Columns(text=("text",), keep=("id",)), "no columns to keep"),
                                           (Columns(text=("text",), label="label"), "text format has no labels")])
def test_the_line_formats_refuse_columns_they_do_not_have(columns, match):
    with pytest.raises(UserError, match=match):
        check_line_columns("f.txt", "text", columns)


@pytest.mark.parametrize("multilabel", [False, True])
def test_a_vertical_tab_or_nul_ends_a_fasttext_tag_as_fasttext_ends_it(multilabel):
    # fastText's readWord ends a word at " \t\n\v\f\r\0"; a regular expression's \s has no \v or NUL, so
    # "__label__a\vgoal match" was the label "a\vgoal" (a class of its own) and the text lost "goal".
    data = (b"__label__a\x0bgoal match\n__label__b\x00phone chip\n__label__a\x0c__label__b\x0bteam win\n"
            if multilabel else b"__label__a\x0bgoal match\n__label__b\x00phone chip\n__label__a\x0cteam win\n")
    chunk = parse_lines(data, "fasttext", Columns(text=("text",), label="label", multilabel=multilabel), "f.ft")
    labels = [["a"], ["b"], ["a", "b"]] if multilabel else ["a", "b", "a"]
    assert chunk.table.column("label").to_pylist() == labels
    assert chunk.table.column("text").to_pylist() == ["goal match", "phone chip", "team win"]
    later = parse_lines(b"__label__a goal\x0b__label__b team\n", "fasttext",
                        Columns(text=("text",), label="label", multilabel=True), "f.ft")
    assert later.table.to_pylist() == [{"text": "goal team", "label": ["a", "b"]}]


@pytest.mark.parametrize("all_rows", [False, True])
def test_a_bom_at_a_fasttext_lines_start_from_files_joined_by_cat_hides_no_tag(all_rows):
    # cat a.ft b.ft, each written with a BOM: b's first line started with U+FEFF, which hid its tag, so the
    # line was missing_label (its label never learnt) and prediction read "__label__b" as a word.
    bom = b"\xef\xbb\xbf"
    data = bom + b"__label__a good film\n" + bom + b"__label__b phone chip\n" + bom + b"\n"
    columns = Columns(text=("text",), label="label", all_rows=all_rows)
    chunk = parse_lines(data, "fasttext", columns, "f.ft")
    texts = chunk.table.column("text").to_pylist()
    if all_rows:   # every line a row, the BOM-only one blank
        assert texts == ["good film", "phone chip", ""]
        assert chunk.table.column("status").to_pylist() == ["ok", "ok", "empty_text"]
    else:
        assert texts == ["good film", "phone chip"] and chunk.skipped == {}
        assert chunk.table.column("label").to_pylist() == ["a", "b"]


@pytest.mark.parametrize("all_rows", [False, True])
def test_a_bom_at_a_plain_text_lines_start_from_files_joined_by_cat_is_no_character_of_its_text(all_rows):
    # cat a.txt b.txt, each written with a BOM: b's first line kept U+FEFF in its text (a char n-gram of its
    # own, echoed by predict), where the file's first BOM was taken off
    bom = b"\xef\xbb\xbf"
    data = bom + b"good film\n" + bom + b"phone chip\n" + bom + b"\n" + b"mid \xef\xbb\xbf kept\n"
    chunk = parse_lines(data, "text", Columns(text=("text",), all_rows=all_rows), "f.txt")
    texts = chunk.table.column("text").to_pylist()
    if all_rows:   # every line a row, the BOM-only one blank
        assert texts == ["good film", "phone chip", "", "mid \ufeff kept"]
        assert chunk.table.column("status").to_pylist() == ["ok", "ok", "empty_text", "ok"]
    else:
        assert texts == ["good film", "phone chip", "mid \ufeff kept"] and chunk.skipped == {}


@pytest.mark.parametrize("fmt, data", [("text", b"first one\n\n   \nsecond\nlast"),
                                       ("fasttext", b"__label__a first one\n\n\n__label__b second\n")])
def test_prediction_writes_every_line_a_row_however_the_file_is_cut(tmp_path, fmt, data):
    # A range whose rows were one blank line read as no line at all: prediction's output lost that
    # row and every later one sat a line early (at --blocksize 1, 4 rows for a file of 5 lines).
    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import plan_source

    path = tmp_path / f"f.{'ft' if fmt == 'fasttext' else 'txt'}"
    path.write_bytes(data)
    columns = Columns(text=("text",), label="label" if fmt == "fasttext" else None, all_rows=True)
    want = None
    for blocksize in (1, 2, 3, 5, len(data)):
        plan = plan_source([str(path)], format=fmt, blocksize=blocksize)
        texts = [t for p in plan.partitions for c in read_partition(p, columns) for t in c.table.column("text").to_pylist()]
        assert len(texts) == data.count(b"\n") + (not data.endswith(b"\n")), blocksize
        want = want or texts
        assert texts == want, blocksize


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_lone_cr_ends_a_plain_text_line_as_pythons_open_reads_it_at_every_cut(tmp_path, suffix):
    # a classic Mac file (lines ended by "\r") was one row: predict wrote one prediction for the whole file
    import gzip

    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import plan_source

    data = b"goal match team\rphone chip code\r\nvote law party\r\r\xff bad\rlast line\r"
    want = data.decode("utf-8", "replace").splitlines()   # Python's universal newlines: \r, \n, \r\n
    path = tmp_path / f"f.txt{suffix}"
    path.write_bytes(gzip.compress(data) if suffix else data)
    columns = Columns(text=("text",), all_rows=True)
    for blocksize in (1, 5, 17, len(data)):
        plan = plan_source([str(path)], format="text", blocksize=blocksize)
        rows = [r for p in plan.partitions for c in read_partition(p, columns) for r in c.table.to_pylist()]
        assert [r["text"] for r in rows] == [t if "\ufffd" not in t else "" for t in want], blocksize
        assert [r["status"] for r in rows] == ["ok", "ok", "ok", "empty_text", "undecodable", "ok"], blocksize


def test_a_lone_cr_in_a_fasttext_line_is_a_space_as_fasttext_reads_it():
    chunk = parse_lines(b"__label__a goal match\rteam\n", "fasttext", Columns(text=("text",), label="label"), "f.ft")
    assert chunk.table.to_pylist() == [{"text": "goal match\rteam", "label": "a"}]


@pytest.mark.parametrize("keep,keep_all,names", [((), True, ["keep:label", "keep:text"]),
                                                 (("label",), False, ["keep:label"])])
def test_prediction_keeps_a_fasttext_lines_labels_as_keep_all_keeps_a_tables_columns(keep, keep_all, names):
    # predict --keep all on fastText wrote the text alone: the labels a table's --keep all keeps were lost
    data = b"__label__sports __label__news a great match\n__label__tech new phone __label__gadgets\nno tag\n\n"
    cols = Columns(text=("text",), keep=keep, keep_all=keep_all, all_rows=True)
    t = parse_lines(data, "fasttext", cols, "f.txt").table
    assert [c for c in t.column_names if c.startswith("keep:")] == names
    assert t.column("keep:label").to_pylist() == ["sports news", "tech gadgets", None, None]
    assert t.column("text").to_pylist() == ["a great match", "new phone", "no tag", ""]
    with pytest.raises(UserError, match="no column 'id' to keep"):
        parse_lines(data, "fasttext", Columns(text=("text",), keep=("id",), all_rows=True), "f.txt")


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_classic_mac_text_file_is_cut_at_its_lone_crs_into_bounded_blocks_with_the_same_rows(tmp_path, suffix):
    # partitions were cut at "\n" alone: a file of lone "\r" line ends was one partition, held whole in memory
    import gzip

    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import plan_source

    lines = [f"line {i} goal match team" for i in range(400)]
    data = "\r".join(lines).encode() + b"\r\n" + b"last one\r"
    path = tmp_path / f"f.txt{suffix}"
    path.write_bytes(gzip.compress(data) if suffix else data)
    columns = Columns(text=("text",), all_rows=True)
    for blocksize in (64, 1000, 4096, len(data)):
        plan = plan_source([str(path)], format="text", blocksize=blocksize)
        chunks = [c for p in plan.partitions for c in read_partition(p, columns, chunk_bytes=blocksize)]
        assert [t for c in chunks for t in c.table.column("text").to_pylist()] == [*lines, "last one"], blocksize
        widest = max(c.table.num_rows for c in chunks)
        assert widest <= blocksize // len(lines[0]) + 2, (blocksize, widest)   # a block's rows, not the file's


@pytest.mark.parametrize("cols", [Columns(text=("text",), label="label", multilabel=True),
                                  Columns(text=("text",), label="label", all_rows=True)])
def test_a_fasttext_file_of_lone_cr_line_ends_is_refused_naming_the_line_ends_and_the_conversion(cols):
    # fastText reads a lone "\r" as a space: the file was one line, a multilabel run trained on one row
    # holding every tag (exit 0) and predict wrote one row for the whole file
    data = b"__label__a goal match\r__label__b phone chip\r__label__a vote law\r"
    with pytest.raises(UserError, match=r"f.ft: its fastText lines end in a lone \\r") as e:
        parse_lines(data, "fasttext", cols, "f.ft")
    assert "tr '\\r' '\\n'" in e.value.hint
    crlf = parse_lines(data.replace(b"\r", b"\r\n"), "fasttext", cols, "f.ft").table
    assert crlf.num_rows == 3   # Windows line ends read as before


@pytest.mark.parametrize("data", [b"__label__a goal match\n__label__b phone\r__label__c chip\n__label__a vote\n",
                                  b"__label__a goal match\n__label__b phone\r__label__c chip",
                                  b"__label__b phone\r__label__c chip"])
def test_a_cr_before_a_tag_inside_a_line_is_a_space_as_fasttext_reads_it_not_a_mac_line_end(data):
    # the refusal of classic Mac line ends refused any "\r__label__", one inside a "\n"-ended line too
    cols = Columns(text=("text",), label="label", multilabel=True)
    rows = parse_lines(data, "fasttext", cols, "f.ft").table.to_pylist()
    assert {"text": "phone chip", "label": ["b", "c"]} in rows   # both tags the line's labels, as fastText reads them
    assert len(rows) == data.count(b"\n") + (not data.endswith(b"\n"))


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_large_fasttext_file_of_lone_cr_line_ends_is_refused_before_its_range_is_read_whole(tmp_path, monkeypatch,
                                                                                               suffix):
    # its first block read on to a "\n" the file lacks: the whole file in memory before the refusal
    import gzip

    from lancetnic_flow.data.readers import lines, read_partition
    from lancetnic_flow.data.sources import plan_source

    path = tmp_path / f"f.ft{suffix}"
    data = b"__label__a goal match\r" * 20_000
    path.write_bytes(gzip.compress(data) if suffix else data)
    monkeypatch.setattr(lines, "parse_lines", lambda *a: pytest.fail("the range was read and parsed"))
    part = plan_source([str(path)], format="fasttext", blocksize=4096).partitions[0]
    with pytest.raises(UserError, match="lone"):
        next(read_partition(part, Columns(text=("text",), label="label"), chunk_bytes=4096))


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_last_line_of_lone_cr_line_ends_is_refused_or_read_alike_at_every_blocksize(tmp_path, suffix):
    # a last line without its "\n" holding two "\r__label__" was refused where a small block held it alone
    # and read as one line of three tags where a large block held the lines before it
    import gzip

    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import plan_source

    head = b"".join(b"__label__a goal match %d\n" % i for i in range(40))
    cols = Columns(text=("text",), label="label", multilabel=True)

    def read(tail: bytes, blocksize: int) -> list | str:
        path = tmp_path / f"f{blocksize}.ft{suffix}"
        path.write_bytes(gzip.compress(head + tail) if suffix else head + tail)
        try:
            return [r for p in plan_source([str(path)], blocksize=blocksize).partitions
                    for c in read_partition(p, cols, chunk_bytes=blocksize) for r in c.table.to_pylist()]
        except UserError as e:
            return "refused" if "lone \\r" in e.message else e.message

    sizes = (16, 64, 256, 1 << 20)
    for tail in (b"__label__b phone\r__label__c chip\r__label__d vote", b"__label__b phone\r__label__c chip\r"):
        assert {bs: read(tail, bs) for bs in sizes} == dict.fromkeys(sizes, "refused"), tail
    one = [read(b"__label__b phone\r__label__c chip", bs) for bs in sizes]   # one tag after a "\r": a space
    assert all(rows == one[0] for rows in one) and len(one[0]) == 41
    assert one[0][-1] == {"text": "phone chip", "label": ["b", "c"]}


def test_a_fasttext_line_without_a_tag_is_a_missing_label_in_a_multilabel_run_not_an_empty_set():
    # an empty list ([]) is a label set no label applies to; a line without a tag has none, as fastText skips it
    cols = Columns(text=("text",), label="label", multilabel=True)
    chunk = parse_lines(b"__label__a first text\nno tag here\n__label__ empty tag\n", "fasttext", cols, "f.ft")
    assert chunk.table.to_pylist() == [{"text": "first text", "label": ["a"]}]
    assert chunk.skipped == {"missing_label": 2}


@pytest.mark.parametrize("data,delimiter,way", [
    ("text;label\nhello there;a\nbad day;b\n", ";", "--delimiter ';'"),
    ("id|body|tag\n1|hello there|a\n2|bad day|b\n", "|", "--delimiter '|'"),
    ("body\ttag\nhello there\ta\nbad day\tb\n", "\t", "--format tsv"),
])
def test_a_txt_of_delimited_rows_under_a_header_is_refused_naming_its_delimiter_not_read_as_whole_lines(data, delimiter,
                                                                                                       way):
    """A .txt (or extensionless) CSV split by ';' or '|' was read as plain text: predict wrote the
    header as a row and each row's text with its label and other fields in it. Now the head's
    header is found, whatever the delimiter, and the file is refused naming the option that reads it."""
    from lancetnic_flow.data.readers.lines import sniff_text
    from lancetnic_flow.formats import Head, format_named

    head = Head.of(data.encode(), True, ("body",) if delimiter == "\t" else (), url="data.txt")
    with pytest.raises(UserError) as err:
        sniff_text(head, format_named("text"))
    message, hint = err.value.said("cli")
    assert message.startswith("data.txt: ") and f"split by {'tabs' if delimiter == chr(9) else repr(delimiter)}" in message
    assert hint.startswith(f"pass {way} ") and "--format text" in hint


@pytest.mark.parametrize("data", ["one sentence; and a clause\nanother; too\nthird; more\n",
                                  "just words\nand more words | with a bar\n", "a;b\nonly one row;x\n", ""])
def test_prose_with_a_semicolon_or_bar_reads_as_plain_text(data):
    from lancetnic_flow.data.readers.lines import sniff_text
    from lancetnic_flow.formats import Head, format_named

    assert sniff_text(Head.of(data.encode(), True, ("text",)), format_named("text")) is None
