"""runs/outputs.py: a prediction output written table by table keeps the
first table's columns: later rows lacking some are written empty there, rows
with columns a CSV header or Parquet schema has not named stop the run in
words, and JSON Lines lines carry their new keys."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from lancetnic_flow.errors import UserError
from lancetnic_flow.runs.outputs import OutputFile


def test_later_rows_without_a_kept_column_are_written_empty_there(tmp_path):
    out = tmp_path / "p.jsonl"
    with OutputFile(str(out)) as f:
        f.write(pa.table({"text": ["a b"], "meta": ["x"], "predicted": ["s"]}))
        f.write(pa.table({"text": ["c d"], "predicted": ["t"]}))   # a partition whose objects lack "meta"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows == [{"text": "a b", "meta": "x", "predicted": "s"}, {"text": "c d", "meta": None, "predicted": "t"}]


def test_later_rows_with_a_column_the_output_lacks_are_refused_naming_it(tmp_path):
    with pytest.raises(UserError, match=r"later input rows have columns the first rows written lack \(meta") as e:
        with OutputFile(str(tmp_path / "p.csv")) as f:
            f.write(pa.table({"text": ["a b"], "predicted": ["s"]}))
            f.write(pa.table({"text": ["c d"], "meta": ["x"], "predicted": ["t"]}))
    assert "--keep" in e.value.hint
    assert not (tmp_path / "p.csv").exists()   # no half file under the real name


def test_later_json_lines_rows_with_a_new_column_keep_it(tmp_path):
    out = tmp_path / "p.jsonl.gz"
    with OutputFile(str(out)) as f:
        f.write(pa.table({"text": ["a b"], "predicted": ["s"]}))
        f.write(pa.table({"text": ["c d"], "meta": ["x"], "predicted": ["t"]}))   # objects that first name "meta"
        f.write(pa.table({"text": ["e f"], "predicted": ["u"]}))
    import gzip
    rows = [json.loads(line) for line in gzip.decompress(out.read_bytes()).decode().splitlines()]
    assert rows == [{"text": "a b", "predicted": "s"}, {"text": "c d", "predicted": "t", "meta": "x"},
                    {"text": "e f", "predicted": "u", "meta": None}]


def test_an_output_that_is_an_input_file_is_refused_before_it_replaces_the_data(tmp_path, monkeypatch):
    from lancetnic_flow.data.sources import plan_source
    from lancetnic_flow.runs.outputs import refuse_output_over_input

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("text,label\nhello there,pos\n")
    files = plan_source([str(tmp_path / "in")]).files
    monkeypatch.chdir(tmp_path)
    for same in (str(tmp_path / "in" / "a.csv"), "in/a.csv", "./in//a.csv", f"file://{tmp_path}/in/a.csv"):
        with pytest.raises(UserError, match="is an --input file"):
            refuse_output_over_input(same, files, {})
    refuse_output_over_input("in/a.preds.csv", files, {})
    refuse_output_over_input(str(tmp_path / "a.csv"), files, {})
    (tmp_path / "link.csv").symlink_to(tmp_path / "in" / "a.csv")
    with pytest.raises(UserError, match="is an --input file"):
        refuse_output_over_input("link.csv", files, {})
