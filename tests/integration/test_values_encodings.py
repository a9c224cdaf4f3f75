"""Values of the wrong kind, texts without a token, files in another encoding,
and the whole-text hash of the validation split (issue 15, items 5, 6 and 8).

Real files through the readers and, for the user-facing promises, the CLI
(real processes): a row that cannot be trained is counted by its reason in
training and gets that reason as its status in prediction; a file in another
encoding stops the run naming the file, the share and ``--encoding``.
"""
from __future__ import annotations

import csv
import gzip
import json

import numpy as np
import pyarrow as pa
import pytest
from helpers import CLUSTER, assert_user_error, cli

from lancetnic_flow.data.checks import checked_source
from lancetnic_flow.data.readers import read_partition
from lancetnic_flow.data.sources import Columns, FileInfo, Partition
from lancetnic_flow.errors import UserError
from lancetnic_flow.features.hashing import hash_strings
from lancetnic_flow.features.split import validation_mask
from lancetnic_flow.formats import text_encoding

RUN = [*CLUSTER, "--epochs", "1"]
WORDS = {"sports": "match goal team coach season", "tech": "chip phone code cloud server"}

# Line by line: 2 good, 5 of another kind (number, boolean, list, object, float),
# 3 without a token (punctuation, NULs and control characters, one letter).
ODD_JSONL = (b'{"id": 1, "text": "the team won the match", "label": "sports"}\n'
             b'{"id": 2, "text": 42, "label": "tech"}\n'
             b'{"id": 3, "text": true, "label": "tech"}\n'
             b'{"id": 4, "text": ["a", "list"], "label": "tech"}\n'
             b'{"id": 5, "text": {"nested": "object"}, "label": "tech"}\n'
             b'{"id": 6, "text": "!!! ... ???", "label": "tech"}\n'
             b'{"id": 7, "text": "\\u0000\\u0000\\u0001\\u001f", "label": "tech"}\n'
             b'{"id": 8, "text": "x", "label": "sports"}\n'
             b'{"id": 9, "text": 3.5, "label": "sports"}\n'
             b'{"id": 10, "text": "a new phone chip", "label": "tech"}\n')
ODD_STATUS = ["ok", "not_text", "not_text", "not_text", "not_text", "empty_text", "empty_text", "empty_text",
              "not_text", "ok"]


def read(path, data: bytes, fmt: str, columns: Columns):
    path.write_bytes(data)
    part = Partition(0, FileInfo(str(path), len(data), "v", fmt, None), 0, len(data))
    return list(read_partition(part, columns))


def good_rows(n: int) -> list[tuple[str, str]]:
    labels = list(WORDS)
    return [(f"{WORDS[labels[i % 2]]} row {i}", labels[i % 2]) for i in range(n)]


# ---------------------------------------------------------------- item 5: values of the wrong kind


def test_json_values_that_are_not_text_are_skipped_in_training_and_a_status_in_prediction(tmp_path):
    (train,) = read(tmp_path / "odd.jsonl", ODD_JSONL, "jsonl", Columns(text=("text",), label="label"))
    assert train.rows_read == 10
    assert train.skipped == {"not_text": 5, "empty_text": 3}
    assert train.table["text"].to_pylist() == ["the team won the match", "a new phone chip"]
    (pred,) = read(tmp_path / "odd.jsonl", ODD_JSONL, "jsonl", Columns(text=("text",), keep=("id",), all_rows=True))
    assert pred.table["status"].to_pylist() == ODD_STATUS
    assert pred.skipped == {"not_text": 5, "empty_text": 3}
    # prediction echoes the value as it was (JSON), never as text it trained on
    assert pred.table["text"].to_pylist()[4] == '{"nested": "object"}'


def test_a_block_where_every_text_is_a_number_reads_by_arrow_types(tmp_path):
    """One type per column (Arrow's fast path): the column type says not text."""
    data = b'{"text": 1, "label": "a"}\n{"text": 2.5, "label": "b"}\n'
    (train,) = read(tmp_path / "n.jsonl", data, "jsonl", Columns(text=("text",), label="label"))
    assert train.table.num_rows == 0 and train.skipped == {"not_text": 2}
    data = b'{"text": {"a": 1}, "label": "a"}\n{"text": null, "label": "b"}\n{"text": {"a": 2}, "label": "b"}\n'
    (pred,) = read(tmp_path / "s.jsonl", data, "jsonl", Columns(text=("text",), all_rows=True))
    assert pred.table["status"].to_pylist() == ["not_text", "empty_text", "not_text"]


def test_numbers_in_a_csv_cell_stay_text_and_numbers_as_labels_stay_labels(tmp_path):
    data = b'text,label\n12345,a\n3.25,b\n"!!!",a\nplain words,7\n'
    (chunk,) = read(tmp_path / "n.csv", data, "csv", Columns(text=("text",), label="label"))
    assert chunk.table["text"].to_pylist() == ["12345", "3.25", "plain words"]
    assert chunk.table["label"].to_pylist() == ["a", "b", "7"]
    assert chunk.skipped == {"empty_text": 1}


def test_texts_without_a_token_count_as_empty_text_in_every_format(tmp_path):
    lines = ["real words here", "...", "\x00\x00\x00", "\x01\x02 \x1f", "- / - ", "a", "ok go"]
    (text,) = read(tmp_path / "t.txt", "\n".join(lines).encode() + b"\n", "text", Columns(text=("text",)))
    assert text.skipped == {"empty_text": 5} and text.table["text"].to_pylist() == ["real words here", "ok go"]
    # "\x01\x02 \x1f" is stripped of its whitespace first; fastText tags are not text
    ft = "__label__a real words\n__label__b ...\n__label__a \x00\x00\n__label__b go on\n".encode()
    (fast,) = read(tmp_path / "t.ft", ft, "fasttext", Columns(text=("text",), label="label"))
    assert fast.skipped == {"empty_text": 2} and fast.table["label"].to_pylist() == ["a", "b"]


def test_cli_train_counts_wrong_kinds_and_empty_texts_and_predict_gives_them_a_status(tmp_path):
    rows = [{"id": i, "text": t, "label": lab} for i, (t, lab) in enumerate(good_rows(200))]
    body = b"".join(json.dumps(r).encode() + b"\n" for r in rows) + ODD_JSONL
    (tmp_path / "train.jsonl").write_bytes(body)
    p = cli("train", "train.jsonl", *RUN, "--out", "runs", "--name", "odd", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    m = json.loads((tmp_path / "runs" / "odd" / "metrics.json").read_text())
    assert m["rows"]["skipped"].get("not_text") == 5 and m["rows"]["skipped"].get("empty_text") == 3
    assert m["rows"]["read"] == 210
    p = cli("predict", "runs/odd", "--input", "train.jsonl", "--output", "out.jsonl", "--keep", "id",
            *CLUSTER, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(out) == 210 and [r["id"] for r in out] == [str(i) for i in [*range(200), *range(1, 11)]]
    assert [r["status"] for r in out[200:]] == ODD_STATUS
    assert all(r["predicted"] is None for r in out[200:] if r["status"] != "ok")
    assert "5 not_text" in p.stdout + p.stderr and "3 empty_text" in p.stdout + p.stderr


# ---------------------------------------------------------------- item 6: encodings


def latin1_csv(path, n: int = 300) -> list[tuple[str, str]]:
    """A CSV in Latin-1: every third row has an accented word (not UTF-8)."""
    rows = [(f"{t} {'café crème' if i % 3 == 0 else 'plain'}", lab) for i, (t, lab) in enumerate(good_rows(n))]
    with open(path, "w", encoding="latin-1", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows(rows)
    return rows


def test_encoding_names_are_checked_and_utf8_is_the_default():
    assert text_encoding(None) is None and text_encoding("utf-8") is None and text_encoding("UTF8") is None
    assert text_encoding("latin-1") == text_encoding("latin1") == "iso8859-1"
    assert text_encoding("cp1252") == "cp1252"
    for name, needle in [("utf-16", "convert them to UTF-8"), ("utf-32", "iconv"), ("cp500", "convert"),
                         ("klingon", "no such text encoding")]:
        with pytest.raises(UserError) as e:
            text_encoding(name)
        assert needle in str(e.value)


@pytest.mark.parametrize("compressed", [False, True])
def test_a_latin1_file_stops_up_front_and_reads_whole_with_its_encoding(tmp_path, compressed):
    path = tmp_path / "l.csv"
    rows = latin1_csv(path)
    if compressed:
        (tmp_path / "l.csv.gz").write_bytes(gzip.compress(path.read_bytes()))
        path = tmp_path / "l.csv.gz"
    cols = Columns(text=("text",), label="label")
    with pytest.raises(UserError) as e:
        checked_source([str(path)], "auto", {}, 1 << 20, cols)
    assert "l.csv" in str(e.value) and "100 of 300 rows" in str(e.value) and "33.3 %" in str(e.value)
    assert "encoding latin-1" in str(e.value) and "--encoding latin-1" in e.value.said("cli")[1]
    latin = Columns(text=("text",), label="label", encoding=text_encoding("latin-1"))
    src = checked_source([str(path)], "auto", {}, 1 << 20, latin)
    chunks = [c for p in src.partitions for c in read_partition(p, latin)]
    assert sum(c.table.num_rows for c in chunks) == 300 and not any(c.skipped for c in chunks)
    assert [t for c in chunks for t in c.table["text"].to_pylist()] == [t for t, _ in rows]


def test_a_latin1_file_split_in_byte_ranges_reads_every_row_once(tmp_path):
    path = tmp_path / "l.csv"
    rows = latin1_csv(path, 3000)
    latin = Columns(text=("text",), label="label", encoding="iso8859-1")
    src = checked_source([str(path)], "auto", {}, 8 * 1024, latin)
    assert len(src.partitions) > 5
    got = [t for p in src.partitions for c in read_partition(p, latin) for t in c.table["text"].to_pylist()]
    assert got == [t for t, _ in rows]


def test_a_few_stray_bad_lines_stay_counted_skips(tmp_path):
    good = "".join(f"{t},{lab}\n" for t, lab in good_rows(500)).encode()
    data = b"text,label\n" + good + b"caf\xe9 one,tech\n" * 3
    (chunk,) = read(tmp_path / "s.csv", data, "csv", Columns(text=("text",), label="label"))
    assert chunk.skipped == {"undecodable": 3} and chunk.table.num_rows == 500


def test_a_utf16_file_is_refused_with_advice_to_convert(tmp_path):
    path = tmp_path / "w.csv"
    path.write_bytes("text,label\nhello world,a\n".encode("utf-16"))
    with pytest.raises(UserError, match="UTF-16") as e:
        checked_source([str(path)], "auto", {}, 1 << 20, Columns(text=("text",), label="label"))
    assert "iconv" in str(e.value)


def test_encodings_of_jsonl_text_and_fasttext_are_decoded_per_block(tmp_path):
    cp = "cp1252"
    cases = {"jsonl": '{"text": "d\u00e9j\u00e0 vu \u201cquoted\u201d", "label": "a"}\n',
             "text": "d\u00e9j\u00e0 vu \u201cquoted\u201d\n",
             "fasttext": "__label__a d\u00e9j\u00e0 vu \u201cquoted\u201d\n"}
    for fmt, line in cases.items():
        cols = Columns(text=("text",), label=None if fmt == "text" else "label", encoding=cp)
        (chunk,) = read(tmp_path / f"x.{fmt}", (line * 20).encode(cp), fmt, cols)
        assert chunk.table["text"].to_pylist() == ["d\u00e9j\u00e0 vu \u201cquoted\u201d"] * 20, fmt


def test_encoding_is_part_of_the_cache_key_only_when_given():
    from lancetnic_flow.dataflow.manifest import columns_key

    plain = Columns(text=("text",), label="label")
    assert columns_key(plain) == (("text",), "label", None, ())   # as before --encoding existed
    assert columns_key(Columns(text=("text",), label="label", encoding="iso8859-1")) != columns_key(plain)


def test_cli_latin1_exit_2_then_encoding_trains_every_row_and_predict_evaluate_read_it(tmp_path):
    latin1_csv(tmp_path / "l.csv", 300)
    p = cli("train", "l.csv", *RUN, "--out", "runs", "--name", "x", cwd=tmp_path)
    assert_user_error(p, "l.csv", "100 of 300 rows", "33.3 %", "--encoding latin-1")
    p = cli("train", "l.csv", "--encoding", "latin-1", *RUN, "--out", "runs", "--name", "x", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    m = json.loads((tmp_path / "runs" / "x" / "metrics.json").read_text())
    assert m["rows"]["read"] == 300 and not m["rows"]["skipped"]
    assert m["rows"]["trained"] + m["rows"]["validated"] == 300
    assert json.loads((tmp_path / "runs" / "x" / "config.json").read_text())["data"]["encoding"] == "latin-1"
    # predict and evaluate default to the run's encoding
    p = cli("predict", "runs/x", "--input", "l.csv", "--output", "p.csv", *CLUSTER, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(tmp_path / "p.csv", encoding="utf-8") as f:
        out = list(csv.DictReader(f))
    assert len(out) == 300 and {r["status"] for r in out} == {"ok"} and "café" in out[0]["text"]
    p = cli("evaluate", "runs/x", "l.csv", "--json", *CLUSTER, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["rows"]["evaluated"] == 300
    p = cli("evaluate", "runs/x", "l.csv", "--encoding", "utf-16", *CLUSTER, cwd=tmp_path)
    assert_user_error(p, "utf-16", "convert")
    # a UTF-8 file read in the run's latin-1 was predicted as "cafÃ©", every row "ok"
    (tmp_path / "u.csv").write_text("text,label\ncafé crème brûlée,a\n", encoding="utf-8")
    p = cli("predict", "runs/x", "--input", "u.csv", "--output", "u_out.csv", *CLUSTER, cwd=tmp_path)
    assert_user_error(p, "u.csv", "UTF-8", "'cafÃ©'", "--encoding utf-8")


# ---------------------------------------------------------------- item 8: a hash of the whole text


def test_the_whole_string_hash_is_stable_across_processes_and_versions():
    """Fixed values: a change here changes every validation split (see CHANGELOG.md)."""
    got = [int(h) for h in hash_strings(pa.array(["", "a", "hello world", "caf\u00e9", None]))]
    assert got == EXPECTED_HASHES
    assert got[0] == got[4]   # a null hashes like ""


def test_templated_texts_differing_only_in_the_middle_split_independently():
    head, tail = "Dear customer, your order " * 8, " has shipped. Thank you for shopping with us." * 8
    texts = pa.array([f"{head}{i}{tail}" for i in range(10_000)])
    share = validation_mask(pa.table({"text": texts}), 0.1).mean()
    assert 0.09 < share < 0.11
    assert len(np.unique(hash_strings(texts))) == 10_000


EXPECTED_HASHES = [17665956581633026203, 198367012849983736, 417524495691944273, 16195296087438488975, 17665956581633026203]
