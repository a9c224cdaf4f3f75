"""Unit tests of lancetnic_flow.data.synth: what make-data refuses before writing."""
from __future__ import annotations

import pytest

from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.errors import UserError


@pytest.mark.parametrize("name", ["corpus.txt", "corpus.txt.gz"])
def test_multilabel_to_plain_text_is_refused_not_written_without_labels(tmp_path, name):
    out = tmp_path / name
    with pytest.raises(UserError) as e:
        write_corpus(str(out), 5, multilabel=True)
    assert not out.exists()
    message, hint = e.value.said("cli")
    assert message.startswith("--multilabel: ") and "no label" in message
    assert ".csv" in hint and ".ft" in hint and "drop --multilabel" in hint
    assert e.value.said("workflow")[0].startswith("make_data.multilabel: ")


def test_multilabel_to_an_explicit_text_format_is_refused(tmp_path):
    with pytest.raises(UserError, match="plain text"):
        write_corpus(str(tmp_path / "corpus.data"), 5, multilabel=True, format="txt")


@pytest.mark.parametrize("name, tags", [("corpus.ft", "__label__"), ("corpus.csv", "|"), ("corpus.jsonl", "[")])
def test_multilabel_formats_with_a_label_write_the_label_sets(tmp_path, name, tags):
    out = tmp_path / name
    write_corpus(str(out), 50, multilabel=True)
    assert tags in out.read_text()


def test_plain_text_without_multilabel_is_still_written(tmp_path):
    info = write_corpus(str(tmp_path / "corpus.txt"), 5)
    assert info["format"] == "text" and len((tmp_path / "corpus.txt").read_text().splitlines()) == 5


def test_storage_options_for_a_local_path_are_refused_as_make_data_refuses_them(tmp_path):
    out = tmp_path / "corpus.csv"
    with pytest.raises(UserError, match="storage_options anon opens remote storage"):
        write_corpus(str(out), 5, storage_options={"anon": True})
    assert not out.exists()
    write_corpus("memory://lancetnic-synth-test/corpus.csv", 5, storage_options={"skip_instance_cache": True})


@pytest.mark.parametrize("kw, said", [({"seed": -1}, "--seed must be a whole number >= 0, got -1"),
                                      ({"rows": -5}, "--rows must be a whole number >= 0, got -5"),
                                      ({"classes": 0}, "--classes must be a whole number >= 1, got 0")])
def test_a_refused_value_names_the_flag_on_the_command_line_and_the_argument_in_python(tmp_path, kw, said):
    # make-data --seed -1 said "seed must be a whole number >= 0": an argument name, not the flag typed
    with pytest.raises(UserError) as e:
        write_corpus(str(tmp_path / "c.csv"), kw.pop("rows", 10), **kw)
    assert e.value.said("cli")[0] == said and e.value.message == said.removeprefix("--")


def test_a_pipe_whose_reader_stops_early_is_said_as_the_rest_not_written(tmp_path):
    # `make-data rows.csv` into a named pipe read by `head` was "internal error: BrokenPipeError", exit 1
    import os
    import select
    import threading

    from lancetnic_flow.storage import WriteError

    path = str(tmp_path / "rows.csv")
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)

    def head() -> None:   # the reader takes the first bytes, then closes, as `head -1` does
        select.select([reader], [], [], 10)
        os.read(reader, 4096)
        os.close(reader)

    stop = threading.Thread(target=head)
    stop.start()
    try:
        with pytest.raises(WriteError, match="reader closed it before everything was written"):
            write_corpus(path, 20_000, chunk_rows=2_000)
    finally:
        stop.join(timeout=10)


@pytest.mark.parametrize("delimiter, sep", [(";", ";"), ("|", "|"), ("tab", "\t")])
@pytest.mark.parametrize("multilabel", [False, True])
def test_a_delimiter_writes_a_csv_corpus_that_reads_back_under_the_same_delimiter(tmp_path, delimiter, sep, multilabel):
    """make-data had no --delimiter: a ';' corpus for a test or a demo had to be converted by hand."""
    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import Columns, plan_source

    comma, semi = tmp_path / "comma.csv", tmp_path / "semi.csv"
    write_corpus(str(comma), 300, multilabel=multilabel)
    info = write_corpus(str(semi), 300, multilabel=multilabel, delimiter=delimiter)
    assert info["delimiter"] == sep and semi.read_text().startswith(sep.join(["text", "label", "value", "target"]))

    def rows(path, sep=None):
        cols = Columns(text=("text",), label="label", target="target", multilabel=multilabel,
                       label_sep="|" if multilabel else None, delimiter=sep)
        return [row for p in plan_source([str(path)], blocksize=4096).partitions
                for c in read_partition(p, cols) for row in c.table.to_pylist()]

    got = rows(semi, sep)
    assert len(got) == 300 and got == rows(comma)


@pytest.mark.parametrize("name", ["corpus.tsv", "corpus.jsonl", "corpus.parquet", "corpus.txt"])
def test_a_delimiter_for_a_format_without_csv_fields_is_refused_not_ignored(tmp_path, name):
    with pytest.raises(UserError) as e:
        write_corpus(str(tmp_path / name), 5, delimiter=";")
    assert not (tmp_path / name).exists()
    message, hint = e.value.said("cli")
    assert message.startswith("--delimiter ';' splits a CSV file's fields") and "drop --delimiter" in hint
    assert e.value.said("workflow")[0].startswith("make_data.delimiter ';'")
