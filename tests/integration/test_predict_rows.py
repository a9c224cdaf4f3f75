"""Every input row gets an output row: prediction on messy input, through the
CLI (real processes, real files) and the Python API, never drops, reorders
or silently empties a row."""
from __future__ import annotations

import bz2
import csv
import gzip
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import assert_user_error, cli

from lancetnic_flow.data.frames import input_rows
from lancetnic_flow.data.readers import read_partition
from lancetnic_flow.data.sources import Columns, FileInfo, Partition
from lancetnic_flow.runs.predict import Predictor

# ids 1..9; 2 empty text, 3 an unclosed quote (takes the lines after it, which
# are then read again), 5 not UTF-8, 6 too many fields, 8 whitespace only.
MESSY_CSV = (b'id,text,source\n1,the match ended with a late goal,a\n2,,b\n3,"an unclosed quote\n'
             b'4,shares fell after the report,c\n5,caf\xe9 society,d\n6,x,y,z\n7,the new phone has a chip,e\n'
             b'8,   ,f\n9,parliament passed the vote,g\n')
MESSY_STATUS = ["ok", "empty_text", "malformed", "ok", "undecodable", "malformed", "ok", "empty_text", "ok"]

MESSY_JSONL = (b'{"id": 1, "text": "the match ended with a late goal"}\n'
               b'{"id": 2, "text": null}\n'
               b'this is not json\n'
               b'{"id": 4, "text": "shares fell after the report"}\n'
               b'{"id": 5, "text": "caf\xe9 society"}\n'
               b'[1, 2, 3]\n'
               b'{"id": 7, "text": "the new phone has a chip", "extra": {"a": 1}}\n'
               b'{"id": 8}\n'
               b'{"id": 9, "text": "parliament passed the vote"}\n')


def read(path, data: bytes, fmt: str, columns: Columns):
    path.write_bytes(data)
    part = Partition(0, FileInfo(str(path), len(data), "v", fmt, None), 0, len(data))
    return list(read_partition(part, columns))


@pytest.mark.parametrize("fmt,data", [("csv", MESSY_CSV), ("jsonl", MESSY_JSONL)])
def test_reading_for_prediction_keeps_every_row_in_order_with_its_status(tmp_path, fmt, data):
    cols = Columns(text=("text",), keep=("id",), all_rows=True)
    (chunk,) = read(tmp_path / f"in.{fmt}", data, fmt, cols)
    t = chunk.table
    assert chunk.rows_read == t.num_rows == 9
    status = t["status"].to_pylist()
    if fmt == "csv":
        assert status == MESSY_STATUS
        assert t["keep:id"].to_pylist() == ["1", "2", None, "4", "5", None, "7", "8", "9"]
    else:
        assert status == ["ok", "empty_text", "malformed", "ok", "undecodable", "malformed", "ok",
                          "empty_text", "ok"]
        assert t["keep:id"].to_pylist() == ["1", "2", None, "4", "5", None, "7", "8", "9"]
    assert sum(chunk.skipped.values()) == sum(s != "ok" for s in status)
    # training still drops and counts the same rows
    (train,) = read(tmp_path / f"train.{fmt}", data, fmt, Columns(text=("text",)))
    assert train.table.num_rows == status.count("ok")
    assert train.rows_read == 9 and sum(train.skipped.values()) == 9 - status.count("ok")


def test_reading_fasttext_lines_for_prediction_keeps_undecodable_and_empty_lines_in_place(tmp_path):
    data = b"__label__a the match\n\n__label__b caf\xe9\n__label__c   \nplain words\n"
    (chunk,) = read(tmp_path / "in.ft", data, "fasttext", Columns(text=("text",), all_rows=True))
    # the blank line is a row too: prediction's output lines up with the input's lines
    assert chunk.table["status"].to_pylist() == ["ok", "empty_text", "undecodable", "empty_text", "ok"]
    assert chunk.table["text"].to_pylist()[::4] == ["the match", "plain words"]


def run_predict(trained_run, tmp_path, data: bytes, name: str, output: str, *extra):
    src = tmp_path / name
    src.write_bytes(data)
    return cli("predict", trained_run.run, "--input", src, "--output", tmp_path / output, "--json-log",
               tmp_path / "log.jsonl", "--workers", "1", "--memory-budget", "2GiB", *extra, cwd=tmp_path)


def test_cli_predict_on_messy_csv_writes_every_row_in_order_with_ids_status_and_counts(trained_run, tmp_path):
    p = run_predict(trained_run, tmp_path, MESSY_CSV, "messy.csv", "out.csv", "--keep", "id")
    assert p.returncode == 0, p.stdout + p.stderr
    out = pd.read_csv(tmp_path / "out.csv", dtype={"id": "string"})
    assert list(out.columns) == ["id", "status", "predicted", "probability"]
    assert out["status"].tolist() == MESSY_STATUS
    assert out["id"].tolist()[:2] == ["1", "2"] and out["id"].tolist()[3:5] == ["4", "5"]
    ok = out["status"] == "ok"
    assert out.loc[ok, "predicted"].isin(trained_run.metrics["labels"]).all()
    assert out.loc[~ok, "predicted"].isna().all() and out.loc[~ok, "probability"].isna().all()
    # the same answers as the Python API gives for those texts
    texts = ["the match ended with a late goal", "shares fell after the report", "the new phone has a chip",
             "parliament passed the vote"]
    assert out.loc[ok, "predicted"].tolist() == [x["label"] for x in Predictor(trained_run.run).predict(texts)]
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    done = next(e for e in log if e["event"] == "predicted")
    assert done["rows_read"] == done["rows_written"] == 9 and done["predicted"] == 4
    assert done["not_predicted"] == {"empty_text": 2, "malformed": 2, "undecodable": 1}
    assert "9 rows" in p.stderr and "4 predicted" in p.stderr and "2 malformed" in p.stderr


def test_cli_predict_writes_one_row_per_csv_row_when_quoted_line_ends_span_the_partition_cuts(trained_run, tmp_path):
    # texts of several lines, quoted, in a file cut into 1 KiB partitions: a cut at the first newline
    # past an offset would split rows in two and invent rows from their second lines
    rows = [(i, f'line one of {i}, "quoted"\nline two\n\nand {"more " * (i % 7)}') for i in range(1, 301)]
    data = "id,text\n" + "".join(f'{i},"{t.replace(chr(34), chr(34) * 2)}"\n' for i, t in rows)
    p = run_predict(trained_run, tmp_path, data.encode(), "multi.csv", "out.csv", "--keep", "id", "--blocksize", "1KiB")
    assert p.returncode == 0, p.stdout + p.stderr
    out = pd.read_csv(tmp_path / "out.csv", dtype={"id": "string"})
    assert len(pd.read_csv(tmp_path / "multi.csv")) == 300
    assert out["id"].tolist() == [str(i) for i in range(1, 301)]
    assert (out["status"] == "ok").all()


def test_cli_predict_keep_all_and_top_k_write_parquet_with_ranked_labels(trained_run, tmp_path):
    p = run_predict(trained_run, tmp_path, MESSY_JSONL, "messy.jsonl", "out.parquet", "--keep", "all",
                    "--top-k", "3")
    assert p.returncode == 0, p.stdout + p.stderr
    t = pq.read_table(tmp_path / "out.parquet")
    assert t.column_names[:3] == ["id", "text", "extra"]
    assert t.column_names[3:] == ["status", "predicted", "probability", "label_1", "probability_1",
                                  "label_2", "probability_2", "label_3", "probability_3"]
    assert t.num_rows == 9 and t["id"].to_pylist()[8] == "9"
    rows = t.to_pylist()
    for r in rows:
        if r["status"] == "ok":
            assert r["predicted"] == r["label_1"] and len({r["label_1"], r["label_2"], r["label_3"]}) == 3
            assert r["probability_1"] >= r["probability_2"] >= r["probability_3"] > 0
        else:
            assert r["label_1"] is None and r["probability_3"] is None


@pytest.mark.parametrize("output,opener", [("out.jsonl.gz", gzip.open), ("out.tsv.bz2", bz2.open)])
def test_cli_predict_output_format_and_compression_follow_the_name(trained_run, tmp_path, output, opener):
    p = run_predict(trained_run, tmp_path, MESSY_CSV, "messy.csv", output)
    assert p.returncode == 0, p.stdout + p.stderr
    with opener(tmp_path / output, "rt") as f:
        lines = f.read().splitlines()
    if output.endswith(".jsonl.gz"):
        assert [json.loads(x)["status"] for x in lines] == MESSY_STATUS
    else:
        rows = list(csv.reader(lines, delimiter="\t"))
        assert rows[0] == ["text", "status", "predicted", "probability"]
        assert [r[1] for r in rows[1:]] == MESSY_STATUS


@pytest.mark.parametrize("args,needles", [
    (["--keep", "id,nope"], ["nope", "'id', 'text', 'status'"]),
    (["--keep", "status"], ["status", "prediction column"]),
    (["--top-k", "0"], ["--top-k"]),
])
def test_cli_predict_refuses_a_bad_keep_or_top_k_with_exit_2(trained_run, tmp_path, args, needles):
    p = run_predict(trained_run, tmp_path, MESSY_CSV.replace(b"source", b"status"), "messy.csv", "out.csv", *args)
    assert_user_error(p, *needles)
    assert not (tmp_path / "out.csv").exists()


def test_cli_predict_refuses_an_output_name_without_a_format(trained_run, tmp_path):
    p = run_predict(trained_run, tmp_path, MESSY_CSV, "messy.csv", "out.xlsx")
    assert_user_error(p, "out.xlsx", ".parquet")


def test_predictor_gives_one_row_per_row_for_lists_series_dataframes_and_arrow(trained_run):
    pred = Predictor(trained_run.run)
    texts = ["the match ended", None, "shares fell", "", "a new phone"]
    expected = ["ok", "empty_text", "ok", "empty_text", "ok"]
    for data in (texts, pd.Series(texts), np.array(texts, dtype=object), pa.array(texts),
                 pa.table({"text": texts}), pd.DataFrame({"text": texts})):
        got = pred.predict(data)
        assert [g["status"] for g in got] == expected, type(data)
    df = pd.DataFrame({"id": [10, 11, 12, 13, 14], "body": texts, "score": [1.5] * 5})
    out = pred.predict_table(df, text_column="body")
    assert isinstance(out, pd.DataFrame) and len(out) == 5
    assert list(out.columns) == ["id", "body", "score", "status", "predicted", "probability"]
    assert out["id"].tolist() == [10, 11, 12, 13, 14] and out["status"].tolist() == expected
    assert out["predicted"].isna().tolist() == [s != "ok" for s in expected]
    arrow = pred.predict_table(pa.table({"id": [1, 2], "text": ["a goal", ""]}), keep=["id"])
    assert arrow.column_names == ["id", "status", "predicted", "probability"]
    assert arrow["id"].type == pa.int64()


def test_predictor_on_a_dataframe_without_its_text_column_is_a_clear_error(trained_run):
    from lancetnic_flow.errors import UserError

    with pytest.raises(UserError, match="no text column 'text'.*a, b"):
        Predictor(trained_run.run).predict(pd.DataFrame({"a": ["x"] * 10, "b": ["y"] * 10}))
    with pytest.raises(UserError, match="sequence of texts"):
        Predictor(trained_run.run).predict("one string")


def test_in_memory_rows_keep_numbers_as_text_and_missing_values_as_empty_text():
    t = input_rows([12, 2.25, None, float("nan"), "xy", "x"]).table
    assert t["text"].to_pylist() == ["12", "2.25", "", "", "xy", "x"]
    # "x" holds no token (two word characters in a row): empty_text, as in training
    assert t["status"].to_pylist() == ["ok", "ok", "empty_text", "empty_text", "ok", "empty_text"]


def test_cli_predict_writes_rows_in_the_order_the_inputs_are_named_and_refuses_nothing_to_predict(trained_run,
                                                                                                   tmp_path):
    # --input b.csv a.csv wrote a's rows first (files were sorted); a header-only input left a 0-byte
    # out.parquet that no reader opens, with exit 0
    (tmp_path / "b.csv").write_text("id,text\nb0,the match ended\nb1,a late goal\n")
    (tmp_path / "a.csv").write_text("id,text\na0,shares fell\n")
    p = cli("predict", trained_run.run, "--input", tmp_path / "b.csv", tmp_path / "a.csv", "--keep", "id",
            "--output", tmp_path / "out.csv", "--workers", "1", "--memory-budget", "2GiB", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert pd.read_csv(tmp_path / "out.csv")["id"].tolist() == ["b0", "b1", "a0"]
    (tmp_path / "head.csv").write_text("id,text\n")
    p = run_predict(trained_run, tmp_path, b"id,text\n", "head.csv", "out.parquet", "--keep", "id")
    assert_user_error(p, "no rows to predict", "head.csv")
    assert not (tmp_path / "out.parquet").exists()
