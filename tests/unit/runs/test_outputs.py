"""runs/outputs.py: a prediction output written table by table keeps the
first table's columns: later rows lacking some are written empty there, rows
with columns a CSV header or Parquet schema has not named stop the run in
words, and JSON Lines lines carry their new keys."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from lancetnic_flow.errors import UserError
from lancetnic_flow.runs.outputs import BytesAfterText, OutputFile


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


def test_an_output_that_is_an_input_or_a_runs_own_file_is_refused_and_left_whole(tmp_path):
    # predict --input x.csv --output x.csv replaced the rows with predictions; --output RUN/model.json
    # (JSON is written as JSON Lines) left that run "damaged"
    import os
    from types import SimpleNamespace

    import pytest

    from lancetnic_flow.data.sources import Columns
    from lancetnic_flow.errors import UserError
    from lancetnic_flow.runs.outputs import check_output_place
    from lancetnic_flow.runs.predict import predict_files

    data = tmp_path / "data.csv"
    data.write_text("text,label\nhello there,a\n")
    os.symlink(data, tmp_path / "link.csv")
    run = tmp_path / "run"
    run.mkdir()
    (run / "model.json").write_text("{}")
    (run / "config.json").write_text("{}")
    spellings = [str(data), f"file://{data}", str(tmp_path / "link.csv"), f"{tmp_path}/./run/../data.csv"]
    for same in spellings:
        with pytest.raises(UserError, match="is the input"):
            check_output_place(same, {}, [f"file://{data}"])
    for own in ("model.json", "config.json", "metrics.json", "history.csv", "per_class.csv"):
        with pytest.raises(UserError, match="file of the run folder"):
            check_output_place(str(run / own), {}, [str(data)])
    for fine in (run / "predictions.csv", tmp_path / "data-predicted.csv", tmp_path / "model.json"):
        check_output_place(str(fine), {}, [str(data)])
    # any file the run folder holds, not only the named ones: its weights, its bucket names
    for own in ("bucket_names.json", "model.safetensors"):
        (run / own).write_text("kept")
        with pytest.raises(UserError, match=f"--onnx .*{own} is a file of the run folder"):
            check_output_place(str(run / own), {}, [], flag="--onnx")
    plan = SimpleNamespace(files=[SimpleNamespace(url=f"file://{data}")], partitions=[])
    with pytest.raises(UserError, match="is the input"):   # the Python API's way, before any task
        predict_files(None, str(run), plan, Columns(text=("text",)), str(data), storage_options={},
                      run_options={}, chunk_bytes=1 << 20, window=2)
    assert data.read_text() == "text,label\nhello there,a\n"


def test_plots_into_any_run_folder_are_refused_and_a_folder_of_their_own_is_written(tmp_path):
    # evaluate RUN DATA --plots OTHER_RUN replaced OTHER_RUN's per_class.csv and charts with RUN's
    # evaluation; only RUN itself was refused
    from lancetnic_flow.runs.outputs import check_plots_place

    run, other = tmp_path / "run", tmp_path / "other"
    for d in (run, other):
        d.mkdir()
        (d / "config.json").write_text("{}")
    (other / "model.json").write_text("{}")
    with pytest.raises(UserError, match="is the run folder"):
        check_plots_place(f"{run}/", {}, str(run))
    with pytest.raises(UserError, match="is a run folder"):
        check_plots_place(str(other), {}, str(run))
    check_plots_place(str(tmp_path / "run-evaluated"), {}, str(run))
    check_plots_place(str(tmp_path), {}, str(run))


@pytest.mark.parametrize("scheme", ["local", "memory"])
def test_plots_into_a_folder_holding_an_earlier_evaluation_are_refused_naming_force(tmp_path, scheme):
    # evaluate --plots DIR replaced the per_class.csv and charts of an earlier evaluation without a word
    from lancetnic_flow.runs.outputs import refuse_earlier_plots
    from lancetnic_flow.storage import write_bytes

    folder = str(tmp_path / "plots") if scheme == "local" else "memory://earlier-plots/plots"
    refuse_earlier_plots(folder, {})   # not there yet
    write_bytes(f"{folder}/notes.txt", b"mine", {})
    refuse_earlier_plots(folder, {})   # the user's own files are not an evaluation's
    write_bytes(f"{folder}/per_class.csv", b"class,precision\n", {})
    with pytest.raises(UserError, match=r"--plots .*plots already holds an evaluation's per_class.csv; evaluate "
                                        "does not replace them unless asked") as e:
        refuse_earlier_plots(folder, {})
    assert "--force" in e.value.hint


def test_an_output_that_is_an_input_file_is_refused_before_it_replaces_the_data(tmp_path, monkeypatch):
    from lancetnic_flow.data.sources import plan_source
    from lancetnic_flow.runs.outputs import check_output_place

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("text,label\nhello there,pos\n")
    files = [f.url for f in plan_source([str(tmp_path / "in")]).files]
    monkeypatch.chdir(tmp_path)
    for same in (str(tmp_path / "in" / "a.csv"), "in/a.csv", "./in//a.csv", f"file://{tmp_path}/in/a.csv"):
        with pytest.raises(UserError, match="is the input"):
            check_output_place(same, {}, files)
    check_output_place("in/a.preds.csv", {}, files)
    check_output_place(str(tmp_path / "a.csv"), {}, files)
    (tmp_path / "link.csv").symlink_to(tmp_path / "in" / "a.csv")
    with pytest.raises(UserError, match="is the input"):
        check_output_place("link.csv", {}, files)


def test_a_multilabel_runs_label_holding_the_list_separator_refuses_a_csv_or_tsv_output_and_takes_a_list_format():
    # CSV and TSV join a row's predicted labels by "|": "sports|outdoor" and "tech" would read back as three
    from lancetnic_flow.runs.outputs import check_label_sets_written_whole

    labels = ["sports|outdoor", "tech"]
    for url in ("p.csv", "p.tsv", "s3://b/p.csv.gz"):
        with pytest.raises(UserError, match=r"(?s)'sports\|outdoor'.*\.jsonl") as err:
            check_label_sets_written_whole(url, labels)
        assert url in str(err.value)
    for url in ("p.jsonl", "p.parquet", "p.arrow"):
        check_label_sets_written_whole(url, labels)
    check_label_sets_written_whole("p.csv", ["sports", "tech"])


@pytest.mark.parametrize("name", ["p.parquet", "p.arrow"])
def test_a_kept_column_of_bytes_is_written_as_bytes_by_the_formats_that_hold_them(tmp_path, name):
    # bytes that are not UTF-8 were written as U+FFFD: b"\xff\x01" and b"\xfe\x01" read back as one id
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    ids = pa.array([b"\xff\x01", b"\xfe\x01", b"ok", None], pa.binary())
    with OutputFile(str(tmp_path / name)) as f:
        f.write(pa.table({"id": ids, "predicted": ["a", "b", "a", "b"]}))
        f.write(pa.table({"id": pa.array([b"\xfd"], pa.binary()), "predicted": ["a"]}))
    back = (pq.read_table if name.endswith("parquet") else feather.read_table)(str(tmp_path / name))
    assert back.column("id").to_pylist() == [b"\xff\x01", b"\xfe\x01", b"ok", None, b"\xfd"]


@pytest.mark.parametrize("name", ["p.parquet", "p.arrow"])
def test_a_kept_text_column_meeting_bytes_in_a_later_table_asks_to_be_written_as_bytes_from_the_first(tmp_path, name):
    # the first table wrote "id" as text, a later block of the file held b"\xff1": exit 2 at a small
    # --blocksize, a file of bytes at a large one (one table held both)
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    tables = [pa.table({"id": ["a1", None], "predicted": ["a", "b"]}),
              pa.table({"id": pa.array([b"\xff1", b"b"], pa.binary()), "predicted": ["a", "b"]})]
    with pytest.raises(BytesAfterText) as e:
        with OutputFile(str(tmp_path / name)) as f:
            for t in tables:
                f.write(t)
    assert e.value.names == ["id"] and not (tmp_path / name).exists()
    with OutputFile(str(tmp_path / name), as_bytes=e.value.names) as f:
        for t in tables:
            f.write(t)
    back = (pq.read_table if name.endswith("parquet") else feather.read_table)(str(tmp_path / name))
    assert back.schema.field("id").type == pa.binary() and back.schema.field("predicted").type == pa.string()
    assert back.column("id").to_pylist() == [b"a1", None, b"\xff1", b"b"]


def test_a_kept_text_column_meeting_bytes_later_in_a_pipe_is_refused_as_its_reader_has_the_first_rows(
        tmp_path, monkeypatch):
    from lancetnic_flow.runs import outputs

    monkeypatch.setattr(outputs, "special_kind", lambda url: "named pipe")
    with pytest.raises(UserError, match="the kept column 'id' holds bytes .* went to the named pipe as text"):
        with OutputFile(str(tmp_path / "p.parquet")) as f:
            f.write(pa.table({"id": ["a1"]}))
            f.write(pa.table({"id": pa.array([b"\xff1"], pa.binary())}))


@pytest.mark.parametrize("name", ["p.csv", "p.tsv", "p.jsonl", "p.csv.gz"])
def test_a_text_format_writes_kept_utf8_bytes_as_text_and_refuses_others_naming_parquet(tmp_path, name):
    with OutputFile(str(tmp_path / name)) as f:
        f.write(pa.table({"id": pa.array([b"caf\xc3\xa9", None], pa.binary()), "predicted": ["a", "b"]}))
    import pandas as pd

    read = pd.read_json(tmp_path / name, lines=True) if "jsonl" in name else \
        pd.read_csv(tmp_path / name, sep="\t" if "tsv" in name else ",")
    assert read["id"].tolist()[0] == "café"
    with pytest.raises(UserError, match=r"the kept column 'id' holds bytes that are not UTF-8 \(b'\\xff\\x01'\)") as e:
        with OutputFile(str(tmp_path / ("bad-" + name))) as f:
            f.write(pa.table({"id": pa.array([b"ok"], pa.binary()), "predicted": ["a"]}))
            f.write(pa.table({"id": pa.array([b"\xff\x01"], pa.binary()), "predicted": ["a"]}))
    assert "bad-p.parquet (or .arrow)" in e.value.hint
    assert not (tmp_path / ("bad-" + name)).exists()   # no half file under the real name


@pytest.mark.parametrize("name", ["p.csv", "p.parquet", "p.jsonl"])
def test_input_columns_decided_ahead_give_the_same_output_however_the_rows_are_cut_into_tables(tmp_path, name):
    # predict --keep all on JSON Lines whose later objects add a key: exit 2 when the first table lacked it
    # (a small --blocksize), a file when one table held both kinds of rows (a large one)
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    def row(i, extra=None):
        return {"id": [str(i)], "text": ["a b"], **({"extra": [extra]} if extra else {}), "status": ["ok"]}

    cuts = [[row(1), row(2, "x")], [pa.concat_tables([pa.table(row(1)), pa.table(row(2, "x"))], promote_options="default")]]
    got = []
    for tables in cuts:
        out = tmp_path / name
        with OutputFile(str(out), inputs=["id", "text", "extra"]) as f:
            for t in tables:
                f.write(pa.table(t) if isinstance(t, dict) else t)
        read = {"p.csv": lambda p: pcsv.read_csv(p), "p.parquet": pq.read_table}.get(name)
        got.append(read(str(out)).to_pylist() if read else [json.loads(x) for x in out.read_text().splitlines()])
    assert got[0] == got[1] and [r["extra"] or None for r in got[0]] == [None, "x"]   # CSV: empty


def test_a_key_past_the_columns_decided_ahead_is_refused_in_any_table_by_formats_that_name_columns_once(tmp_path):
    table = pa.table({"id": ["1"], "text": ["a b"], "extra": ["x"], "status": ["ok"]})
    for first in ([], [pa.table({"id": ["0"], "text": ["c"], "status": ["ok"]})]):   # a later table, or the first
        with pytest.raises(UserError, match=r"keys past those of the input's first rows \(extra; .* first 1 MiB"):
            with OutputFile(str(tmp_path / "p.csv"), inputs=["id", "text"]) as f:
                for t in [*first, table]:
                    f.write(t)
    with OutputFile(str(tmp_path / "p.jsonl"), inputs=["id", "text"]) as f:   # each line names its own keys
        f.write(table)
    assert json.loads((tmp_path / "p.jsonl").read_text())["extra"] == "x"


def test_output_dash_is_refused_as_stdout_naming_a_file_or_a_pipe_not_as_a_name_without_a_format():
    # `--output -` said "cannot tell the format from the name", as if a rename would do
    import pytest

    from lancetnic_flow.errors import UserError
    from lancetnic_flow.runs.outputs import output_format

    with pytest.raises(UserError, match="written to a file, not to stdout") as e:
        output_format("-")
    assert "--output predictions.csv" in e.value.hint and "mkfifo" in e.value.hint


@pytest.mark.parametrize("delimiter", [";", "|", "\t", None])
def test_a_csv_output_is_written_with_the_inputs_delimiter_and_reads_back_with_it_row_for_row(tmp_path, delimiter):
    # `predict --delimiter ';' --output p.csv` wrote commas: the file read back with the options its input
    # was read with was one column per row
    import pyarrow as pa

    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import Columns, plan_source
    from lancetnic_flow.runs.outputs import OutputFile

    texts = ['a late; goal "quoted"\nand a line', "the market | fell\tthere", "plain, with a comma", ""]
    table = pa.table({"id": ["1", "2;3", "4", "5"], "text": texts, "status": ["ok"] * 4,
                      "predicted": ["sports", "biz", None, "sports"]})
    out = tmp_path / "p.csv"
    with OutputFile(str(out), delimiter=delimiter) as f:
        f.write(table.slice(0, 2))
        f.write(table.slice(2))
    header = out.read_text().splitlines()[0]
    assert header == (delimiter or ",").join(["id", "text", "status", "predicted"])
    columns = Columns(text=("text",), keep=("id", "status", "predicted"), all_rows=True, delimiter=delimiter)
    plan = plan_source([str(out)])
    back = pa.concat_tables([c.table for p in plan.partitions for c in read_partition(p, columns)])
    assert back.column("text").to_pylist() == texts and back.column("keep:id").to_pylist() == ["1", "2;3", "4", "5"]
    assert back.column("keep:predicted").to_pylist()[:2] == ["sports", "biz"]
