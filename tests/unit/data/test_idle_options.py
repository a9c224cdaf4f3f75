"""Options the data gives nothing to do (data/idle_options.py): refused by name before any work."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lancetnic_flow.config import DataConfig, TrainConfig, TrainingConfig
from lancetnic_flow.data.checks import plan_training_sources
from lancetnic_flow.data.idle_options import refuse_idle_encoding
from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.errors import UserError


def _parquet(path, text, label):
    pq.write_table(pa.table({"text": text, "label": label}), path)
    return str(path)


def _cfg(files, task=None, **data):
    return TrainConfig(data=DataConfig(train=[str(f) for f in files], **data),
                       training=TrainingConfig(task=task) if task else TrainingConfig())


def test_an_encoding_for_parquet_and_arrow_columns_of_strings_alone_is_refused_as_changing_nothing(tmp_path):
    # --encoding latin-1 on Parquet of strings trained as without it, without a word
    strings = _parquet(tmp_path / "s.parquet", ["good words", "more words"], ["a", "b"])
    with pytest.raises(UserError, match=r"encoding latin-1: it decodes text files and Parquet/Arrow columns of "
                                        r"bytes, and the columns read \('text', 'label'\) of .*s.parquet hold strings") \
            as e:
        plan_training_sources(_cfg([strings], encoding="latin-1"), 1 << 20)
    assert e.value.cli[0].startswith("--encoding latin-1") and e.value.cli[1] == "drop --encoding"
    with pa.OSFile(str(tmp_path / "s.arrow"), "wb") as sink, \
            pa.ipc.new_file(sink, pa.schema([("text", pa.string()), ("label", pa.string())])) as w:
        w.write_table(pa.table({"text": ["x y"], "label": ["a"]}))
    with pytest.raises(UserError, match="hold strings, already text"):
        plan_training_sources(_cfg([tmp_path / "s.arrow"], encoding="cp1252"), 1 << 20)


def test_an_encoding_is_taken_where_a_file_holds_bytes_or_text_to_decode(tmp_path):
    strings = _parquet(tmp_path / "s.parquet", ["good words", "more words"], ["a", "b"])
    raw = _parquet(tmp_path / "b.parquet", pa.array([b"caf\xe9 words", b"more"], pa.binary()), ["a", "b"])
    (tmp_path / "t.csv").write_bytes(b"text,label\ncaf\xe9 words,a\nmore words,b\n")
    plan_training_sources(_cfg([raw], encoding="latin-1"), 1 << 20)
    plan_training_sources(_cfg([strings, raw], encoding="latin-1"), 1 << 20)   # one file's bytes are decoded
    plan_training_sources(_cfg([strings, tmp_path / "t.csv"], encoding="latin-1"), 1 << 20)
    plan_training_sources(_cfg([strings]), 1 << 20)   # no --encoding: nothing to refuse
    # predict's kept columns are decoded too: a kept column of bytes takes the encoding
    kept = tmp_path / "k.parquet"
    pq.write_table(pa.table({"text": ["x"], "id": pa.array([b"\xe9"], pa.binary())}), kept)
    src = plan_source([str(kept)], format="auto", storage_options={}, blocksize=1 << 20)
    refuse_idle_encoding(Columns(text=("text",), keep=("id",), encoding="latin_1"), src)
    with pytest.raises(UserError, match="would change nothing"):
        refuse_idle_encoding(Columns(text=("text",), encoding="latin_1"), src)


def test_a_label_separator_for_labels_held_as_lists_is_refused_as_splitting_nothing(tmp_path):
    # --label-sep "|" on a list-typed label column (Parquet, JSON arrays) trained as without it
    listed = _parquet(tmp_path / "l.parquet", ["good words", "more words"], [["a", "b"], ["b"]])
    (tmp_path / "l.jsonl").write_text('{"text": "good words", "label": ["a", "b"]}\n'
                                      '{"text": "more words", "label": ["b"]}\n')
    for f in (listed, tmp_path / "l.jsonl"):
        with pytest.raises(UserError, match=r"label_sep '\|' splits a label string, and .*'s label column 'label' "
                                            r"holds lists \(each item one label\)") as e:
            plan_training_sources(_cfg([f], "multilabel", label_sep="|"), 1 << 20)
        assert e.value.cli[0].startswith("--label-sep '|'") and e.value.cli[1] == "drop --label-sep"


def test_a_label_separator_is_taken_where_some_file_holds_label_strings(tmp_path):
    listed = _parquet(tmp_path / "l.parquet", ["good words", "more words"], [["a", "b"], ["b"]])
    joined = _parquet(tmp_path / "j.parquet", ["good words", "more words"], ["a|b", "b"])
    (tmp_path / "j.jsonl").write_text(json.dumps({"text": "good words", "label": "a|b"}) + "\n")
    (tmp_path / "t.csv").write_text("text,label\ngood words,a|b\n")
    for files in ([joined], [tmp_path / "j.jsonl"], [listed, joined], [listed, tmp_path / "t.csv"]):
        plan_training_sources(_cfg(files, "multilabel", label_sep="|"), 1 << 20)


def test_the_idle_option_checks_judge_from_the_heads_the_column_check_read_reading_each_file_once(
        tmp_path, monkeypatch):
    # --encoding and --label-sep read every Parquet footer again after the column check had read it
    from lancetnic_flow.data.readers import parquet

    files = [_parquet(tmp_path / f"{n}.parquet", ["good words"], ["a|b"]) for n in "ab"]
    reads: list[str] = []
    schema_of = parquet.schema_of
    monkeypatch.setattr(parquet, "schema_of", lambda url, so: reads.append(url.rsplit("/", 1)[-1]) or schema_of(url, so))
    plan_training_sources(_cfg(files, "multilabel", label_sep="|"), 1 << 20)
    assert sorted(reads) == ["a.parquet", "b.parquet"]
    reads.clear()
    with pytest.raises(UserError, match="would change nothing"):
        plan_training_sources(_cfg(files, "multilabel", label_sep="|", encoding="latin-1"), 1 << 20)
    assert sorted(reads) == ["a.parquet", "b.parquet"]


def test_a_label_separator_for_json_lines_is_judged_by_every_label_not_the_first_rows(tmp_path):
    # a file whose first label was an array and a later one "a|b" was refused: dropped, the separator would
    # have left "a|b" one label
    def jsonl(name, labels):
        (tmp_path / name).write_text("".join(json.dumps({"text": f"words {i}", "label": v}) + "\n"
                                             for i, v in enumerate(labels)))
        return tmp_path / name

    for labels in ([["a"], ["b"], "a|b"], ["a|b", ["b"]], [["a"], None, "c"]):
        plan_training_sources(_cfg([jsonl("mixed.jsonl", labels)], "multilabel", label_sep="|"), 1 << 20)
    with pytest.raises(UserError, match="holds lists"):
        plan_training_sources(_cfg([jsonl("lists.jsonl", [["a"], ["b", "c"], None, ["c"]])], "multilabel",
                                   label_sep="|"), 1 << 20)


def test_a_delimiter_where_no_input_is_read_as_csv_is_refused_and_a_csv_input_takes_it(tmp_path):
    from lancetnic_flow.data.idle_options import refuse_idle_delimiter

    (tmp_path / "a.jsonl").write_text('{"text": "goal match", "label": "a"}\n')
    (tmp_path / "b.tsv").write_text("text\tlabel\ngoal match\ta\n")
    (tmp_path / "c.csv").write_text("text;label\ngoal match;a\n")
    cols = Columns(text=("text",), label="label", delimiter=";")
    for name in ("a.jsonl", "b.tsv"):
        with pytest.raises(UserError, match="splits the fields of CSV files") as e:
            refuse_idle_delimiter(cols, plan_source([str(tmp_path / name)]))
        assert "drop --delimiter" in e.value.said("cli")[1]
    refuse_idle_delimiter(cols, plan_source([str(tmp_path / "c.csv")]), plan_source([str(tmp_path / "a.jsonl")]))
    refuse_idle_delimiter(Columns(text=("text",)), plan_source([str(tmp_path / "a.jsonl")]))
