"""data/decompress.py: a compressed input cut short is refused in every
compression (zstd's reader ended quietly, so a cut .zst lost its last rows
unsaid), and zstd frames written one after another are all read."""
from __future__ import annotations

import bz2
import gzip
import io
import lzma

import pytest
import zstandard

from lancetnic_flow.data.decompress import decompressed, open_decompressed
from lancetnic_flow.data.readers import read_partition
from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.errors import UserError

TEXT = b"".join(b"row %d of some words to compress\n" % i for i in range(4000))
COMPRESS = {"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress,
            "zstd": lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b)}


@pytest.mark.parametrize("compression", sorted(COMPRESS))
@pytest.mark.parametrize("keep", [0.5, 0.9, -3])
def test_a_stream_cut_short_raises_in_every_compression_zstd_included(compression, keep):
    whole = COMPRESS[compression](TEXT)
    cut = whole[:int(len(whole) * keep)] if keep > 0 else whole[:keep]
    assert decompressed(io.BytesIO(whole), compression).read() == TEXT
    with pytest.raises(EOFError):
        decompressed(io.BytesIO(cut), compression).read()


def test_zstd_frames_one_after_another_read_whole_as_zstd_d_reads_them():
    parts = [TEXT[:1000], TEXT[1000:50000], TEXT[50000:]]
    data = b"".join(zstandard.ZstdCompressor().compress(p) for p in parts)
    f = decompressed(io.BytesIO(data), "zstd")
    got = b"".join(iter(lambda: f.read(777), b""))
    assert got == TEXT


def test_bytes_that_are_no_zstd_stream_are_a_value_error_which_the_readers_call_corrupt():
    with pytest.raises(ValueError):
        decompressed(io.BytesIO(TEXT), "zstd").read()


def test_a_zst_file_cut_short_stops_the_read_naming_the_file_instead_of_losing_its_last_rows(tmp_path):
    whole = zstandard.ZstdCompressor().compress(b"text,label\n" + TEXT.replace(b"\n", b",x\n"))
    (tmp_path / "ok.csv.zst").write_bytes(whole)
    (tmp_path / "cut.csv.zst").write_bytes(whole[:len(whole) * 2 // 3])
    cols = Columns(text=("text",), label="label")

    def rows(name):
        plan = plan_source([str(tmp_path / name)])
        return sum(c.rows_read for p in plan.partitions for c in read_partition(p, cols, chunk_bytes=5000))

    assert rows("ok.csv.zst") == 4000
    with pytest.raises(UserError, match="cut.csv.zst: the zstd stream is corrupt, truncated"):
        rows("cut.csv.zst")


def test_open_decompressed_closes_the_file_it_opened(tmp_path):
    (tmp_path / "a.gz").write_bytes(gzip.compress(TEXT))
    with open_decompressed(str(tmp_path / "a.gz"), "gzip", None) as f:
        assert f.read() == TEXT
    assert f.closed


@pytest.mark.parametrize("compression, suffix", [("gzip", ".gz"), ("bz2", ".bz2"), ("xz", ".xz"), ("zstd", ".zst")])
@pytest.mark.parametrize("name", ["data.csv", "data.txt", "data.jsonl", "part-00000"])
def test_compressed_data_under_a_plain_name_is_refused_saying_the_suffix_it_needs(tmp_path, compression, suffix, name):
    from lancetnic_flow.data.checks import checked_source

    body = b'{"text": "some words", "label": "x"}\n' * 50 if name.endswith(".jsonl") else \
        b"text,label\n" + b"some words here,x\n" * 50
    (tmp_path / name).write_bytes(COMPRESS[compression](body))
    for cols in (Columns(text=("text",), label="label"), Columns(text=("text",), all_rows=True, encoding="latin-1")):
        with pytest.raises(UserError, match=f"holds {compression}-compressed data") as e:
            checked_source([str(tmp_path / name)], "auto", {}, 1 << 20, cols)
        assert f"{name}{suffix}" in e.value.hint


def test_a_parquet_or_arrow_file_under_a_text_name_is_refused_and_text_that_starts_alike_is_read(tmp_path):
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    from lancetnic_flow.data.checks import checked_source

    table = pa.table({"text": ["some words here"] * 5, "label": ["x"] * 5})
    cols = Columns(text=("text",), label="label")
    pq.write_table(table, tmp_path / "p.csv")
    feather.write_feather(table, tmp_path / "a.csv")
    with pytest.raises(UserError, match="is Parquet data, not text"):
        checked_source([str(tmp_path / "p.csv")], "auto", {}, 1 << 20, cols)
    with pytest.raises(UserError, match="is Arrow IPC data, not text"):
        checked_source([str(tmp_path / "a.csv")], "auto", {}, 1 << 20, cols)
    pq.write_table(table, tmp_path / "part-00000")   # no extension: its start says Parquet, and Parquet it is
    assert checked_source([str(tmp_path / "part-00000")], "auto", {}, 1 << 20, cols).files[0].format == "parquet"
    (tmp_path / "t.csv").write_bytes(b"PAR1,text,label\n1,some words,x\n")
    assert checked_source([str(tmp_path / "t.csv")], "auto", {}, 1 << 20, cols).files[0].format == "csv"
