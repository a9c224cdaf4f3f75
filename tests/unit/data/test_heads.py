"""What a file's head says its columns hold (data/heads.py)."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from lancetnic_flow.data import heads
from lancetnic_flow.data.heads import column_type, file_columns, head_schema
from lancetnic_flow.data.sources import plan_source


def _files(paths):
    src = plan_source([str(p) for p in paths], format="auto", storage_options={}, blocksize=1 << 20)
    return {f.url.rsplit("/", 1)[-1]: f for f in src.files}


def test_the_head_of_a_file_is_its_schema_its_header_of_text_or_its_first_objects_values(tmp_path):
    pq.write_table(pa.table({"text": ["x"], "label": [["a"]]}), tmp_path / "l.parquet")
    (tmp_path / "l.jsonl").write_text('{"text": "x", "label": ["a"]}\n')
    (tmp_path / "t.csv").write_text("text,label\nx,a\n")
    (tmp_path / "t.txt").write_text("__label__a x\n")
    by_name = {name: head_schema(f) for name, f in _files(tmp_path.iterdir()).items()}
    assert pa.types.is_list(column_type(by_name["l.parquet"], "label"))
    assert column_type(by_name["l.parquet"], "text") == pa.string()
    assert pa.types.is_list(column_type(by_name["l.jsonl"], "label"))
    assert by_name["t.csv"] == pa.schema([("text", pa.string()), ("label", pa.string())])
    assert by_name["t.txt"] is None and column_type(None, "label") is None
    assert column_type(by_name["t.csv"], "other") is None
    assert [file_columns(f) for f in _files([tmp_path / "t.csv"]).values()] == [["text", "label"]]


def test_a_json_lines_column_is_lists_only_where_every_object_read_holds_a_list_and_they_are_the_whole_file(
        tmp_path, monkeypatch):
    # a file whose first label was an array was taken for lists alone, and --label-sep refused, where a later
    # row's label was the string "a|b" the separator splits
    def write(name, labels):
        (tmp_path / name).write_text("".join(json.dumps({"text": "x", "label": v}) + "\n" for v in labels))
        return _files([tmp_path / name])[name]

    listed = write("l.jsonl", [["a"], None, ["b", "c"]])
    later_string = write("s.jsonl", [["a"], ["b"], "a|b"])
    first_string = write("f.jsonl", ["a|b", ["b"]])
    assert pa.types.is_list(column_type(head_schema(listed, rows=True), "label"))
    assert column_type(head_schema(later_string, rows=True), "label") == pa.string()
    assert column_type(head_schema(first_string, rows=True), "label") == pa.string()
    # the first object alone does not tell a file of several lines' labels; a longer file than is read neither
    assert column_type(head_schema(listed), "label") == pa.string()
    monkeypatch.setattr(heads, "LIST_WINDOW", 10)
    assert column_type(head_schema(listed, rows=True), "label") == pa.string()


def test_a_json_lines_head_is_read_no_further_than_a_column_of_strings_everywhere_settles(tmp_path, monkeypatch):
    from lancetnic_flow.data.readers import jsonl

    name = "s.jsonl"
    (tmp_path / name).write_text("".join(json.dumps({"text": "x" * 100, "label": "a|b"}) + "\n" for _ in range(2000)))
    fi = _files([tmp_path / name])[name]
    lines: list[int] = []
    read_lines = jsonl.read_lines
    monkeypatch.setattr(jsonl, "read_lines", lambda f: (lines.append(1) or line for line in read_lines(f)))
    assert head_schema(fi, rows=True) == pa.schema([("text", pa.string()), ("label", pa.string())])
    assert len(lines) == 1


def test_keys_ahead_are_a_json_lines_files_first_objects_keys_and_none_for_formats_that_name_columns(tmp_path):
    (tmp_path / "k.jsonl").write_text('{"id": 1, "text": "a"}\n{"text": "b", "extra": 2}\n')
    (tmp_path / "t.csv").write_text("text,label\nx,a\n")
    files = _files(tmp_path.iterdir())
    assert heads.keys_ahead([files["k.jsonl"]]) == ["id", "text", "extra"]
    assert heads.keys_ahead([files["t.csv"]]) is None


def test_keys_ahead_of_several_json_lines_files_are_every_files_keys_in_order(tmp_path):
    # only the first file's head was read: "src" and "lang", in later files of a glob, were no columns
    (tmp_path / "a.jsonl").write_text('{"id": 1, "text": "a"}\n')
    (tmp_path / "b.jsonl").write_text('{"id": 2, "text": "b", "src": "web"}\n')
    (tmp_path / "c.jsonl").write_text('{"lang": "en", "id": 3, "text": "c"}\n')
    (tmp_path / "empty.jsonl").write_text("")
    files = _files(tmp_path.iterdir())
    order = [files[n] for n in ("empty.jsonl", "a.jsonl", "b.jsonl", "c.jsonl")]
    assert heads.keys_ahead(order) == ["id", "text", "src", "lang"]


def test_keys_ahead_of_many_files_read_their_heads_at_once_and_merge_them_in_the_files_order(tmp_path, monkeypatch):
    # each head was read after the one before: a round trip per file of a remote glob before any row
    import threading
    import time

    from lancetnic_flow.data.readers import jsonl

    names = [f"f{i:02}.jsonl" for i in range(16)]
    for i, n in enumerate(names):
        (tmp_path / n).write_text(f'{{"id": {i}, "text": "t", "k{15 - i}": 1}}\n')
    files = _files(tmp_path.iterdir())
    at_once, lock, now = [0, 0], threading.Lock(), jsonl.window_keys

    def slow(fi, *a):
        with lock:
            at_once[0] += 1
            at_once[1] = max(at_once)
        time.sleep(0.2)   # a remote store's round trip
        with lock:
            at_once[0] -= 1
        return now(fi, *a)

    monkeypatch.setattr(jsonl, "window_keys", slow)
    started = time.perf_counter()
    assert heads.keys_ahead([files[n] for n in names]) == ["id", "text", *(f"k{15 - i}" for i in range(16))]
    assert at_once[1] > 4 and time.perf_counter() - started < 16 * 0.2 / 2
