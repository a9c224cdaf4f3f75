"""data/readers/long_texts.py: a text too long for the Dask worker reading it is
refused in words — naming the file, the text's start and size, and a worker
limit that holds it — before it is tokenised; short texts and the calling
process are never checked."""
from __future__ import annotations

import pyarrow as pa
import pytest

import lancetnic_flow.data.readers.long_texts as long_texts
from lancetnic_flow.data.readers.long_texts import CHECK_FROM, check_text_lengths, longest_text, text_peak
from lancetnic_flow.errors import UserError
from lancetnic_flow.sizes import parse_size

MiB = 2**20


def test_the_longest_text_adds_a_rows_text_columns_and_leaves_the_label_out():
    table = pa.table({"text": ["ab", None, "abcd"], "title": ["xyz", "123456", None], "label": ["l" * 99, "a", "b"]})
    assert longest_text(table) == (6, 1)
    assert longest_text(pa.table({"text": pa.array([], pa.string())})) == (0, -1)


def test_a_text_the_worker_cannot_tokenise_is_refused_naming_it_and_a_limit_that_holds_it(monkeypatch):
    limit, pause, rss = 700 * MiB, 0.8, 350 * MiB
    monkeypatch.setattr(long_texts, "worker_room", lambda: (limit, int(limit * pause) - rss, pause))
    text = "qhxqlu yeyufb " + "w" * (20 * MiB)
    with pytest.raises(UserError) as e:
        check_text_lengths(pa.table({"text": ["short", text], "label": ["a", "b"]}), "file:///d.csv")
    assert "file:///d.csv: a row whose text starts 'qhxqlu yeyufb" in e.value.message
    assert "20.0 MiB long" in e.value.message and "memory limit 700.0 MiB" in e.value.message
    named = parse_size(e.value.hint.split("a limit of ")[1].split(" or more")[0].replace(" ", ""))
    assert named * pause - rss >= text_peak(len(text)) * 0.999   # that limit's pause line holds it
    monkeypatch.setattr(long_texts, "worker_room", lambda: (named + MiB, int((named + MiB) * pause) - rss, pause))
    check_text_lengths(pa.table({"text": [text]}), "file:///d.csv")


def test_short_texts_and_the_calling_process_are_not_checked(monkeypatch):
    check_text_lengths(pa.table({"text": ["x" * (4 * MiB)]}), "file:///d.csv")   # no worker here: nothing checked
    monkeypatch.setattr(long_texts, "worker_room", lambda: pytest.fail("memory read for a short text"))
    check_text_lengths(pa.table({"text": ["x" * (CHECK_FROM - 1)]}), "file:///d.csv")


def test_reading_a_partition_on_a_worker_too_small_for_its_text_is_refused_before_tokenising(tmp_path, monkeypatch):
    from lancetnic_flow.data.readers import read_partition
    from lancetnic_flow.data.sources import Columns, FileInfo, Partition

    path = tmp_path / "d.csv"
    path.write_text("text,label\na cat,pos\n\"" + "dog " * (CHECK_FROM // 2) + "\",neg\n")
    monkeypatch.setattr(long_texts, "worker_room", lambda: (700 * MiB, 200 * MiB, 0.8))
    size = path.stat().st_size
    part = Partition(0, FileInfo(url=f"file://{path}", size=size, version="", format="csv", compression=None), 0, size)
    with pytest.raises(UserError, match="d.csv: a row whose text starts 'dog dog"):
        list(read_partition(part, Columns(text=("text",), label="label")))
