"""A resume refused for another cache key names what changed, from the parts its checkpoint kept."""
from __future__ import annotations

import copy

from lancetnic_flow.data.sources import Columns, FileInfo, SourcePlan
from lancetnic_flow.dataflow.manifest import key_parts
from lancetnic_flow.options import said
from lancetnic_flow.training.key_change import key_changes


def _parts(files=(("file:///d/train.csv", 100, "mtime=1", "csv", ""),), options=None, val=None, fraction=0.1):
    plan = SourcePlan(files=[FileInfo(*f[:4], f[4] or None) for f in files], partitions=[])
    val_plan = SourcePlan(files=[FileInfo(*val, None)], partitions=[]) if val else None
    return key_parts(plan, val_plan, options or {"mode": "tfidf", "min_df": 2}, Columns(text=("text",), label="label"),
                     fraction)


def test_the_same_parts_name_no_change():
    assert key_changes(_parts(), _parts()) == []


def test_a_changed_option_is_named_with_its_old_and_new_value_as_the_command_line_spells_it():
    changes = key_changes(_parts(options={"mode": "tfidf", "min_df": 2}), _parts(options={"mode": "tfidf", "min_df": 3}))
    assert [said(c, "cli") for c in changes] == ["--min-df was 2, now 3"]


def test_a_long_option_value_is_said_to_have_changed_without_its_values():
    words = {"mode": "tfidf", "stop_words": [f"word{i}" for i in range(20)]}
    fewer = {"mode": "tfidf", "stop_words": [f"word{i}" for i in range(19)]}
    assert [said(c, "cli") for c in key_changes(_parts(options=words), _parts(options=fewer))] == ["--stop-words changed"]


def test_an_input_file_that_grew_was_touched_left_or_came_is_named():
    before = _parts()
    assert key_changes(before, _parts(files=[("file:///d/train.csv", 120, "mtime=2", "csv", "")])) == [
        "/d/train.csv's content changed (100 bytes, now 120)"]
    assert key_changes(before, _parts(files=[("file:///d/train.csv", 100, "mtime=2", "csv", "")])) == [
        "/d/train.csv was changed (the same size; its modification time or version differs)"]
    assert key_changes(before, _parts(files=[("file:///e/train.csv", 100, "mtime=1", "csv", "")])) == [
        "/d/train.csv is no longer among the training inputs", "/e/train.csv is a new training input"]
    assert key_changes(before, _parts(val=("file:///d/val.csv", 10, "mtime=1", "csv"), fraction=0.0))[:2] == [
        "a {data.val} source was added", "the share held out for validation was 0.1, now 0.0"]


def test_a_file_read_as_another_format_is_named_with_both():
    changes = key_changes(_parts(), _parts(files=[("file:///d/train.csv", 100, "mtime=1", "tsv", "")]))
    assert changes[0] == "/d/train.csv is read as tsv, was csv"


def test_a_reader_revised_since_is_named_with_what_its_latest_revision_reads_otherwise():
    ft = (("file:///d/train.ft", 100, "mtime=1", "fasttext", ""),)
    before, now = _parts(files=ft), _parts(files=ft)
    before["revisions"]["fasttext"] = now["revisions"]["fasttext"] - 1
    assert key_changes(before, now) == ["the fastText reader was revised since (a line of lone \\r line ends is "
                                        "now refused wherever the file is cut)"]
    older = copy.deepcopy(before)
    older["revisions"]["fasttext"] -= 1   # more than one revision ago: no one reason to name
    assert key_changes(older, now) == ["the fastText reader was revised since"]


def test_another_reading_revised_since_is_named():
    before, now = _parts(), _parts()
    before["revisions"]["lower"] = 0.5
    assert key_changes(before, now) == ["lower-casing was revised since"]


def test_a_tokenizers_code_and_its_depends_on_files_are_named_apart(tmp_path):
    from lancetnic_flow.tokenizers import canonical, register_tokenizer

    stop = tmp_path / "stop.txt"
    stop.write_text("the\nof\n")

    def words_but_stop(t):
        return [w for w in t.split() if w not in set(open(stop).read().split())]

    register_tokenizer("key-change-listed", words_but_stop, depends_on=stop)
    options = {"mode": "hashing", "tokenizer": str(canonical("key-change-listed"))}
    before = _parts(options=options)
    stop.write_text("the\nof\nand\n")
    assert key_changes(before, _parts(options=options)) == ["the files tokenizer key-change-listed depends on changed"]

    def words_but_stop(t):   # noqa: F811 - the same name, other code
        return [w for w in t.lower().split() if w not in set(open(stop).read().split())]

    register_tokenizer("key-change-listed", words_but_stop, depends_on=stop)
    assert key_changes(_parts(options=options), before)[0] == "tokenizer key-change-listed's code changed"


def test_a_continued_run_whose_old_run_changed_since_is_named_as_such():
    before = _parts(options={"mode": "hashing", "init_from": "a" * 16, "labels_as_run": 1})
    now = _parts(options={"mode": "hashing", "init_from": "b" * 16, "labels_as_run": 1})
    assert [said(c, "cli") for c in key_changes(before, now)] == [
        "the run it continues (--init-from) changed since: trained again, or replaced"]
