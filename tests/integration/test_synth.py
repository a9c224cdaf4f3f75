"""Tests for lancetnic_flow.synth: the streaming synthetic corpus writer."""
from __future__ import annotations

import gzip
import io
import json
import tracemalloc
import uuid

import fsspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from lancetnic_flow.data import synth
from lancetnic_flow.data.synth import infer_format, write_corpus
from lancetnic_flow.errors import UserError

COLUMNS = ["text", "label", "value", "target"]


def _read(path) -> pd.DataFrame:
    """Read a written corpus back with pyarrow / pandas, whatever its format."""
    fmt, comp = infer_format(str(path))
    if fmt == "parquet":
        return pq.read_table(path).to_pandas()
    with fsspec.open(str(path), "rb", compression=comp) as f:
        data = f.read()
    if fmt == "csv":
        return pcsv.read_csv(io.BytesIO(data)).to_pandas()
    if fmt == "tsv":
        opts = pcsv.ParseOptions(delimiter="\t", quote_char=False)
        return pcsv.read_csv(io.BytesIO(data), parse_options=opts).to_pandas()
    lines = data.decode("utf-8").split("\n")
    assert lines[-1] == ""  # every line ends with a newline
    lines = lines[:-1]
    if fmt == "jsonl":
        return pd.DataFrame([json.loads(x) for x in lines])
    if fmt == "text":
        return pd.DataFrame({"text": lines})
    assert fmt == "fasttext"
    label, text = zip(*(x.split(" ", 1) for x in lines))
    assert all(lab.startswith("__label__") for lab in label)
    return pd.DataFrame({"label": [lab[len("__label__"):] for lab in label], "text": text})


@pytest.mark.parametrize(
    "name, fmt, comp, columns",
    [
        ("c.csv", "csv", None, COLUMNS),
        ("c.csv.gz", "csv", "gzip", COLUMNS),
        ("c.csv.zst", "csv", "zstd", COLUMNS),
        ("c.tsv", "tsv", None, COLUMNS),
        ("c.jsonl", "jsonl", None, COLUMNS),
        ("c.ndjson.bz2", "jsonl", "bz2", COLUMNS),
        ("c.parquet", "parquet", None, COLUMNS),
        ("c.pq", "parquet", None, COLUMNS),
        ("c.txt", "text", None, ["text"]),
        ("c.ft", "fasttext", None, ["label", "text"]),
        ("c.fasttext.xz", "fasttext", "xz", ["label", "text"]),
    ],
)
def test_every_format_round_trips(tmp_path, name, fmt, comp, columns):
    path = tmp_path / name
    done = []
    info = write_corpus(str(path), 2_345, classes=3, seed=1, chunk_rows=1_000, progress=done.append)
    assert info["url"] == str(path) and info["rows"] == 2_345
    assert info["format"] == fmt and info["compression"] == comp
    assert info["bytes"] == path.stat().st_size > 0
    assert done == [2_345]  # 2,345 rows fit in one block
    df = _read(path)
    assert len(df) == 2_345
    assert sorted(df.columns) == sorted(columns)
    assert (df["text"].str.len() > 0).all()
    if "label" in columns:
        assert set(df["label"]) == {"sports", "tech", "politics"}
    if "value" in columns:
        assert df["value"].dtype == np.float64 and df["target"].dtype == np.float64


def test_all_formats_agree(tmp_path):
    ref = _read(_write(tmp_path / "a.parquet"))
    for name in ("a.csv", "a.tsv", "a.jsonl", "a.txt", "a.ft"):
        df = _read(_write(tmp_path / name))
        for col in df.columns:
            if col in ("value", "target"):
                np.testing.assert_allclose(df[col], ref[col])
            else:
                assert df[col].tolist() == ref[col].tolist(), (name, col)


def _write(path, rows=500, **kw):
    write_corpus(str(path), rows, **kw)
    return path


def test_text_shape_and_labels(tmp_path):
    df = _read(_write(tmp_path / "a.parquet", rows=12_000, classes=15, seed=3))
    n_tokens = df["text"].str.split().str.len()
    assert n_tokens.min() >= 5 and n_tokens.max() <= 200
    assert 30 < n_tokens.mean() < 50
    assert not df["text"].str.contains("[\t\n\"\\\\]").any()
    share = df["label"].value_counts(normalize=True)
    assert set(share.index) == set(synth.class_names(15))
    assert "sports" in share.index and "class_13" in share.index and "class_15" in share.index
    assert share.max() / share.min() < 2.0
    assert synth.class_names(13)[-1] == "class_13"
    # a large vocabulary of lowercase words
    words = pd.Series(df["text"].str.lower().str.findall(r"[a-z]+").explode().unique())
    assert len(words) > 10_000


def test_label_balance():
    tbl = pa.Table.from_batches(list(synth.generate_blocks(20_000, classes=4, seed=0)))
    share = tbl.column("label").to_pandas().value_counts(normalize=True)
    assert len(share) == 4 and share.min() >= 0.05
    assert share.max() > share.min() * 1.1  # mildly imbalanced, not uniform


def test_value_correlates_with_class():
    df = pa.Table.from_batches(list(synth.generate_blocks(10_000, classes=4, seed=0))).to_pandas()
    means = df.groupby("label")["value"].mean()
    assert means.max() - means.min() > 0.5


def test_deterministic_bytes(tmp_path):
    def blob(name, **kw):
        path = tmp_path / f"{uuid.uuid4().hex}-{name}"
        write_corpus(str(path), 10_500, **kw)  # two blocks, the last partial
        return path.read_bytes()

    for name in ("x.csv.gz", "x.parquet", "x.jsonl.zst"):
        a = blob(name, seed=5, chunk_rows=10_000)
        assert a == blob(name, seed=5, chunk_rows=20_000), name   # chunk size is not content
        assert a != blob(name, seed=6, chunk_rows=10_000), name
    a = blob("x.csv.gz", seed=5)
    assert a == blob("x.csv.gz", seed=5)
    assert a == blob("x.csv.gz", seed=5, chunk_rows=1)           # rounded up to one block
    assert blob("x.tsv", seed=5, classes=3) != blob("x.tsv", seed=5, classes=4)


def test_gzip_is_plain_gzip(tmp_path):
    path = _write(tmp_path / "a.csv.gz")
    text = gzip.decompress(path.read_bytes()).decode()
    assert text.startswith('text,label,value,target\n')
    assert text.count("\n") == 501


def test_learnable_but_not_trivial():
    pytest.importorskip("sklearn")
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression, Ridge

    df = pa.Table.from_batches(list(synth.generate_blocks(6_000, classes=4, seed=0))).to_pandas()
    train, test = df.iloc[:4_500], df.iloc[4_500:]
    vec = TfidfVectorizer()
    xtr, xte = vec.fit_transform(train["text"]), vec.transform(test["text"])
    acc = LogisticRegression(solver="saga", max_iter=1_000).fit(xtr, train["label"]).score(xte, test["label"])
    assert 0.70 < acc < 0.99, acc
    r2 = Ridge(alpha=1.0).fit(xtr, train["target"]).score(xte, test["target"])
    assert r2 > 0.3, r2


def test_constant_memory(tmp_path):
    path = tmp_path / "big.csv"
    synth._model(4, 0)  # build (and cache) the vocabulary and tables outside the measurement
    arrow = []  # pyarrow's own allocations are invisible to tracemalloc: sample them per chunk
    base = pa.total_allocated_bytes()
    tracemalloc.start()
    try:
        write_corpus(str(path), 300_000, chunk_rows=10_000,
                     progress=lambda n: arrow.append(pa.total_allocated_bytes() - base))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = path.stat().st_size
    assert size > 50_000_000 and len(arrow) == 30
    # one 10k-row chunk is ~1/30 of the file; accumulating rows would blow past these
    assert peak < size / 4, (peak, size)
    assert max(arrow) < size / 4, (max(arrow), size)
    assert pa.total_allocated_bytes() - base < 1_000_000  # nothing kept after the write


def test_progress_and_chunks(tmp_path):
    done = []
    write_corpus(str(tmp_path / "a.txt"), 45_000, chunk_rows=20_000, progress=done.append)
    assert done == [20_000, 40_000, 45_000]
    done.clear()
    write_corpus(str(tmp_path / "b.txt"), 45_000, chunk_rows=14_999, progress=done.append)
    assert done == [10_000, 20_000, 30_000, 40_000, 45_000]


def test_memory_filesystem():
    url = f"memory://synth-{uuid.uuid4().hex}/corpus.jsonl.gz"
    info = write_corpus(url, 1_234, classes=2)
    assert info["bytes"] > 0 and info["compression"] == "gzip"
    with fsspec.open(url, "rt", compression="gzip") as f:
        rows = [json.loads(line) for line in f]
    assert len(rows) == 1_234 and set(rows[0]) == set(COLUMNS)
    url2 = f"memory://synth-{uuid.uuid4().hex}/corpus.parquet"
    write_corpus(url2, 1_234)
    with fsspec.open(url2, "rb") as f:
        assert pq.read_table(f).num_rows == 1_234


def test_zero_rows(tmp_path):
    path = _write(tmp_path / "e.csv", rows=0)
    assert path.read_text() == 'text,label,value,target\n'
    assert pq.read_table(_write(tmp_path / "e.parquet", rows=0)).num_rows == 0
    assert _write(tmp_path / "e.jsonl", rows=0).read_bytes() == b""


def test_infer_format():
    assert infer_format("s3://b/x/data.CSV") == ("csv", None)
    assert infer_format("data.tsv.gz") == ("tsv", "gzip")
    assert infer_format("data.json") == ("jsonl", None)
    assert infer_format("data.ndjson.zst") == ("jsonl", "zstd")
    assert infer_format("data.pq") == ("parquet", None)
    assert infer_format("data.txt.xz") == ("text", "xz")
    assert infer_format("data.fasttext.bz2") == ("fasttext", "bz2")
    assert infer_format("https://h/data.csv?x=1") == ("csv", None)
    with pytest.raises(UserError) as e:
        infer_format("data.xlsx")
    assert ".csv" in str(e.value) and ".parquet" in str(e.value)


def test_errors(tmp_path):
    with pytest.raises(UserError, match="output format"):
        write_corpus(str(tmp_path / "x.docx"), 10)
    with pytest.raises(ValueError, match="parquet"):
        write_corpus(str(tmp_path / "x.parquet.gz"), 10)
    with pytest.raises(UserError) as e:   # said to write_corpus as its parameter, to make-data as its flag
        write_corpus(str(tmp_path / "x.csv"), -1)
    assert e.value.hint == "e.g. rows=100000" and e.value.said("cli")[1] == "e.g. --rows 100000"
    with pytest.raises(UserError):
        write_corpus(str(tmp_path / "x.csv"), 10, classes=0)
    with pytest.raises(UserError):
        write_corpus(str(tmp_path / "x.csv"), 10, format="xml")
    # an explicit format overrides the extension; compression still comes from it
    info = write_corpus(str(tmp_path / "x.data.gz"), 10, format="csv")
    assert info["format"] == "csv" and info["compression"] == "gzip"
    assert len(_read_csv_gz(tmp_path / "x.data.gz")) == 10


def _read_csv_gz(path):
    return pcsv.read_csv(io.BytesIO(gzip.decompress(path.read_bytes()))).to_pandas()
