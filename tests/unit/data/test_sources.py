"""data/sources.py and the readers under it (data/readers/): every format's
partitions cover every row once at any block size, compressed streams, bad
rows counted by reason, columns checked, path errors in words — on real local
files and memory://. The loopback S3 and HTTP servers' tests are
tests/integration/test_remote_sources.py."""
from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import time

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from lancetnic_flow.data.checks import check_columns
from lancetnic_flow.data.readers import read_partition
from lancetnic_flow.data.sources import Columns, FileInfo, Partition, plan_source
from lancetnic_flow.errors import UserError


LABELS = ["pos", "neg", "neutral"]


def rows(n=120):
    return [
        {"text": f"example number {i} with some words, \"quoted\" and more",
         "label": LABELS[i % 3], "score": i * 0.5}
        for i in range(n)
    ]


def csv_bytes(rs, sep=","):
    out = io.StringIO()
    out.write(sep.join(["text", "label", "score"]) + "\n")
    for r in rs:
        text = r["text"]
        if sep == ",":
            text = '"' + text.replace('"', '""') + '"'
        else:
            text = text.replace('"', "'")
        out.write(sep.join([text, r["label"], str(r["score"])]) + "\n")
    return out.getvalue().encode()


def jsonl_bytes(rs):
    return "".join(json.dumps(r) + "\n" for r in rs).encode()


def text_bytes(rs):
    return "".join(r["text"] + "\n" for r in rs).encode()


def fasttext_bytes(rs):
    return "".join(f"__label__{r['label']} {r['text']}\n" for r in rs).encode()


def read_all(plan, columns, **kw):
    tables, skipped, rows_read = [], {}, 0
    for part in plan.partitions:
        for chunk in read_partition(part, columns, **kw):
            tables.append(chunk.table)
            rows_read += chunk.rows_read
            for k, v in chunk.skipped.items():
                skipped[k] = skipped.get(k, 0) + v
    table = pa.concat_tables(tables) if tables else None
    return table, skipped, rows_read


COLS = Columns(text=("text",), label="label", target="score")


@pytest.fixture(autouse=True)
def clean_memory():
    fs = fsspec.filesystem("memory")
    fs.store.clear()
    fs.pseudo_dirs.clear()
    fs.pseudo_dirs.append("")
    yield
    fs.store.clear()


# ---------------------------------------------------------------- splitting


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "text", "fasttext"])
def test_small_blocks_cover_every_row_once(tmp_path, fmt):
    rs = rows(150)
    data = {
        "csv": lambda: csv_bytes(rs),
        "tsv": lambda: csv_bytes(rs, "\t"),
        "jsonl": lambda: jsonl_bytes(rs),
        "text": lambda: text_bytes(rs),
        "fasttext": lambda: fasttext_bytes(rs),
    }[fmt]()
    ext = {"csv": "csv", "tsv": "tsv", "jsonl": "jsonl", "text": "txt", "fasttext": "ft"}[fmt]
    path = tmp_path / f"data.{ext}"
    path.write_bytes(data)
    plan = plan_source([str(path)], blocksize=200)
    assert len(plan.partitions) == -(-len(data) // 200) > 20
    assert [p.index for p in plan.partitions] == list(range(len(plan.partitions)))
    assert plan.files[0].url == "file://" + str(path)
    assert plan.files[0].format == fmt and plan.files[0].compression is None
    if fmt in ("csv", "tsv", "jsonl"):
        cols = COLS
    elif fmt == "fasttext":
        cols = Columns(text=("text",), label="label")
    else:
        cols = Columns(text=("text",))
    table, skipped, rows_read = read_all(plan, cols)
    expected = [r["text"] if fmt != "tsv" else r["text"].replace('"', "'") for r in rs]
    assert table.column("text").to_pylist() == expected
    assert rows_read == len(rs) and skipped == {}
    if cols.label:
        assert table.column("label").to_pylist() == [r["label"] for r in rs]
    if cols.target:
        assert table.column("target").type == pa.float64()
        assert table.column("target").to_pylist() == [r["score"] for r in rs]
    # one big block gives the same
    whole, _, _ = read_all(plan_source([str(path)]), cols)
    assert whole.equals(table)


def test_parquet_row_groups(tmp_path):
    rs = rows(100)
    t = pa.table({"text": [r["text"] for r in rs], "label": [i % 3 for i in range(100)],
                  "score": [r["score"] for r in rs], "other": list(range(100))})
    path = tmp_path / "d.parquet"
    pq.write_table(t, path, row_group_size=30)
    plan = plan_source([str(path)], blocksize=10)
    assert [(p.start, p.length) for p in plan.partitions] == [(i, -1) for i in range(4)]
    table, skipped, rows_read = read_all(plan, Columns(text=("text",), label="label",
                                                      target="score", numeric=("other",)))
    assert table.column_names == ["text", "label", "target", "other"]
    assert table.column("label").type == pa.string()
    assert table.column("label").to_pylist() == [str(i % 3) for i in range(100)]
    assert table.column("other").type == pa.float64()
    assert rows_read == 100 and skipped == {}


# ---------------------------------------------------------------- compression

COMPRESSORS = {
    "gz": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zst": lambda b: zstandard.ZstdCompressor().compress(b),
}


@pytest.mark.parametrize("ext", list(COMPRESSORS))
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_compressed_stream_in_small_chunks(tmp_path, ext, fmt):
    rs = rows(80)
    raw = csv_bytes(rs) if fmt == "csv" else jsonl_bytes(rs)
    (tmp_path / f"plain.{fmt}").write_bytes(raw)
    (tmp_path / f"packed.{fmt}.{ext}").write_bytes(COMPRESSORS[ext](raw))
    plain = plan_source([str(tmp_path / f"plain.{fmt}")])
    packed = plan_source([str(tmp_path / f"packed.{fmt}.{ext}")], blocksize=100)
    assert len(packed.partitions) == 1 and packed.partitions[0].length == -1
    assert packed.files[0].compression == {"gz": "gzip", "zst": "zstd"}.get(ext, ext)
    assert len(packed.warnings) == 1
    w = packed.warnings[0]
    assert "packed" in w and "split" in w and "byte range" in w
    assert plain.warnings == []
    chunks = list(read_partition(packed.partitions[0], COLS, chunk_bytes=300))
    assert len(chunks) > 10
    assert max(c.table.num_rows for c in chunks) <= 300 // 40 + 1
    a, _, _ = read_all(plain, COLS)
    b = pa.concat_tables([c.table for c in chunks])
    assert a.equals(b) and b.num_rows == 80


def test_compressed_line_longer_than_chunk(tmp_path):
    long_text = "word " * 2000
    raw = csv_bytes([{"text": long_text.strip(), "label": "a", "score": 1}] + rows(5))
    (tmp_path / "x.csv.gz").write_bytes(gzip.compress(raw))
    plan = plan_source([str(tmp_path / "x.csv.gz")])
    t, skipped, n = read_all(plan, COLS, chunk_bytes=100)
    assert t.num_rows == 6 and t.column("text")[0].as_py() == long_text.strip()


def test_one_warning_for_several_compressed_files(tmp_path):
    for i in range(3):
        (tmp_path / f"p{i}.jsonl.gz").write_bytes(gzip.compress(jsonl_bytes(rows(5))))
    plan = plan_source([str(tmp_path / "*.jsonl.gz")])
    assert len(plan.warnings) == 1 and all(f"p{i}" in plan.warnings[0] for i in range(3))


# ---------------------------------------------------------------- a name that does not settle the format


KINDS = {   # content -> (bytes, the columns a run reads from it)
    "fasttext": (fasttext_bytes, Columns(text=("text",), label="label")),
    "jsonl": (jsonl_bytes, COLS),
    "csv": (csv_bytes, COLS),
    "tsv": (lambda rs: csv_bytes(rs, "\t"), COLS),
    "text": (text_bytes, Columns(text=("text",))),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_txt_file_is_read_as_the_format_its_start_shows(tmp_path, kind):
    data, cols = KINDS[kind]
    path = tmp_path / "train.txt"
    path.write_bytes(data(rows(150)))
    plan = plan_source([str(path)], blocksize=500, names=cols.names())
    assert plan.files[0].format == kind and len(plan.partitions) > 10
    (s,) = plan.sniffed
    assert (s.format, s.named, s.files, s.news) == (kind, "text", 1, kind != "text")
    table, skipped, n = read_all(plan, cols)
    assert n == table.num_rows == 150 and skipped == {}
    if cols.label:
        assert table.column("label").to_pylist() == [r["label"] for r in rows(150)]


def test_the_decision_says_what_the_start_shows_and_how_to_read_it_otherwise(tmp_path):
    (tmp_path / "train.txt").write_bytes(fasttext_bytes(rows(5)))
    (s,) = plan_source([str(tmp_path / "train.txt")]).sniffed
    assert s.message() == (f"format fasttext: {tmp_path}/train.txt's lines start with __label__ "
                           "(--format text reads it as plain text)")
    (tmp_path / "corpus").write_bytes(jsonl_bytes(rows(5)))
    (s,) = plan_source([str(tmp_path / "corpus")]).sniffed
    assert s.named is None and s.message().endswith("'s lines are JSON objects (--format NAME reads it as another format)")


@pytest.mark.parametrize("ext", ["gz", "zst"])
def test_a_compressed_txt_file_is_sniffed_from_its_decompressed_start(tmp_path, ext):
    path = tmp_path / f"train.txt.{ext}"
    path.write_bytes(COMPRESSORS[ext](fasttext_bytes(rows(40))))
    plan = plan_source([str(path)])
    assert plan.files[0].format == "fasttext" and plan.files[0].compression == {"gz": "gzip", "zst": "zstd"}[ext]
    table, _, n = read_all(plan, Columns(text=("text",), label="label"))
    assert n == 40 and table.column("label").to_pylist()[:3] == LABELS


def test_only_the_start_of_a_file_is_read_to_tell_its_format(tmp_path):
    from lancetnic_flow.data.sources import SNIFF_BYTES

    # Cut in half, the gzip stream fails where a reader reaches the cut: sniffing never gets there.
    packed = gzip.compress(fasttext_bytes(rows(40_000)), compresslevel=1)
    (tmp_path / "cut.txt.gz").write_bytes(packed[: len(packed) // 2])
    plan = plan_source([str(tmp_path / "cut.txt.gz")])
    assert plan.files[0].format == "fasttext"
    with pytest.raises(UserError, match="corrupt, truncated"):
        read_all(plan, Columns(text=("text",), label="label"))
    # What follows the first SNIFF_BYTES does not count.
    (tmp_path / "mixed.txt").write_bytes(fasttext_bytes(rows(SNIFF_BYTES // 40)) + jsonl_bytes(rows(400)))
    assert plan_source([str(tmp_path / "mixed.txt")]).files[0].format == "fasttext"


def test_a_file_without_an_extension_is_sniffed_on_any_filesystem(tmp_path):
    (tmp_path / "corpus").write_bytes(jsonl_bytes(rows(5)))
    (tmp_path / "data.gz").write_bytes(gzip.compress(csv_bytes(rows(5))))
    assert plan_source([str(tmp_path / "corpus")]).files[0].format == "jsonl"
    assert plan_source([str(tmp_path / "data.gz")], names=("text",)).files[0].format == "csv"
    fsspec.filesystem("memory").pipe("/in/train", fasttext_bytes(rows(5)))
    assert plan_source(["memory://in/train"]).files[0].format == "fasttext"


def test_a_folder_of_files_without_extensions_is_sniffed_and_beside_data_files_they_stay_out(tmp_path):
    d = tmp_path / "spark"
    d.mkdir()
    for i in range(3):
        (d / f"part-0000{i}").write_bytes(fasttext_bytes(rows(10)))
    (d / "_SUCCESS").write_bytes(b"")
    plan = plan_source([str(d)])
    assert [f.format for f in plan.files] == ["fasttext"] * 3 and plan.warnings == []
    assert plan.sniffed[0].files == 3 and "(3 files): part-00000's lines" in plan.sniffed[0].message()
    (d / "extra.csv").write_bytes(csv_bytes(rows(3)))
    plan = plan_source([str(d)])
    assert [f.format for f in plan.files] == ["csv"] and "part-00000" in plan.warnings[0]


def test_the_format_named_or_a_settling_extension_wins_over_the_start(tmp_path):
    (tmp_path / "train.txt").write_bytes(fasttext_bytes(rows(5)))
    plan = plan_source([str(tmp_path / "train.txt")], format="text")
    assert plan.files[0].format == "text" and plan.sniffed == []
    (tmp_path / "tagged.csv").write_bytes(fasttext_bytes(rows(5)))
    plan = plan_source([str(tmp_path / "tagged.csv")])
    assert plan.files[0].format == "csv" and plan.sniffed == []


def test_the_files_of_a_glob_get_one_format_and_a_glob_whose_files_disagree_is_refused(tmp_path):
    for i in range(3):
        (tmp_path / f"part-{i}.txt").write_bytes(fasttext_bytes(rows(5)))
    (tmp_path / "part-3.txt").write_bytes(b"")
    (tmp_path / "part-4.ft").write_bytes(fasttext_bytes(rows(5)))
    plan = plan_source([str(tmp_path / "part-*")])
    assert [f.format for f in plan.files] == ["fasttext"] * 5 and len(plan.sniffed) == 1
    assert plan.sniffed[0].files == 4 and plan.sniffed[0].input == str(tmp_path / "part-*")
    (tmp_path / "part-2.txt").write_bytes(jsonl_bytes(rows(5)))
    with pytest.raises(UserError) as e:
        plan_source([str(tmp_path / "part-*")])
    msg = str(e.value)
    assert "part-0.txt reads as fasttext" in msg and "part-2.txt as jsonl" in msg and "--format" in e.value.said("cli")[1]
    # Each input decides for its own files.
    plan = plan_source([str(tmp_path / "part-[01].txt"), str(tmp_path / "part-2.txt")])
    assert [f.format for f in plan.files] == ["fasttext", "fasttext", "jsonl"] and len(plan.sniffed) == 2


# ---------------------------------------------------------------- memory, globs, fingerprint


def test_memory_glob_several_files():
    fs = fsspec.filesystem("memory")
    for i in range(3):
        fs.pipe(f"/data/part{i}.csv", csv_bytes(rows(10 + i)))
    fs.pipe("/data/_SUCCESS", b"")
    plan = plan_source(["memory://data/part*.csv"], blocksize=300)
    assert [f.url for f in plan.files] == [f"memory:///data/part{i}.csv" for i in range(3)]
    t, skipped, n = read_all(plan, COLS)
    assert t.num_rows == 33 and n == 33
    plan2 = plan_source(["memory://data"])  # a folder: its data files
    assert len(plan2.files) == 3


def test_fingerprint(tmp_path):
    p = tmp_path / "a.csv"
    p.write_bytes(csv_bytes(rows(30)))
    f1 = plan_source([str(p)], blocksize=100).fingerprint()
    assert plan_source([str(p)], blocksize=10_000).fingerprint() == f1
    assert plan_source([str(p)]).fingerprint() == f1
    p.write_bytes(csv_bytes(rows(31)))
    assert plan_source([str(p)]).fingerprint() != f1
    # same size, new mtime
    f2 = plan_source([str(p)]).fingerprint()
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert plan_source([str(p)]).fingerprint() != f2


def test_fingerprint_memory_changes():
    fs = fsspec.filesystem("memory")
    fs.pipe("/f.jsonl", jsonl_bytes(rows(3)))
    a = plan_source(["memory://f.jsonl"]).fingerprint()
    time.sleep(0.01)
    fs.pipe("/f.jsonl", jsonl_bytes(rows(4)))
    assert plan_source(["memory://f.jsonl"]).fingerprint() != a


def test_empty_file_has_no_partitions(tmp_path):
    (tmp_path / "e.csv").write_bytes(b"")
    plan = plan_source([str(tmp_path / "e.csv")])
    assert len(plan.files) == 1 and plan.partitions == []


# ---------------------------------------------------------------- bad rows


def test_bad_csv_rows_are_counted(tmp_path):
    data = (
        b"text,label,score\n"
        b"good one,pos,1\n"
        b"too,many,fields,here\n"
        b"   ,pos,2\n"
        b"no label,,3\n"
        b"bad target,neg,abc\n"
        b"bad \xff\xfe utf8,pos,4\n"
        b"good two,neg,5\n"
    )
    p = tmp_path / "bad.csv"
    p.write_bytes(data)
    for bs in (10**6, 30):
        t, skipped, n = read_all(plan_source([str(p)], blocksize=bs), COLS)
        assert t.column("text").to_pylist() == ["good one", "good two"]
        assert skipped == {"malformed": 1, "empty_text": 1, "missing_label": 1,
                           "missing_target": 1, "undecodable": 1}
        assert n == 7


def test_bad_jsonl_rows_are_counted(tmp_path):
    data = (
        b'{"text": "good", "label": 1}\n'
        b'{"text": "broken", \n'
        b'{"text": "", "label": "a"}\n'
        b'{"text": "nolabel"}\n'
        b'{"text": "mixed", "label": "b"}\n'
        b'{"text": "bad \xff", "label": "b"}\n'
    )
    p = tmp_path / "bad.jsonl"
    p.write_bytes(data)
    t, skipped, n = read_all(plan_source([str(p)]), Columns(text=("text",), label="label"))
    assert t.to_pydict() == {"text": ["good", "mixed"], "label": ["1", "b"]}
    assert skipped == {"malformed": 1, "empty_text": 1, "missing_label": 1, "undecodable": 1}
    assert n == 6


def test_jsonl_numbers_as_labels(tmp_path):
    p = tmp_path / "n.jsonl"
    p.write_bytes(b'{"text": "first row", "label": 1}\n{"text": "second row", "label": 2}\n')
    t, _, _ = read_all(plan_source([str(p)]), Columns(text=("text",), label="label"))
    assert t.column("label").to_pylist() == ["1", "2"]


def test_fasttext_and_text_details(tmp_path):
    p = tmp_path / "f.ft"
    # Several tags on a line are a label set: see test_multilabel.py (a single-label task refuses them).
    p.write_bytes(b"__label__pos hello world\r\nno label here\n__label__neg\n"
                  b"\n__label__neg bye\n")
    t, skipped, n = read_all(plan_source([str(p)]), Columns(text=("text",), label="label"))
    assert t.to_pydict() == {"text": ["hello world", "bye"], "label": ["pos", "neg"]}
    assert skipped == {"missing_label": 1, "empty_text": 1} and n == 4
    q = tmp_path / "t.txt"
    q.write_bytes(b"line one\r\n\nline \xff two\nline three")
    t, skipped, n = read_all(plan_source([str(q)]), Columns(text=("text",)))
    assert t.column("text").to_pylist() == ["line one", "line three"]
    assert skipped == {"undecodable": 1}


def test_multiple_text_columns_and_numeric(tmp_path):
    p = tmp_path / "m.csv"
    p.write_bytes(b"title,body,label,n\nHello,world,a,1.5\n,only body,b,x\n")
    t, _, _ = read_all(plan_source([str(p)]),
                       Columns(text=("title", "body"), label="label", numeric=("n",)))
    assert t.to_pydict() == {"text": ["Hello world", "only body"], "label": ["a", "b"],
                             "n": [1.5, None]}


# ---------------------------------------------------------------- user errors


def test_missing_column(tmp_path):
    p = tmp_path / "a.csv"
    p.write_bytes(csv_bytes(rows(3)))
    plan = plan_source([str(p)])
    with pytest.raises(UserError) as e:
        check_columns(plan, Columns(text=("txt",), label="label"))
    msg = str(e.value)
    assert "'txt'" in msg and "'score'" in msg and "did you mean 'text'" in msg
    with pytest.raises(UserError, match="lable"):
        list(read_partition(plan.partitions[0], Columns(text=("text",), label="lable")))
    check_columns(plan, COLS)  # fine
    j = tmp_path / "a.jsonl.gz"
    j.write_bytes(gzip.compress(jsonl_bytes(rows(3))))
    with pytest.raises(UserError, match="'label'"):
        check_columns(plan_source([str(j)]), Columns(text=("body",)))
    pqp = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": ["x"]}), pqp)
    with pytest.raises(UserError, match="'text'"):
        check_columns(plan_source([str(pqp)]), Columns(text=("texts",)))


def test_path_errors(tmp_path):
    (tmp_path / "real.csv").write_bytes(b"text\nx\n")
    with pytest.raises(UserError) as e:
        plan_source([str(tmp_path / "*.jsonl")])
    assert "*.jsonl" in str(e.value) and "real.csv" in str(e.value)
    with pytest.raises(UserError) as e:
        plan_source([str(tmp_path / "reel.csv")])
    assert "reel.csv" in str(e.value) and "real.csv" in e.value.hint
    (tmp_path / "what.xyz").write_bytes(b"x\n")
    with pytest.raises(UserError) as e:
        plan_source([str(tmp_path / "what.xyz")])
    assert "pass format with one of" in str(e.value) and "fasttext" in str(e.value)
    assert "pass --format with one of" in e.value.said("cli")[1]
    assert plan_source([str(tmp_path / "what.xyz")], format="text").files[0].format == "text"
    with pytest.raises(UserError, match="unknown format"):
        plan_source([str(tmp_path / "real.csv")], format="xls")
    with pytest.raises(UserError):
        plan_source(["memory://nothing/here.csv"])


def test_partition_is_picklable_and_frozen():
    import pickle

    fi = FileInfo("memory:///a.csv", 10, "", "csv", None)
    part = Partition(0, fi, 0, 10)
    assert pickle.loads(pickle.dumps(part)) == part
    with pytest.raises(Exception):
        part.start = 3  # type: ignore[misc]


def test_a_datasets_folder_reads_its_arrow_files_and_not_its_metadata(tmp_path):
    datasets = pytest.importorskip("datasets")
    texts = [f"row {i} words" for i in range(900)]
    ds = datasets.Dataset.from_dict({"text": texts, "label": [str(i % 3) for i in range(900)]})
    ds.save_to_disk(str(tmp_path / "ds"), max_shard_size="10KB")
    plan = plan_source([str(tmp_path / "ds")])
    assert len(plan.files) > 1 and {f.format for f in plan.files} == {"arrow"}
    assert not plan.warnings   # state.json and dataset_info.json are neither data nor skipped data
    got = [t for p in plan.partitions for c in read_partition(p, Columns(text=("text",), label="label"))
           for t in c.table.column("text").to_pylist()]
    assert got == texts   # shards in order, every row once


def test_a_datasets_folder_reads_the_files_its_state_lists_not_the_caches_map_and_filter_write_there(tmp_path):
    """load_from_disk(...).map(...) writes cache-*.arrow into the folder: read with the data,
    every row came twice (a filter's cache holds row indices only: no text column)."""
    datasets = pytest.importorskip("datasets")
    texts = [f"row {i} words" for i in range(300)]
    datasets.Dataset.from_dict({"text": texts, "label": ["a"] * 300}).save_to_disk(str(tmp_path / "ds"))
    loaded = datasets.load_from_disk(str(tmp_path / "ds"))
    loaded.map(lambda x: {"n": len(x["text"])})
    loaded.filter(lambda x: x["text"].endswith("words")).shuffle(seed=0).flatten_indices()
    assert len(list((tmp_path / "ds").glob("cache-*.arrow"))) >= 2
    plan = plan_source([str(tmp_path / "ds")])
    assert [f.url.rsplit("/", 1)[1] for f in plan.files] == ["data-00000-of-00001.arrow"]
    got = [t for p in plan.partitions for c in read_partition(p, Columns(text=("text",), label="label"))
           for t in c.table.column("text").to_pylist()]
    assert got == texts


def test_a_saved_dataset_dict_is_refused_naming_a_split_to_read(tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": ["a b", "c d"], "label": ["x", "y"]})
    datasets.DatasetDict({"train": ds, "test": ds}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(UserError, match="DatasetDict of splits test, train") as e:
        plan_source([str(tmp_path / "dd")])
    assert e.value.hint.endswith("dd/train")
    assert len(plan_source([str(tmp_path / "dd" / "train")]).files) == 1


# ---------------------------------------------------------------- open errors

def _refused(host: str, port: int) -> BaseException:
    import errno as _errno

    import aiohttp
    from aiohttp.client_reqrep import ConnectionKey

    key = ConnectionKey(host, port, False, True, None, None, None)
    os_error = ConnectionRefusedError(_errno.ECONNREFUSED, f"Connect call failed ('{host}', {port})")
    return aiohttp.ClientConnectorError(key, os_error)


@pytest.mark.parametrize("port", [40329, 40412, 4030, 14040])
def test_an_address_whose_port_holds_403_or_404_is_not_read_as_that_status(port):
    # CI met port 40329 on a refused connection: "access denied", check the credentials.
    from lancetnic_flow.data.sources import open_error

    url = f"http://127.0.0.1:{port}/x.csv"
    err = open_error(url, _refused("127.0.0.1", port))
    assert "cannot reach the server" in str(err), err
    assert "access denied" not in str(err) and "not found" not in str(err)


@pytest.mark.parametrize("bucket", ["timeout-logs", "not-found-archive", "forbidden-texts", "connect-403"])
def test_words_in_a_bucket_name_do_not_decide_what_went_wrong(bucket):
    from lancetnic_flow.data.sources import open_error

    url = f"s3://{bucket}/train.csv"
    err = open_error(url, ValueError(f"something odd while reading s3://{bucket}/train.csv"))
    assert "cannot read (ValueError" in str(err), err


def test_a_failure_is_classified_by_its_status_errno_and_type_before_its_words():
    import errno as _errno

    import aiohttp

    from lancetnic_flow.data.sources import open_error

    url = "https://example.org/x.csv"

    def status(code: int, message: str) -> BaseException:
        from multidict import CIMultiDictProxy, CIMultiDict
        from yarl import URL

        info = aiohttp.RequestInfo(URL(url), "GET", CIMultiDictProxy(CIMultiDict()), URL(url))
        return aiohttp.ClientResponseError(info, (), status=code, message=message)

    assert "access denied" in str(open_error(url, status(403, "Forbidden")))
    assert "not found" in str(open_error(url, status(404, "Not Found")))
    assert "access denied" in str(open_error(url, PermissionError(_errno.EACCES, "Permission denied")))
    assert "did not answer in time" in str(open_error(url, TimeoutError()))
    assert "did not answer in time" in str(open_error(url, OSError(_errno.ETIMEDOUT, "Connection timed out")))
    assert "cannot reach the server" in str(open_error(url, OSError(_errno.EHOSTUNREACH, "No route to host")))
    assert "not found" in str(open_error(url, FileNotFoundError(url)))
    boto = type("ClientError", (Exception,), {})("An error occurred (403) when calling HeadObject: Forbidden")
    boto.response = {"Error": {"Code": "403"}, "ResponseMetadata": {"HTTPStatusCode": 403}}
    assert "access denied" in str(open_error("s3://b/k.csv", boto))
    creds = type("ClientError", (Exception,), {})("InvalidAccessKeyId: the key you gave does not exist")
    creds.response = {"ResponseMetadata": {"HTTPStatusCode": 403}}
    assert "no usable credentials" in str(open_error("s3://b/k.csv", creds))


def test_prediction_plans_its_files_in_the_order_named_and_refuses_a_file_named_twice(tmp_path):
    # predict --input b.csv a.csv wrote a's rows first, and a file named twice got one set of rows
    from lancetnic_flow.data.sources import plan_source

    for name in ("a.csv", "b.csv"):
        (tmp_path / name).write_text("text,label\nx y,1\n")
    a, b = str(tmp_path / "a.csv"), str(tmp_path / "b.csv")
    assert [f.url.rsplit("/", 1)[-1] for f in plan_source([b, a], in_order=True).files] == ["b.csv", "a.csv"]
    assert [f.url.rsplit("/", 1)[-1] for f in plan_source([b, a]).files] == ["a.csv", "b.csv"]   # training: sorted
    with pytest.raises(UserError, match="named twice"):
        plan_source([a, str(tmp_path / "*.csv")], in_order=True)
    assert len(plan_source([a, str(tmp_path / "*.csv")]).files) == 2


def test_files_whose_names_hold_glob_or_query_characters_are_read_as_named_alone_and_in_their_folder(tmp_path):
    cols = Columns(text=("text",), label="label")

    def count(*urls):
        plan = plan_source([str(u) for u in urls])
        return sum(c.rows_read for p in plan.partitions for c in read_partition(p, cols)), len(plan.files)

    (tmp_path / "what?.csv.gz").write_bytes(gzip.compress(csv_bytes(rows(30))))
    (tmp_path / "scores[1].csv").write_bytes(csv_bytes(rows(20)))
    (tmp_path / "scores1.csv").write_bytes(csv_bytes(rows(7)))   # what the name read as a pattern matches
    assert count(tmp_path / "what?.csv.gz") == (30, 1)
    assert count(tmp_path / "scores[1].csv") == (20, 1)
    assert count(f"file://{tmp_path}/what?.csv.gz") == (30, 1)
    assert count(tmp_path) == (57, 3)
    assert count(tmp_path / "scores*.csv") == (27, 2)


def test_a_folder_whose_name_holds_glob_characters_is_read_as_named_as_pandas_and_pyarrow_read_it(tmp_path):
    # `train 'runs[old]'` said "no files match ... (a symbolic link to a missing file?)": the name was a pattern
    import pyarrow.dataset as ds

    for name in ("data[1]", "q?x", "all*"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f.csv").write_bytes(csv_bytes(rows(4)))
        want = [f"file://{f}" for f in ds.dataset(str(tmp_path / name), format="csv").files]
        assert [f.url for f in plan_source([str(tmp_path / name)]).files] == want, name
    (tmp_path / "data1").mkdir()   # what data[1] matches as a pattern: still its own folder
    assert [f.url.rsplit("/", 2)[-2] for f in plan_source([str(tmp_path / "data[1]")]).files] == ["data[1]"]


def test_a_globs_wildcards_pass_over_hidden_folders_as_pythons_glob_does_and_named_ones_are_read(tmp_path):
    for rel, n in [("a.csv", 5), ("sub/b.csv", 7), (".ipynb_checkpoints/a-checkpoint.csv", 5),
                   ("_temporary/0/part-0.csv", 3), ("_staging/c.csv", 2), (".hid.csv", 1)]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(csv_bytes(rows(n)))

    def read(pattern):
        plan = plan_source([str(tmp_path / pattern)])
        return sorted(os.path.relpath(f.url.split("://", 1)[1], tmp_path) for f in plan.files)

    assert read("") == read("**/*.csv") == read("**") == ["a.csv", "sub/b.csv"]
    assert read("*/*.csv") == ["sub/b.csv"]
    assert read("_staging/*.csv") == ["_staging/c.csv"]
    assert read(".hid*") == [".hid.csv"]
    assert read(".*/*.csv") == [".ipynb_checkpoints/a-checkpoint.csv"]


def test_a_glob_for_data_files_never_reads_a_run_folders_tables_it_matches_without_their_markers(tmp_path):
    (tmp_path / "train.csv").write_bytes(csv_bytes(rows(9)))
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    for name in ("config.json", "model.json", "metrics.json"):
        (run / name).write_text("{}")
    (run / "history.csv").write_text("epoch,train_loss\n1,0.5\n")
    (run / "per_class.csv").write_text("label,precision\npos,1.0\n")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "history.csv").write_bytes(csv_bytes(rows(4)))   # a data file of that name, in no run

    def read(pattern):
        return sorted(os.path.relpath(f.url.split("://", 1)[1], tmp_path)
                      for f in plan_source([str(tmp_path / pattern)]).files)

    assert read("**/*.csv") == read("") == ["notes/history.csv", "train.csv"]
    assert read("*/*.csv") == ["notes/history.csv"]
    with pytest.raises(UserError, match="no files match"):
        read("*/*/*.csv")   # the run's tables alone: none is data


@pytest.mark.parametrize("log, named", [("_delta_log", "a Delta Lake table"), (".hoodie", "an Apache Hudi table")])
def test_a_table_folder_that_keeps_every_versions_files_is_refused_not_read_whole(tmp_path, log, named):
    # a Delta table overwritten once: its folder holds both versions' Parquet files, and reading
    # them all trained on the 100 rows the overwrite replaced beside the 100 the table now has
    table = tmp_path / "events"
    (table / log).mkdir(parents=True)
    (table / log / "00000000000000000001.json").write_text("{}\n")
    for version in (0, 1):
        pq.write_table(pa.table({"text": [f"v{version} row {i}" for i in range(100)], "label": ["a"] * 100}),
                       table / f"part-{version}.parquet")
    for given in (str(table), str(table / "**"), str(table) + "/", str(table / "*.parquet")):
        with pytest.raises(UserError) as e:
            plan_source([given])
        assert named in str(e.value) and "every version" in str(e.value), given
    assert len(plan_source([str(table / "part-1.parquet")]).files) == 1   # a file named is read


def test_a_run_folder_before_its_first_checkpoint_and_a_cache_entry_before_its_manifest_are_not_data(tmp_path):
    # `train data --out data`: a run still training (or killed before its first checkpoint) holds
    # config.json alone, read as the data's JSON Lines ("the first line is not JSON"); a cache entry
    # being written holds features.json beside its lock
    (tmp_path / "train.csv").write_bytes(csv_bytes(rows(5)))
    claim, running, entry, data = (tmp_path / n for n in ("claim", "running", "cache/0123abcd", "user"))
    for d in (claim, running, entry, data):
        d.mkdir(parents=True)
    (claim / "config.json").write_bytes(b"")   # the folder claimed, config.json not yet written
    (running / "config.json").write_text('{\n  "data": {},\n  "format_version": 2,\n  "written_by": "lancetnic_flow 0.1.0"\n}')
    (entry / "features.json").write_text('{"mode": "hashing"}')
    (entry / ".lock").write_bytes(b"")
    (data / "config.json").write_text('{"text": "a config of the data\'s own is data", "label": "x"}\n')
    plan = plan_source([str(tmp_path)])
    assert sorted(f.url.rsplit("/", 2)[-2] + "/" + f.url.rsplit("/", 1)[-1] for f in plan.files) == \
        [f"{tmp_path.name}/train.csv", "user/config.json"]


def test_a_run_folder_just_claimed_holding_its_writer_lock_is_not_data(tmp_path):
    # a trainer locks its folder as it claims it: the claim's empty config.json beside the .lock (or
    # S3's .lease) was taken for the user's data, since .lock is not one of a run's files
    (tmp_path / "train.csv").write_bytes(csv_bytes(rows(5)))
    for lock in (".lock", ".lease"):
        claim = tmp_path / f"claim{lock}"
        claim.mkdir()
        (claim / "config.json").write_bytes(b"")
        (claim / lock).write_text('{"pid": 1, "host": "h"}')
    assert [f.url.rsplit("/", 1)[-1] for f in plan_source([str(tmp_path)]).files] == ["train.csv"]


def test_an_empty_config_json_beside_data_leaves_that_data_in(tmp_path):
    # an empty config.json is a run's claim only in a folder holding nothing but a run's files:
    # beside the user's data it marked the folder as a run and its rows were left out unseen
    (tmp_path / "config.json").write_bytes(b"")
    (tmp_path / "train.csv").write_bytes(csv_bytes(rows(5)))
    plan = plan_source([str(tmp_path / "*.csv")])
    assert [f.url.rsplit("/", 1)[-1] for f in plan.files] == ["train.csv"]
    assert "train.csv" in [f.url.rsplit("/", 1)[-1] for f in plan_source([str(tmp_path)]).files]


def test_a_partitioned_table_glob_is_checked_for_a_log_in_the_folder_holding_its_partitions(tmp_path):
    # a Hive-partitioned Delta table: past TABLE_LOG_LOOKS partition folders only their common folder
    # is looked into (a look per folder costs a request each on an object store)
    table = tmp_path / "events"
    (table / "_delta_log").mkdir(parents=True)
    for day in range(40):
        (table / f"day={day}").mkdir()
        pq.write_table(pa.table({"text": ["a row"], "label": ["a"]}), table / f"day={day}" / "part-0.parquet")
    for glob in ("*", "day=1*"):   # 40 folders, 11
        with pytest.raises(UserError, match="a Delta Lake table"):
            plan_source([str(table / glob / "*.parquet")])
    (table / "_delta_log").rmdir()
    assert len(plan_source([str(table / "*" / "*.parquet")]).files) == 40


def test_a_file_whose_store_gives_no_change_token_counts_by_its_content(monkeypatch):
    # An HTTP server without ETag or Last-Modified: a file rewritten at the same size (labels
    # swapped) had the same fingerprint, and the run reused the old entry's labels.
    from fsspec.implementations.memory import MemoryFileSystem

    info = MemoryFileSystem.info
    monkeypatch.setattr(MemoryFileSystem, "info", lambda self, path, **kw: {
        k: v for k, v in info(self, path, **kw).items() if k != "created"})
    fs = fsspec.filesystem("memory")
    fs.pipe("/untokened/d.csv", b"text,label\nred sky,bb\nblue sea,aa\n")
    plan = plan_source(["memory://untokened/d.csv"])
    assert plan.files[0].version == ""
    before = plan.fingerprint()
    assert plan_source(["memory://untokened/d.csv"]).fingerprint() == before     # the same bytes: the same entry
    fs.pipe("/untokened/d.csv", b"text,label\nred sky,aa\nblue sea,bb\n")
    assert plan_source(["memory://untokened/d.csv"]).fingerprint() != before


# ---------------------------------------------------------------- files that are no regular files


def test_a_symlinked_file_in_a_folder_or_glob_is_read_with_its_targets_size_and_time(tmp_path):
    # fsspec lists a link found in a folder as "other": its rows were left out unseen
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_bytes(csv_bytes(rows(3)))
    (tmp_path / "elsewhere.csv").write_bytes(csv_bytes(rows(5)))
    os.symlink(tmp_path / "elsewhere.csv", tmp_path / "data" / "b.csv")
    target = os.stat(tmp_path / "elsewhere.csv")
    for url in (str(tmp_path / "data"), str(tmp_path / "data" / "*.csv")):
        files = plan_source([url]).files
        assert [f.url.rsplit("/", 1)[-1] for f in files] == ["a.csv", "b.csv"]
        assert files[1].size == target.st_size and f"mtime={target.st_mtime}" in files[1].version


@pytest.mark.parametrize("where", ["named", "folder", "glob"])
def test_a_pipe_as_data_is_refused_as_a_pipe_not_as_no_files_matching(tmp_path, where):
    # `train <(cat d.csv)` said "no files match /dev/fd/63 ... a symbolic link to a missing file?";
    # in a folder or glob a named pipe was left out unseen
    (tmp_path / "a.csv").write_bytes(csv_bytes(rows(3)))
    os.mkfifo(tmp_path / "p.csv")
    url = {"named": str(tmp_path / "p.csv"), "folder": str(tmp_path), "glob": str(tmp_path / "*.csv")}[where]
    with pytest.raises(UserError, match=r"p\.csv.* is a pipe .*not a regular file: the data is read more than once") \
            as e:
        plan_source([url], format="csv")
    assert "write what it gives to a file" in e.value.hint


def test_dev_null_and_a_link_to_nothing_in_a_folder_are_refused_saying_what_they_are(tmp_path):
    with pytest.raises(UserError, match="/dev/null is a character device"):
        plan_source(["/dev/null"], format="csv")
    (tmp_path / "a.csv").write_bytes(csv_bytes(rows(3)))
    os.symlink(tmp_path / "gone.csv", tmp_path / "b.csv")
    with pytest.raises(UserError, match=r"b\.csv \(found in .*\) is a symbolic link to a missing file"):
        plan_source([str(tmp_path)])


def test_data_named_by_this_process_descriptor_is_read_by_its_own_path(tmp_path):
    # `train /dev/stdin < data.csv`: a worker opening /dev/stdin opens its own stdin
    (tmp_path / "d.csv").write_bytes(csv_bytes(rows(3)))
    fd = os.open(tmp_path / "d.csv", os.O_RDONLY)
    try:
        plan = plan_source([f"/dev/fd/{fd}"])
    finally:
        os.close(fd)
    assert [f.url for f in plan.files] == [f"file://{tmp_path}/d.csv"]


def test_a_file_found_again_by_another_name_is_read_once_and_said(tmp_path):
    # a folder's latest.csv -> 2024-06.csv (or a hard link) doubled that file's rows once links were read
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "2024-06.csv").write_bytes(csv_bytes(rows(3)))
    os.symlink(tmp_path / "data" / "2024-06.csv", tmp_path / "data" / "latest.csv")
    os.link(tmp_path / "data" / "2024-06.csv", tmp_path / "data" / "same.csv")
    for urls in ([str(tmp_path / "data")], [str(tmp_path / "data" / "*.csv")]):
        plan = plan_source(urls)
        assert [f.url.rsplit("/", 1)[-1] for f in plan.files] == ["2024-06.csv"]
        assert sum("Read once:" in w and "2024-06.csv" in w for w in plan.warnings) == 2, plan.warnings
    # prediction writes a row per input row: two inputs naming one file are refused, as one named twice
    with pytest.raises(UserError, match=r"latest\.csv is .*2024-06\.csv by another name"):
        plan_source([str(tmp_path / "data" / "2024-06.csv"), str(tmp_path / "data" / "latest.csv")], in_order=True)


def test_a_symlinked_folder_in_a_folder_or_glob_is_read_through_the_link_as_pythons_glob_reads_it(tmp_path):
    # `data/*/*.csv` with data/sub a link said "no files match ... data/* does not exist"; a folder's linked
    # folder was named in a warning and not read, where Python's glob, pandas and pyarrow's datasets go through
    import glob

    (tmp_path / "data").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "data" / "a.csv").write_bytes(csv_bytes(rows(3)))
    (tmp_path / "other" / "b.csv").write_bytes(csv_bytes(rows(3)))
    os.symlink(tmp_path / "other", tmp_path / "data" / "sub")
    for url, pattern in ((tmp_path / "data", "data/**/*.csv"), (tmp_path / "data" / "*" / "*.csv", "data/*/*.csv"),
                         (tmp_path / "data" / "**" / "*.csv", "data/**/*.csv"), (tmp_path / "data" / "sub", "data/sub/*")):
        want = sorted(glob.glob(str(tmp_path / pattern), recursive=True))
        plan = plan_source([str(url)])
        assert [f.url.split("file://", 1)[-1] for f in plan.files] == want and plan.warnings == [], url
    assert len(want) == 1 and want[0].endswith("data/sub/b.csv")


def test_a_file_reached_through_a_linked_folder_and_directly_is_read_once_and_said(tmp_path):
    (tmp_path / "data" / "real").mkdir(parents=True)
    for name in ("a.csv", "b.csv"):
        (tmp_path / "data" / "real" / name).write_bytes(csv_bytes(rows(3)))
    os.symlink("real", tmp_path / "data" / "sub")
    os.symlink("real", tmp_path / "data" / ".snapshot")   # hidden: passed over unsaid, as Python's glob does
    for url in ("data", "data/*/*.csv", "data/**/*.csv"):
        plan = plan_source([str(tmp_path / url)])
        assert [f.url.rsplit("/", 2)[-2:] for f in plan.files] == [["real", "a.csv"], ["real", "b.csv"]], url
        assert plan.warnings == [f"Read once: the 2 files found in {tmp_path}/data/sub are those of {tmp_path}/data/real "
                                 "by other names (a symbolic link to a folder, or hard links)."], url


def test_a_link_back_to_a_folder_it_lies_in_is_not_followed_and_said_never_walked_without_end(tmp_path):
    (tmp_path / "data" / "real").mkdir(parents=True)
    (tmp_path / "data" / "real" / "a.csv").write_bytes(csv_bytes(rows(3)))
    os.symlink("..", tmp_path / "data" / "real" / "up")
    os.symlink("..", tmp_path / "data" / "real" / ".up")   # hidden: unsaid
    for url in ("data", "data/**/*.csv", "data/real"):
        plan = plan_source([str(tmp_path / url)])
        assert [f.url.rsplit("/", 1)[-1] for f in plan.files] == ["a.csv"], url
        assert any("real/up" in w and "(a symbolic link makes a cycle)" in w for w in plan.warnings), plan.warnings
        assert not any(".up" in w for w in plan.warnings), plan.warnings
    (tmp_path / "loop").mkdir()
    os.symlink(".", tmp_path / "loop" / "again")
    with pytest.raises(UserError, match=r"no files match .*loop; Not followed: .*loop/again is .*loop again"):
        plan_source([str(tmp_path / "loop")])


def test_a_sub_folder_that_cannot_be_listed_is_said_never_left_out_unsaid(tmp_path, monkeypatch):
    # fsspec's walk (and Python's glob) pass over a folder they may not list: its rows went missing unsaid
    (tmp_path / "data" / "locked").mkdir(parents=True)
    (tmp_path / "data" / "a.csv").write_bytes(csv_bytes(rows(3)))
    (tmp_path / "data" / "locked" / "b.csv").write_bytes(csv_bytes(rows(3)))
    real = os.scandir

    def scandir(path):
        if str(path).endswith("/locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    for url in ("data", "data/**/*.csv"):
        plan = plan_source([str(tmp_path / url)])
        assert [f.url.rsplit("/", 1)[-1] for f in plan.files] == ["a.csv"]
        assert plan.warnings == [f"Not read: {tmp_path}/data/locked cannot be listed (permission denied); its files "
                                 "are left out."], url


def test_a_glob_matching_folders_alone_reads_them_as_the_shells_expansion_would_and_folders_beside_files_are_said(
        tmp_path):
    # 'data/date=2024-*' (Hive partitions) said "no files match ... did you mean 'date=2024-01'?", where the
    # shell's expansion of the same pattern names the two folders and reads their files
    import glob

    for part in ("date=2023-12", "date=2024-01", "date=2024-02"):
        (tmp_path / "data" / part).mkdir(parents=True)
        (tmp_path / "data" / part / "part-0.csv").write_bytes(csv_bytes(rows(3)))
        (tmp_path / "data" / part / "_SUCCESS").write_bytes(b"")
    shell = glob.glob(str(tmp_path / "data" / "date=2024-*"))
    want = sorted(f for folder in shell for f in glob.glob(f"{folder}/*.csv"))
    for pattern in ("date=2024-*", "date=2024-*/"):
        plan = plan_source([str(tmp_path / "data" / pattern)])
        assert [f.url.split("file://", 1)[-1] for f in plan.files] == want and plan.warnings == [], pattern
    (tmp_path / "data" / "top.csv").write_bytes(csv_bytes(rows(2)))
    (tmp_path / "data" / "_tmp").mkdir()
    plan = plan_source([str(tmp_path / "data" / "*")])   # files and folders: the files, the folders said
    assert [f.url.rsplit("/", 1)[-1] for f in plan.files] == ["top.csv"]
    assert plan.warnings == [f"Not read: the folders {tmp_path}/data/date=2023-12, {tmp_path}/data/date=2024-01, "
                             f"{tmp_path}/data/date=2024-02 that {tmp_path}/data/* matches beside files: a glob reads "
                             "the files it matches (name the folders, or add /** to read their files)."]
    assert plan_source([str(tmp_path / "data" / "**")]).warnings == []


def test_a_local_file_or_folder_named_with_double_colons_is_planned_as_that_path(tmp_path):
    # fsspec reads "::" as a chain of protocols; pandas opens such a file
    folder = tmp_path / "fold::er"
    folder.mkdir()
    (folder / "co::lon.csv").write_bytes(b"text,label\nhello,a\n")
    for given in (folder / "co::lon.csv", folder, folder / "*.csv"):
        plan = plan_source([str(given)])
        assert [f.url.split("://")[-1] for f in plan.files] == [str(folder / "co::lon.csv")], given


@pytest.mark.parametrize("columns,fmt,hint", [
    (Columns(text=("text",), label="label"), "csv", "pass --text the name of the file's column that holds it, "
                                                    "e.g. --text review"),
    (Columns(text=("review",), label="label"), "csv", "e.g. --label sentiment"),
    (Columns(text=("text",), all_rows=True), "csv", "e.g. --text-column review"),   # predict --input
    (Columns(text=("review",), keep=("id",), all_rows=True), "csv", "e.g. --keep sentiment"),
    (Columns(text=("body",), label="sentiment"), "jsonl", "e.g. --text review"),
])
def test_a_missing_column_is_told_the_option_that_reads_it_and_a_column_of_the_file(tmp_path, columns, fmt, hint):
    """`train reviews.csv` on a header `review,sentiment` said "pass column names that exist in the
    file", naming neither --text nor a column to give it."""
    p = tmp_path / f"d.{fmt}"
    p.write_text("review,sentiment\ngreat movie,pos\n" if fmt == "csv" else
                 '{"review": "great movie", "sentiment": "pos"}\n')
    with pytest.raises(UserError) as e:
        check_columns(plan_source([str(p)]), columns)
    assert hint in e.value.cli[1]


@pytest.mark.parametrize("header,columns,hint", [
    ("id,review,sentiment", Columns(text=("text",), label="label"), "e.g. --text review"),
    ("id,review,sentiment", Columns(text=("review",), label="label"), "e.g. --label sentiment"),
    ("Unnamed: 0,user_id,body,stars", Columns(text=("text",), label="label"), "e.g. --text body"),
    ("Unnamed: 0,user_id,body,stars", Columns(text=("body",), target="price"), "e.g. --target stars"),
    ("id,review,sentiment", Columns(text=("review",), keep=("row",), all_rows=True), "e.g. --keep id"),
])
def test_a_hint_offers_the_column_whose_name_says_the_role_never_a_rows_id(tmp_path, header, columns, hint):
    """A header `id,review,sentiment` was hinted `e.g. --text id` and then `e.g. --label id`:
    followed, the run trained on row numbers as text, or learned a class a row."""
    p = tmp_path / "d.csv"
    p.write_text(header + "\n" + ",".join(["1"] * header.count(",")) + ",x\n")
    with pytest.raises(UserError) as e:
        check_columns(plan_source([str(p)]), columns)
    assert hint in e.value.cli[1]


@pytest.mark.parametrize("columns,hint", [
    (Columns(text=("text",), label="topic"), "e.g. --text 'review text'"),
    (Columns(text=("text",), all_rows=True), "e.g. --text-column 'review text'"),   # predict --input
])
def test_a_hinted_column_with_a_space_is_quoted_so_the_hint_pastes_as_one_word(tmp_path, columns, hint):
    """A spreadsheet's header `review text,topic` was hinted `e.g. --text review text`: typed as
    shown, the shell split it and the parser refused the stray `text`."""
    p = tmp_path / "d.csv"
    p.write_text("review text,topic\ngreat movie,pos\n")
    with pytest.raises(UserError) as e:
        check_columns(plan_source([str(p)]), columns)
    assert hint in e.value.cli[1]


def test_a_missing_column_is_told_the_option_in_the_callers_words(tmp_path):
    """train(cfg) on a header `review,sentiment` was told `pass --text … e.g. --text review`."""
    p = tmp_path / "d.csv"
    p.write_text("review,sentiment\ngreat movie,pos\n")
    with pytest.raises(UserError) as e:
        check_columns(plan_source([str(p)]), Columns(text=("text",), label="label"))
    assert e.value.hint == "pass text the name of the file's column that holds it, e.g. text='review'"
    assert e.value.workflow[1] == "pass text the name of the file's column that holds it, e.g. text: review"


def test_a_missing_path_is_told_the_folders_entries_but_its_hidden_ones(tmp_path):
    """`predict runs/frist` listed `.cache` first among the runs beside it: the shard cache, which no
    typo meant and a folder's reading passes over."""
    for name in (".cache", "_tmp", "first"):
        (tmp_path / name).mkdir()
    with pytest.raises(UserError) as e:
        plan_source([str(tmp_path / "frist.csv")])
    assert e.value.hint.endswith("contains: first") and "did you mean 'first'?" in e.value.hint
    with pytest.raises(UserError) as e:
        plan_source([str(tmp_path / ".cach")])
    assert "did you mean '.cache'?" in e.value.hint


def test_columns_read_in_two_roles_are_refused_naming_both_roles_as_the_reader_spells_them():
    say = {"text": "--text", "label": "the run's --label", "target": "--target", "numeric": "the run's --numeric"}
    with pytest.raises(UserError, match="the column 'label' is both --text and the run's --label: the model "
                                        "would read each row's label"):
        Columns(text=("label",), label="label").refuse_named_twice(say)
    with pytest.raises(UserError, match="'n' is both --text and the run's --numeric: .* words or as a number"):
        Columns(text=("body", "n"), numeric=("n",)).refuse_named_twice(say)
    with pytest.raises(UserError, match="'body' is --text twice"):
        Columns(text=("body", "body")).refuse_named_twice(say)
    Columns(text=("body",), label="label", numeric=("n",), keep=("body", "n")).refuse_named_twice(say)   # kept: fine


def test_a_column_in_a_hive_partition_folder_is_said_to_be_there_and_not_read():
    # A Parquet folder partitioned by label (label=sports/part-0.parquet) said "no column 'label'; the
    # file has columns: 'text'", which read as a file without labels: the labels are in the folders' names.
    from lancetnic_flow.data.sources import missing_column_error

    e = missing_column_error("file:///d/label=sports/part-0.parquet", "label", ["text"],
                             Columns(text=("text",), label="label"))
    assert "label=sports is a folder of its path: a Hive partition" in e.message
    assert "partitioning='hive'" in e.said("cli")[1]
    plain = missing_column_error("file:///d/year=2024/part-0.parquet", "label", ["text"],
                                 Columns(text=("text",), label="label"))
    assert "Hive" not in plain.message
