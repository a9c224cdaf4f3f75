"""data/readers/arrow.py: Arrow IPC streams (datasets' save_to_disk) and files
(pyarrow, Feather v2, polars) planned from headers or the footer alone, read
as byte ranges of whole record batches, every row once and in order; a
dictionary-encoded file whole; a foreign or truncated file refused in words."""
from __future__ import annotations

import io

import fsspec
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.ipc as ipc
import pytest

from lancetnic_flow.data.readers import arrow, read_partition
from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.errors import UserError
from lancetnic_flow.formats import Head, format_named

ROWS = 3000
TABLE = pa.table({"text": [f"word{i} other{i % 7}" for i in range(ROWS)], "label": ["a", "b", "c"] * (ROWS // 3)})
COLUMNS = Columns(text=("text",), label="label")


def write(path, layout: str, table: pa.Table = TABLE, batch: int = 700) -> str:
    if layout == "feather":   # Feather v2: the file layout with lz4-compressed bodies
        feather.write_feather(table, str(path), chunksize=batch)
        return str(path)
    options = ipc.IpcWriteOptions(use_legacy_format=layout == "legacy stream")
    new = ipc.new_file if layout == "file" else ipc.new_stream
    with new(str(path), table.schema, options=options) as w:
        for b in table.to_batches(max_chunksize=batch):
            w.write_batch(b)
    return str(path)


def read_all(url: str, **kw) -> tuple[list[str], int]:
    plan = plan_source([url], **kw)
    texts: list[str] = []
    for part in plan.partitions:
        for chunk in read_partition(part, COLUMNS):
            texts += chunk.table.column("text").to_pylist()
    return texts, len(plan.partitions)


LAYOUTS = ["stream", "file", "legacy stream", "feather"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_is_read_in_ranges_of_whole_batches_every_row_once_in_order(tmp_path, monkeypatch, layout):
    monkeypatch.setattr(arrow, "PIECE_BYTES", 10_000)   # several batches to a partition, several partitions
    texts, parts = read_all(write(tmp_path / "d.arrow", layout, batch=200))
    assert texts == TABLE.column("text").to_pylist()
    assert 1 < parts < ROWS // 200


def test_polars_ipc_files_and_streams_read_every_row(tmp_path):
    pl = pytest.importorskip("polars")
    frame = pl.from_arrow(TABLE)
    for name, save in (("file", frame.write_ipc), ("stream", frame.write_ipc_stream)):
        save(tmp_path / f"pl-{name}.arrow")
        assert read_all(str(tmp_path / f"pl-{name}.arrow"))[0] == TABLE.column("text").to_pylist()


def test_consecutive_batches_are_grouped_into_pieces_of_about_piece_bytes(tmp_path, monkeypatch):
    path = write(tmp_path / "d.arrow", "stream", batch=100)
    fs = fsspec.filesystem("file")
    with open(path, "rb") as f:
        batches, _ = arrow.scan(f, fs.size(path))
    assert len(batches) == ROWS // 100
    monkeypatch.setattr(arrow, "PIECE_BYTES", 4 * batches[0][1])
    ranges = arrow.byte_ranges(fs, path)
    assert all(length <= 4 * batches[0][1] + 64 for _, length in ranges) and len(ranges) >= len(batches) // 4
    assert sum(length for _, length in ranges) == sum(length for _, length in batches)   # every batch, once
    monkeypatch.setattr(arrow, "PIECE_BYTES", 64 * 2**20)
    assert arrow.byte_ranges(fs, path) == [(batches[0][0], sum(length for _, length in batches))]


class CountingFile(io.BytesIO):
    """A file that counts the bytes read from it."""

    read_bytes = 0

    def read(self, n=-1):
        out = super().read(n)
        self.read_bytes += len(out)
        return out


@pytest.mark.parametrize("layout", ["stream", "file"])
def test_planning_reads_the_headers_or_the_footer_not_the_batches(tmp_path, layout):
    big = pa.table({"text": ["some words " * 200] * ROWS})
    data = open(write(tmp_path / "d.arrow", layout, big, batch=300), "rb").read()
    f = CountingFile(data)
    batches, dictionaries = arrow.scan(f, len(data))
    assert len(batches) == ROWS // 300 and not dictionaries
    assert f.read_bytes < len(data) / 100


@pytest.mark.parametrize("layout", ["stream", "file"])
def test_a_dictionary_encoded_file_is_one_partition_read_whole(tmp_path, layout):
    table = TABLE.set_column(1, "label", TABLE.column("label").dictionary_encode())
    texts, parts = read_all(write(tmp_path / "d.arrow", layout, table))
    assert parts == 1 and texts == TABLE.column("text").to_pylist()


@pytest.mark.parametrize("layout", ["stream", "file"])
def test_a_truncated_or_foreign_file_is_refused_as_not_arrow(tmp_path, layout):
    whole = open(write(tmp_path / "d.arrow", layout), "rb").read()
    (tmp_path / "cut.arrow").write_bytes(whole[:3000])
    with pytest.raises(UserError, match="not a valid Arrow IPC file.*truncated"):
        read_all(str(tmp_path / "cut.arrow"))
    (tmp_path / "words.arrow").write_bytes(b"hello world\n" * 10)
    with pytest.raises(UserError, match="not a valid Arrow IPC file"):
        read_all(str(tmp_path / "words.arrow"))


def test_a_missing_column_is_named_with_the_columns_the_file_has(tmp_path):
    path = write(tmp_path / "d.arrow", "stream")
    with pytest.raises(UserError, match="no column 'body'.*'text', 'label'"):
        next(read_partition(plan_source([path]).partitions[0], Columns(text=("body",))))
    fi = plan_source([path]).files[0]
    assert format_named("arrow").head_columns()(fi, None) == ["text", "label"]


@pytest.mark.parametrize("layout", ["stream", "file"])
def test_both_layouts_are_known_by_their_first_bytes(tmp_path, layout):
    data = open(write(tmp_path / "d.arrow", layout), "rb").read()
    assert arrow.sniff(Head.of(data[:8192], False), format_named("arrow"))
    assert not arrow.sniff(Head.of(b"PAR1" + data[4:100], False), format_named("arrow"))
    assert not arrow.sniff(Head.of(b"text,label\na,b\n", True), format_named("arrow"))
    (tmp_path / "part-00000").write_bytes(data)   # no extension: its start says what it is
    assert plan_source([str(tmp_path / "part-00000")]).files[0].format == "arrow"
    assert read_all(str(tmp_path / "part-00000"))[0] == TABLE.column("text").to_pylist()


def test_the_format_named_wins_over_the_extension(tmp_path):
    path = write(tmp_path / "d.csv", "stream")
    assert read_all(path, format="arrow")[0] == TABLE.column("text").to_pylist()
    with pytest.raises(UserError):
        read_all(path)   # read as CSV by its name: not text


def test_a_file_on_another_filesystem_is_planned_and_read_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr(arrow, "PIECE_BYTES", 10_000)
    for layout in ("stream", "file"):
        data = open(write(tmp_path / f"{layout}.arrow", layout, batch=200), "rb").read()
        with fsspec.open(f"memory://arrow-test/{layout}.arrow", "wb") as f:
            f.write(data)
        texts, parts = read_all(f"memory://arrow-test/{layout}.arrow")
        assert texts == TABLE.column("text").to_pylist() and parts > 1


def test_a_feather_v1_file_is_refused_by_name_with_the_conversion_to_v2_whatever_it_is_named(tmp_path):
    # It was "not a valid Arrow IPC file (... ends inside a message header)": v1 holds no record
    # batches to read a part at a time, so it is named, with the one line that converts it.
    import warnings

    from lancetnic_flow.data.decompress import check_not_packed

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # pyarrow deprecates writing v1
        feather.write_feather(TABLE, str(tmp_path / "d.feather"), version=1)
    data = (tmp_path / "d.feather").read_bytes()
    for name in ("d.feather", "d.arrow", "part-00000"):   # by extension, and by its first bytes
        (tmp_path / name).write_bytes(data)
        with pytest.raises(UserError, match="Feather v1 file") as got:
            read_all(str(tmp_path / name))
        assert "version=2" in got.value.hint
    from lancetnic_flow.data.sources import FileInfo

    fi = FileInfo((tmp_path / "d.arrow").as_uri(), len(data), "v", "arrow", None)
    with pytest.raises(UserError, match="Feather v1 file"):
        format_named("arrow").head_columns()(fi, None)
    with pytest.raises(UserError, match="Feather v1 data, not text") as got:   # read as text
        check_not_packed(data[:100], "f.csv")
    assert "version=2" in got.value.hint
