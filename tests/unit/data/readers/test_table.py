"""data/readers/table.py: what every reader shares — numbers (inf and nan are
none), text from typed columns, UTF-8 checks, line splitting, undecodable
lines dropped and counted, a header that names a used column twice or looks
like another format, UTF-16 refused, and another encoding named from a block."""
from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lancetnic_flow.data.readers.table import (_unreadable_numbers, bytes_sample, check_names, check_not_utf8,
                                               check_not_wide, decoded, format_hint, likely_encoding, split_lines, to_float,
                                               to_string, utf8_ok)
from lancetnic_flow.data.sources import Columns
from lancetnic_flow.errors import UserError


def test_to_float_reads_numbers_and_makes_everything_else_null():
    assert to_float(pa.array([" 2.5 ", "1e3", "x", "", "inf", "nan", None])).to_pylist() == \
        [2.5, 1000.0, None, None, None, None, None]
    assert to_float(pa.array([1, 2])).to_pylist() == [1.0, 2.0]
    assert to_float(pa.array([1.0, float("inf")])).to_pylist() == [1.0, None]


def test_numbers_past_float32s_range_are_not_usable_numbers():
    # 1e200 trained every prediction to infinity (its square overflows the fit's moments)
    assert to_float(pa.array(["1e200", "-3.5e38", "3.4e38", "-1e-300"])).to_pylist() == [None, None, 3.4e38, -1e-300]
    assert to_float(pa.array([1e39, -2.0])).to_pylist() == [None, -2.0]


def test_an_integer_past_2_to_the_53_reads_as_its_nearest_float_as_the_same_number_in_text_does():
    # a typed column (Parquet, JSON Lines) of such integers stopped the run with an internal error
    big = 2**53 + 1
    for arr in (pa.array([big, 5], pa.int64()), pa.array([2**64 - 1], pa.uint64())):
        as_text = pa.array([str(v) for v in arr.to_pylist()])
        assert to_float(arr).to_pylist() == to_float(as_text).to_pylist() == [float(v) for v in arr.to_pylist()]


def test_a_list_or_object_in_a_numeric_column_is_no_number_and_is_counted_not_an_internal_error():
    # a JSON Lines field holding a list in every row (a typed list column) stopped the run: no cast to text
    for arr in (pa.array([[1.5], None, [2.0, 3.0]]), pa.array([{"x": 1.5}, None, {"x": 2.0}])):
        assert to_float(arr).to_pylist() == [None, None, None]
        assert _unreadable_numbers(arr, to_float(arr)) == 2


def test_true_and_false_read_as_1_and_0_in_text_as_in_a_boolean_column_whatever_else_the_column_holds():
    # a JSON true beside numbers (a column of text) was no number, the same true in a column of booleans 1
    as_bools = to_float(pa.array([True, False, None])).to_pylist()
    assert as_bools == [1.0, 0.0, None]
    assert to_float(pa.array(["true", "false", None, "2.5", " TRUE ", "False", "yes"])).to_pylist() == \
        [1.0, 0.0, None, 2.5, 1.0, 0.0, None]


@pytest.mark.parametrize("unit, per_second", [("s", 1), ("ms", 1e3), ("us", 1e6), ("ns", 1e9)])
def test_a_duration_column_reads_in_seconds_whatever_unit_the_file_stores(unit, per_second):
    # a pandas timedelta written to Parquet (duration[ns], or [us]) read as its stored count: 90 s as 9e10
    arr = pa.array([int(90 * per_second), int(3 * per_second), None], pa.duration(unit))
    assert to_float(arr).to_pylist() == [90.0, 3.0, None]
    if per_second > 1:   # a fraction of a second stays
        assert to_float(pa.array([int(per_second) // 2], pa.duration(unit))).to_pylist() == [0.5]
    assert _unreadable_numbers(arr, to_float(arr)) == 0


def test_a_decimal_column_reads_as_its_value():
    from decimal import Decimal

    assert to_float(pa.array([Decimal("1.25"), Decimal("-3.50"), None])).to_pylist() == [1.25, -3.5, None]


@pytest.mark.parametrize("arr, kind", [
    (pa.array([0, 86_400_000_000], pa.timestamp("us")), "timestamps"),
    (pa.array([0, 1], pa.timestamp("ns", tz="UTC")), "timestamps"),
    (pa.array([0, 1], pa.date32()), "dates"),
    (pa.array([0, 1], pa.time64("us")), "times of day")])
def test_a_numeric_or_target_column_of_dates_or_times_is_refused_naming_it(arr, kind):
    # they read as no number in every row: the run stopped blaming decimal commas, predict read the mean
    from lancetnic_flow.data.readers.table import finish

    words = pa.array(["alpha beta", "gamma delta"])
    for cols, flag in ((Columns(text=("text",), label="label", numeric=("when",)), "--numeric"),
                       (Columns(text=("text",), target="when"), "--target"),
                       (Columns(text=("text",), numeric=("when",), all_rows=True), "--numeric")):
        given = {"text": words, "label": pa.array(["x", "y"]), "when": arr}
        with pytest.raises(UserError, match=f"{flag} when: a column of {kind} .* holds no number") as e:
            finish(cols, given.__getitem__, 2, 2, {})
        assert "leave when out of" in e.value.hint


def test_to_string_reads_numbers_and_dictionaries_as_text_and_refuses_structs():
    assert to_string(pa.array([1, 2])).to_pylist() == ["1", "2"]
    assert to_string(pa.array(["a", "b"]).dictionary_encode()).to_pylist() == ["a", "b"]
    with pytest.raises(UserError, match="cannot be read as text"):
        to_string(pa.array([{"a": 1}]))


def test_to_string_reads_dates_and_timestamps_as_the_iso_text_a_csv_of_them_holds():
    import datetime as dt

    assert to_string(pa.array([dt.date(2024, 1, 5), None])).to_pylist() == ["2024-01-05", None]
    assert to_string(pa.array([dt.datetime(2024, 1, 5, 10, 30)])).to_pylist() == ["2024-01-05 10:30:00"]


def test_a_kept_date_or_timestamp_column_is_written_as_the_label_of_it_reads():
    """predict --keep day beside a run whose labels are days: the kept value and the label spell one date."""
    import datetime as dt

    from lancetnic_flow.data.readers.table import kept_values

    days = pa.array([dt.datetime(2024, 1, 5), dt.datetime(2024, 1, 5, 10, 30, 0, 500000), None])
    assert kept_values(days).to_pylist() == to_string(days).to_pylist() == [
        "2024-01-05", "2024-01-05 10:30:00.500", None]
    assert kept_values(pa.array([dt.time(10, 30)])).to_pylist() == ["10:30:00.000000"]


def test_utf8_checks_and_line_splitting():
    assert utf8_ok("héllo".encode()) and not utf8_ok(b"caf\xe9")
    assert split_lines(b"a\r\nb\n\nc\n").to_pylist() == ["a", "b", "", "c"]
    assert split_lines(b"").to_pylist() == []
    assert split_lines(b"\n").to_pylist() == split_lines(b"\r\n").to_pylist() == [""]   # a blank line is a line


def test_undecodable_lines_are_dropped_and_counted_and_a_bom_removed():
    data, skipped = decoded(b"\xef\xbb\xbfgood\nbad \xff line\nalso good")
    assert data == b"good\nalso good" and skipped == {"undecodable": 1}
    assert decoded(b"clean\n") == (b"clean\n", {})


def test_a_line_holding_u_fffd_as_text_is_valid_and_stays_beside_an_undecodable_one():
    data, skipped = decoded("a \ufffd in the text\n".encode() + b"bad \xff\nand \xfe\xfe two\nlast\n")
    assert data == "a \ufffd in the text\nlast\n".encode() and skipped == {"undecodable": 2}


@pytest.mark.parametrize("fmt,have,hint", [
    ("csv", ['{"text": "x"}'], "--format jsonl"), ("csv", ["text\tlabel"], "--format tsv"),
    ("tsv", ["text,label"], "--format csv"), ("csv", ["text;label"], "pass --delimiter ';'"),
    ("csv", ["text|label"], "pass --delimiter '|'"), ("csv", ["text,label"], "pass --delimiter ','"),
    ("tsv", ["text;label"], "not by tabs: pass --format csv --delimiter ';'"),
    ("tsv", ["text|label"], "pass --format csv --delimiter '|'"),
    ("csv", ["3.5", "pos"], "looks like a row of data"), ("csv", ["text", "label"], None),
    ("parquet", ["x"], None)])
def test_a_header_that_looks_like_another_format_says_which(fmt, have, hint):
    import lancetnic_flow.options  # noqa: F401  (names the hint's options as flags, as the commands do)

    got = format_hint(fmt, have)
    assert (got is None) if hint is None else (hint in UserError("x", got).said("cli")[1])


def test_a_used_column_missing_or_named_twice_is_refused():
    cols = Columns(text=("text",), label="label")
    check_names("f.csv", ["text", "label", "other"], cols)
    with pytest.raises(UserError, match="label") as e:
        check_names("f.csv", ["text\tlabel"], cols, "csv")
    assert "--format tsv" in e.value.said("cli")[1] and "format tsv" in e.value.said("python")[1]
    with pytest.raises(UserError, match="names the column 'text' 2 times"):
        check_names("f.csv", ["text", "label", "text"], cols)


def test_utf16_text_is_refused_with_how_to_convert():
    with pytest.raises(UserError, match="UTF-16") as e:
        check_not_wide("text,label\n".encode("utf-16"), "f.csv")
    assert "iconv" in e.value.hint
    check_not_wide(b"text,label\nplain,utf8\n", "f.csv")


def test_a_small_file_filled_up_with_nuls_past_its_last_line_is_not_taken_for_utf16():
    # NUL padding (a copy cut short, a preallocated file) made the NULs 30 % of the head: refused as
    # UTF-16 with advice to convert it with iconv -f UTF-16, which garbles a UTF-8 file.
    check_not_wide(b"text,label\nhello world,a\n" + b"\x00" * 3000, "f.csv")
    for wide in ("utf-16-le", "utf-16-be", "utf-32-le"):   # without a BOM: their NULs stand one to three in a row
        with pytest.raises(UserError, match="UTF-16"):
            check_not_wide("text,label\nhello world,a\nfoo bar,b\n".encode(wide), "f.csv")


def test_the_likely_encoding_of_a_block_is_cp1252_when_it_uses_its_quotes_else_latin1():
    assert likely_encoding("“quoted” café".encode("cp1252")) == "cp1252"
    assert likely_encoding("café crème".encode("latin-1")) == "latin-1"


def test_a_numeric_value_that_is_no_number_keeps_its_row_and_is_counted_not_silently_meaned():
    from lancetnic_flow.data.readers.table import finish
    from lancetnic_flow.data.sources import Columns

    cols = Columns(text=("text",), label="label", numeric=("n",))
    words = ["alpha beta", "gamma delta", "epsilon zeta", "eta theta"]
    given = {"text": pa.array(words), "label": pa.array(["x", "y", "x", "y"]), "n": pa.array(["0,5", "1.5", "", "n/a"])}
    chunk = finish(cols, given.__getitem__, 4, 4, {})
    assert chunk.table.column("n").to_pylist() == [None, 1.5, None, None]   # the mean stands in, as for a missing one
    assert chunk.noted == {"unreadable_numeric": 2} and chunk.skipped == {}   # "" is missing, not unreadable
    given["n"] = pa.array([1.0, float("nan"), None, 2.0])
    assert finish(cols, given.__getitem__, 4, 4, {}).noted == {"unreadable_numeric": 1}


def test_a_target_given_but_no_number_is_skipped_as_missing_and_counted_apart_from_one_not_given():
    # "1,5" (a decimal comma) was a missing_target like an empty cell: half a TSV's rows gone, not a word why
    from lancetnic_flow.data.readers.table import finish
    from lancetnic_flow.data.sources import Columns

    cols = Columns(text=("text",), target="y")
    words = ["alpha beta", "gamma delta", "epsilon zeta", "eta theta", "iota kappa", ""]
    given = {"text": pa.array(words), "y": pa.array(["1,5", "2.5", " ", "n/a", "inf", "3,5"])}
    chunk = finish(cols, given.__getitem__, 6, 6, {})
    assert chunk.table.column("target").to_pylist() == [2.5]
    # the empty text's row is empty_text first: not counted; the blank target is missing, not unreadable
    assert chunk.skipped == {"missing_target": 4, "empty_text": 1} and chunk.noted == {"unreadable_target": 3}
    given["y"] = pa.array([1.0, float("nan"), None, 2.0, 3.0, 4.0])
    assert finish(cols, given.__getitem__, 6, 6, {}).noted == {"unreadable_target": 1}


def test_rows_read_for_prediction_count_a_numeric_value_that_is_no_number_as_training_does():
    # predict and evaluate read decimal commas as the training mean without a word (train counted them)
    from lancetnic_flow.data.readers.table import all_rows
    from lancetnic_flow.data.sources import Columns

    cols = Columns(text=("text",), numeric=("n",), all_rows=True)
    given = {"text": pa.array(["alpha beta", "gamma delta", "", "eta theta"]), "n": pa.array(["0,5", "1.5", "x", "n/a"])}
    text = given["text"]
    chunk = all_rows(cols, given.__getitem__, text, pc.greater(pc.utf8_length(text), 0), 4, {}, None, ["text", "n"])
    assert chunk.table.column("n").to_pylist() == [None, 1.5, None, None]
    assert chunk.noted == {"unreadable_numeric": 2}   # the empty text's row is not predicted: not counted


def test_a_txt_file_read_as_csv_for_its_commas_says_so_and_names_format_text():
    # "no column 'text'; the file has columns: 'Paris', ' France'" never said the .txt was read as CSV
    cols = Columns(text=("text",))
    with pytest.raises(UserError) as e:
        check_names("file:///d/cities.txt", ["Paris", " France"], cols, "csv")
    assert "read as CSV" in str(e.value) and e.value.cli[1] == "if each line is one text, pass --format text"
    assert e.value.hint == "if each line is one text, pass format='text'"   # train(cfg)'s words
    with pytest.raises(UserError) as e:
        check_names("file:///d/cities.csv", ["Paris", " France"], cols, "csv")
    assert "read as CSV" not in str(e.value)


def test_a_nan_label_is_a_missing_label_and_a_kept_nan_is_written_empty():
    # polars, Spark and pyarrow write a missing float as NaN: it trained a class "nan"
    from lancetnic_flow.data.readers.table import finish

    nan = float("nan")
    given = {"text": pa.array(["alpha beta", "gamma delta", "eta theta"]), "label": pa.array([0.0, nan, 2.0]),
             "sets": pa.array([[1.0, nan], [nan], [2.0]], pa.list_(pa.float64()))}
    chunk = finish(Columns(text=("text",), label="label"), given.__getitem__, 3, 3, {})
    assert chunk.table.column("label").to_pylist() == ["0", "2"] and chunk.skipped == {"missing_label": 1}
    chunk = finish(Columns(text=("text",), label="sets", multilabel=True), given.__getitem__, 3, 3, {})
    assert chunk.table.column("label").to_pylist() == [["1"], ["2"]] and chunk.skipped == {"missing_label": 1}
    cols = Columns(text=("text",), label="label", keep=("label",), all_rows=True)
    kept = finish(cols, given.__getitem__, 3, 3, {}, have=["text", "label"]).table
    assert kept.column("keep:label").to_pylist() == ["0", None, "2"] and kept.column("label").to_pylist()[1] is None


@pytest.mark.parametrize("dictionary", [False, True])
@pytest.mark.parametrize("all_rows", [False, True])
def test_a_binary_text_value_that_is_not_utf8_skips_its_row_only_as_undecodable(all_rows, dictionary):
    # a Parquet BYTE_ARRAY text column without the UTF8 annotation stopped train and predict (ArrowInvalid);
    # so did one dictionary-encoded (pandas' categoricals of bytes, kept as such by pyarrow's files)
    from lancetnic_flow.data.readers.table import finish

    def column(values):
        arr = pa.array(values, pa.binary())
        return arr.dictionary_encode() if dictionary else arr

    given = {"text": column([b"alpha beta", b"caf\xe9 au lait", b"gamma delta"]),
             "label": pa.array(["x", "y", "x"]), "id": column([b"1", b"\xff2", b"3"])}
    cols = Columns(text=("text",), label="label", keep=("id",), all_rows=all_rows)
    chunk = finish(cols, given.__getitem__, 3, 3, {}, have=["text", "label", "id"])
    assert chunk.skipped == {"undecodable": 1}
    if all_rows:   # in place, with its status; a kept value of bytes stays bytes (as U+FFFD ids could merge)
        assert chunk.table.column("status").to_pylist() == ["ok", "undecodable", "ok"]
        assert chunk.table.column("keep:id").to_pylist() == [b"1", b"\xff2", b"3"]
    else:
        assert chunk.table.column("text").to_pylist() == ["alpha beta", "gamma delta"]


def _latin1_rows(n: int, all_rows: bool = False):
    words = ["caf\xe9 cr\xe8me", "na\xefve r\xe9sum\xe9", "plain words"]
    texts = [words[i % 3].encode("latin-1") for i in range(n)]
    table = pa.table({"text": pa.array(texts, pa.binary()), "label": [f"l{i % 2}" for i in range(n)],
                      "note": pa.array([b"\xe0 garder"] * n, pa.binary())})
    return table, Columns(text=("text",), label="label", keep=("note",), all_rows=all_rows)


@pytest.mark.parametrize("all_rows", [False, True])
def test_a_typed_files_bytes_mostly_in_another_encoding_stop_the_run_naming_it_as_a_text_files_do(all_rows):
    # a Parquet/Arrow column of latin-1 bytes lost two rows in three as "undecodable", the run went on
    from lancetnic_flow.data.readers.table import finish_table

    table, cols = _latin1_rows(30, all_rows)
    with pytest.raises(UserError) as e:
        finish_table("s3://b/hive.parquet", cols, table, table.column_names)
    assert "s3://b/hive.parquet: 20 of 30 rows read" in str(e.value) and "--encoding latin-1" in e.value.said("cli")[1]
    few, cols = _latin1_rows(6, all_rows)   # a few stray rows stay counted skips
    assert finish_table("f.parquet", cols, few, few.column_names).skipped == {"undecodable": 4}


@pytest.mark.parametrize("all_rows", [False, True])
def test_a_typed_files_bytes_are_decoded_in_the_encoding_given(all_rows):
    # --encoding latin-1 did nothing to a Parquet/Arrow column of bytes: its rows stayed undecodable
    from lancetnic_flow.data.readers.table import finish_table

    table, cols = _latin1_rows(30, all_rows)
    chunk = finish_table("f.parquet", dataclasses.replace(cols, encoding="latin_1"), table, table.column_names)
    assert chunk.skipped == {} and chunk.table.column("text").to_pylist()[:3] == \
        ["caf\xe9 cr\xe8me", "na\xefve r\xe9sum\xe9", "plain words"]
    if all_rows:
        assert set(chunk.table.column("keep:note").to_pylist()) == {"\xe0 garder"}


def test_a_typed_files_column_of_utf8_bytes_read_in_a_single_byte_encoding_stops_the_run():
    # --encoding latin-1 decoded a Parquet/Arrow column of UTF-8 bytes as "cafÃ©", every row kept
    from lancetnic_flow.data.readers.table import finish_table

    table = pa.table({"text": pa.array(["café crème".encode(), "brûlée".encode()], pa.binary()), "label": ["a", "b"]})
    cols = Columns(text=("text",), label="label", encoding="latin_1")
    with pytest.raises(UserError, match="f.parquet: the file is UTF-8 text.*'cafÃ©'"):
        finish_table("f.parquet", cols, table, table.column_names)


def test_a_kept_column_of_utf8_bytes_read_in_a_single_byte_encoding_stops_prediction_as_a_text_column_does():
    # predict --keep id --encoding latin-1 wrote a column of UTF-8 ids as "cafÃ©": only text and labels were judged
    from lancetnic_flow.data.readers.table import finish_table

    table = pa.table({"text": pa.array([b"plain words", b"more words"], pa.binary()),
                      "id": pa.array(["café crème".encode(), "brûlée".encode()], pa.binary())})
    for cols in (Columns(text=("text",), keep=("id",), all_rows=True, encoding="latin_1"),
                 Columns(text=("text",), keep_all=True, all_rows=True, encoding="latin_1")):
        with pytest.raises(UserError, match="f.parquet: the file is UTF-8 text.*'cafÃ©'"):
            finish_table("f.parquet", cols, table, table.column_names)
    training = Columns(text=("text",), encoding="latin_1")   # reads no kept column: nothing to judge there
    assert finish_table("f.parquet", training, table, table.column_names).table.num_rows == 2


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
@pytest.mark.parametrize("all_rows", [False, True])
def test_a_string_column_holding_bytes_that_are_not_utf8_makes_those_rows_undecodable(tmp_path, fmt, all_rows):
    # Parquet's UTF8 annotation and Arrow IPC's string type go unchecked by their readers: such a value
    # stopped train, predict and evaluate in the first kernel that lower-cased it (ArrowInvalid)
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import plan_source

    def unchecked(values: list[bytes]) -> pa.Array:
        raw = pa.array(values, pa.binary())
        return pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())

    table = pa.table({"text": unchecked([b"goal \xed\xa0\x80 match", b"team win", b"phone \xff chip"]),
                      "label": ["a", "a", "b"], "id": unchecked([b"1", b"2\xff", b"3"])})
    path = str(tmp_path / f"d.{fmt}")
    pq.write_table(table, path) if fmt == "parquet" else feather.write_feather(table, path, compression="uncompressed")
    cols = Columns(text=("text",), label="label", keep=("id",) if all_rows else (), all_rows=all_rows)
    chunks = list(read_partition(plan_source([path]).partitions[0], cols))
    assert sum(c.skipped.get("undecodable", 0) for c in chunks) == 2
    got = pa.concat_tables([c.table for c in chunks])
    if all_rows:
        assert got.column("status").to_pylist() == ["undecodable", "ok", "undecodable"]
        assert got.column("keep:id").to_pylist() == [b"1", b"2\xff", b"3"]
    else:
        assert got.column("text").to_pylist() == ["team win"]


# Rows of one-character Chinese, emoticons, punctuation, and a blank text: a character analyzer reads all but the last.
_SHORT = ["好", "差", ":)", "!!!", " "]


def _short_rows(fmt: str, malformed: bool) -> tuple[bytes, bytes | None]:
    """``_SHORT`` as a block of ``fmt`` (with one malformed line: the per-line path), and its header."""
    import json

    if fmt == "csv":
        body = "".join(f'"{t}",{"pos" if i % 2 else "neg"}\n' for i, t in enumerate(_SHORT))
        return (body + ('"unclosed,pos\n' if malformed else "")).encode(), b"text,label\n"
    if fmt == "jsonl":
        body = "".join(json.dumps({"text": t, "label": "pos" if i % 2 else "neg"}) + "\n" for i, t in enumerate(_SHORT))
        return (body + ("{not json\n" if malformed else "")).encode(), None
    return "".join(f"__label__{'pos' if i % 2 else 'neg'} {t}\n" for i, t in enumerate(_SHORT)).encode(), None


@pytest.mark.parametrize("fmt,malformed", [("csv", False), ("csv", True), ("jsonl", False), ("jsonl", True),
                                           ("fasttext", False)])
def test_empty_text_follows_the_analyzers_rule_in_every_format_for_training_and_prediction(fmt, malformed):
    from lancetnic_flow.data.readers.csv import parse_csv
    from lancetnic_flow.data.readers.jsonl import parse_jsonl
    from lancetnic_flow.data.readers.lines import parse_lines

    data, header = _short_rows(fmt, malformed)
    parse = {"csv": lambda c: parse_csv(data, header, "csv", c, "f.csv"),
             "jsonl": lambda c: parse_jsonl(data, c, "f.jsonl"),
             "fasttext": lambda c: parse_lines(data, "fasttext", c, "f.ft")}[fmt]
    for rule, kept in (("word", []), ("visible", _SHORT[:4]), ("chars 1", _SHORT[:4]), ("chars 2", [":)", "!!!"])):
        train = parse(Columns(text=("text",), label="label", text_rule=rule))
        assert train.table.column("text").to_pylist() == kept
        assert train.skipped.get("empty_text", 0) == len(_SHORT) - len(kept)
        ask = parse(Columns(text=("text",), all_rows=True, text_rule=rule)).table
        statuses = [s for t, s in zip(ask.column("text").to_pylist(), ask.column("status").to_pylist())
                    if s != "malformed"]
        assert statuses == ["ok" if t in kept else "empty_text" for t in _SHORT]


def test_a_typed_files_rows_follow_the_analyzers_rule():
    from lancetnic_flow.data.readers.table import finish_table

    table = pa.table({"text": _SHORT, "label": ["a"] * len(_SHORT)})
    chunk = finish_table("f.parquet", Columns(text=("text",), label="label", text_rule="visible"), table,
                         table.column_names)
    assert chunk.table.column("text").to_pylist() == _SHORT[:4] and chunk.skipped == {"empty_text": 1}


def test_bytes_sample_takes_text_and_label_bytes_up_to_its_limit_only():
    text = pa.array([b"caf\xe9 " * 10] * 1000 + [None], pa.binary())
    label = pa.array([b"s\xe9"] * 1001, pa.binary()).dictionary_encode()
    other = pa.array([b"\xff\xff"] * 1001, pa.binary())
    table = pa.table({"t": text, "y": label, "o": other})
    sample = bytes_sample(table, Columns(text=("t",), label="y"), limit=200)
    assert 200 <= len(sample) < 200 + 60   # stops at the first value past the limit
    assert b"\xff" not in sample            # a column the run does not read is not sampled
    whole = bytes_sample(table, Columns(text=("t",), label="y"), limit=1 << 20)
    assert whole.count(b"s\xe9") == 1001 and whole.count(b"caf\xe9") == 10_000


SPLIT_CALLS: list[str] = []


def _noted_split(text: str) -> list[str]:
    SPLIT_CALLS.append(text)
    return [w for w in text.split() if w.isalnum()]


@pytest.mark.parametrize("all_rows", [False, True])
def test_an_own_tokenizers_lists_travel_with_the_rows_so_training_and_prediction_tokenise_once(all_rows):
    from lancetnic_flow.data.readers.table import finish_table
    from lancetnic_flow.data.usable import TOKENS_COLUMN, text_rule
    from lancetnic_flow.features import register_tokenizer
    from lancetnic_flow.features.vectorize import FittedFeatures

    spec = register_tokenizer("unit-table-noted", _noted_split)
    features = FittedFeatures(mode="hashing", buckets=2**10, tokenizer=spec)
    texts = ["Goal match", "  ", "...", "soup Bread soup"]
    table = pa.table({"text": texts, "label": ["a"] * len(texts)})
    columns = Columns(text=("text",), label="label", text_rule=text_rule(features), all_rows=all_rows)
    SPLIT_CALLS.clear()
    chunk = finish_table("f.parquet", columns, table, table.column_names)
    assert sorted(SPLIT_CALLS) == sorted(["goal match", "...", "soup bread soup"])   # blank: never handed
    assert TOKENS_COLUMN in chunk.table.column_names
    rows = chunk.table.filter(pc.equal(chunk.table["status"], "ok")) if all_rows else chunk.table
    assert rows["text"].to_pylist() == ["Goal match", "soup Bread soup"]
    SPLIT_CALLS.clear()
    got = features.transform(rows)
    assert SPLIT_CALLS == []
    want = features.transform_texts(rows["text"])
    assert got.indices.tolist() == want.indices.tolist() and got.values.tolist() == want.values.tolist()


@pytest.mark.parametrize("fmt, data", [("csv", "text,label\ncafé crème,é\nfoo bar,b\n"),
                                       ("jsonl", '{"text": "café crème", "label": "é"}\n'),
                                       ("fasttext", "__label__a café crème brûlée\n")])
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_utf8_file_read_in_a_single_byte_encoding_stops_the_run_instead_of_garbling_it(tmp_path, fmt, data, suffix):
    # --encoding latin-1 (given, or a run's, which predict and evaluate read with) on a UTF-8 file read
    # "café" as "cafÃ©" and the label "é" as a class "Ã©" of its own, every row kept: no skip said so.
    import gzip

    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import plan_source

    path = tmp_path / f"f.{'ft' if fmt == 'fasttext' else fmt}{suffix}"
    path.write_bytes(gzip.compress(data.encode()) if suffix else data.encode())
    columns = Columns(text=("text",), label="label", encoding="latin_1")
    part = plan_source([str(path)]).partitions[0]
    with pytest.raises(UserError, match="UTF-8 text.*'café' would read as 'cafÃ©'") as e:
        list(read_partition(part, columns))
    assert "--encoding utf-8" in e.value.said("cli")[1]
    path.write_bytes(gzip.compress(data.encode("latin-1")) if suffix else data.encode("latin-1"))
    rows = [r for c in read_partition(part, columns) for r in c.table.to_pylist()]
    assert rows[0]["text"].startswith("café crème")   # the file in latin-1 itself reads as before


def test_only_letters_enough_to_rule_out_chance_make_a_block_utf8():
    check_not_utf8("ﾃｩ ﾃｨ ﾃｯ".encode("shift_jis"), "f.csv", "shift_jis")   # é è ï's bytes, half-width kana there
    check_not_utf8("CAFÉ” ou CAFÉ’".encode("cp1252"), "f.csv", "cp1252")   # UTF-8's "CAFɔ ou CAFɒ" by chance
    check_not_utf8("plain ascii".encode(), "f.csv", "latin_1")
    check_not_utf8("naïve café crème".encode("cp1252"), "f.csv", "cp1252")
    with pytest.raises(UserError, match="shift_jis"):
        check_not_utf8("日本語のテキスト".encode(), "f.csv", "shift_jis")
    with pytest.raises(UserError, match="cp1252"):
        check_not_utf8("naïve café crème".encode(), "f.csv", "cp1252")


@pytest.mark.parametrize("text", ["café", "naïve", "it’s", "£5", "Привет мир"])
@pytest.mark.parametrize("encoding", ["latin_1", "cp1252"])
def test_a_block_of_one_or_two_utf8_letters_read_in_a_single_byte_encoding_stops_the_run(text, encoding):
    # a block needed three letters past ASCII: "café" alone read as "cafÃ©", a word and a label of its own
    with pytest.raises(UserError, match="the file is UTF-8 text"):
        check_not_utf8(f"text,label\n{text},a\nplain words,b\n".encode(), "f.csv", encoding)


def test_a_utf8_block_with_a_stray_byte_of_another_encoding_still_stops_the_run():
    with pytest.raises(UserError, match="'café' would read as 'cafÃ©'"):
        check_not_utf8("café crème brûlée\n".encode() + b"x\xe9\n", "f.csv", "latin_1")


GENUINE = ["naïve café crème", "Größe Straße Grüße über schön", "niño señor año ¿Qué? ¡Hola!",
           "SÃO PAULO coração IRMÃ", "«CRÈME» PÂTÉ ÊTRE", "20°C ½ kg ±5 €10 £5 — • “quoted”",
           "RÉSUMÉ™ NAÏVE®", "ÉTÉ\xa0: été"]


@pytest.mark.parametrize("text", GENUINE)
@pytest.mark.parametrize("encoding", ["latin_1", "cp1252"])
def test_genuine_single_byte_text_even_with_letters_before_marks_is_read_in_its_encoding(text, encoding):
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:
        pytest.skip(f"{encoding} cannot write {text!r}")
    check_not_utf8(data, "f.csv", encoding)
    check_not_utf8(b"text\n" + b"\n".join([data] * 50), "f.csv", encoding)


def test_upper_case_letters_before_marks_are_utf8_only_three_at_a_time_in_a_block_of_nothing_else():
    # the trade-off docs/cli.md states: cp1252 makes UTF-8's shape there by chance ("CAFÉ…" is "CAFߥ")
    check_not_utf8("CAFÉ… ou Gruß…".encode("cp1252"), "f.csv", "cp1252")
    check_not_utf8("RÉSUMÉ™ CAFÉ… ou Gruß…".encode("cp1252"), "f.csv", "cp1252")   # its first É is no UTF-8
    with pytest.raises(UserError, match="UTF-8 text"):
        check_not_utf8("CAFÉ… ou Gruß… OLÉ…".encode("cp1252"), "f.csv", "cp1252")


@pytest.mark.parametrize("kind", ["binary", "large_binary", "binary_view", "dictionary", "sliced"])
def test_a_typed_files_utf8_bytes_past_its_first_rows_read_in_latin1_stop_the_run(kind):
    # only the first 64 KiB of a row group's bytes were judged: UTF-8 letters past them read garbled
    from lancetnic_flow.data.readers.table import finish_table

    values = [b"plain words here"] * 10_000 + ["café latte".encode()]
    arr = pa.array(values, {"large_binary": pa.large_binary(), "binary_view": pa.binary_view()}.get(kind, pa.binary()))
    arr = arr.dictionary_encode() if kind == "dictionary" else arr
    table = pa.table({"text": arr, "label": ["a"] * len(values)})
    table = table.slice(3) if kind == "sliced" else table
    with pytest.raises(UserError, match="café' would read as '.*cafÃ©'"):
        finish_table("f.parquet", Columns(text=("text",), label="label", encoding="latin_1"), table, table.column_names)


def test_an_empty_label_list_is_a_row_no_label_applies_to_and_a_null_or_blank_label_is_missing():
    # an empty set ([]) was skipped as missing_label: a model of such data learned to give every row a label
    from lancetnic_flow.data.readers.table import finish, label_column

    cols = Columns(text=("text",), label="label", multilabel=True)
    lists = pa.array([["a", "b"], [], None, [None], [""]], pa.list_(pa.string()))
    sets, ok = label_column(cols, lists)
    assert sets.to_pylist() == [["a", "b"], [], [], [], []] and ok.to_pylist() == [True, True, False, False, False]
    cells = pa.array(["a|b", "[]", " [ ] ", "['a']", "", "  ", None, "|", "[\"\"]"])
    sets, ok = label_column(dataclasses.replace(cols, label_sep="|"), cells)
    assert sets.to_pylist()[:4] == [["a", "b"], [], [], ["a"]]
    assert ok.to_pylist() == [True, True, True, True, False, False, False, False, False]
    chunk = finish(cols, {"text": pa.array(["goal match"] * 3), "label": pa.array([["a"], [], None])}.__getitem__,
                   3, 3, {})
    assert chunk.table.column("label").to_pylist() == [["a"], []] and chunk.skipped == {"missing_label": 1}
