"""Reading from real loopback servers (tests/integration/servers.py): an S3
(moto) server in its own process — gzip, JSON Lines and Parquet under a
prefix, missing buckets and keys in words — and an HTTP server with byte
ranges; an unreachable host is a user error naming it."""
from __future__ import annotations

import gzip
import io
import json

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lancetnic_flow.data.checks import check_columns
from lancetnic_flow.data.readers import read_partition
from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.errors import UserError

from servers import http_server, s3_server

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


def test_s3_gzip_jsonl_parquet_prefix():
    with s3_server() as so:
        fs = fsspec.filesystem("s3", **so)
        fs.call_s3("create_bucket", Bucket="bucket")  # s3fs.mkdir sends a us-east-1 constraint moto rejects
        rs = rows(40)
        fs.pipe("bucket/in/a.csv.gz", gzip.compress(csv_bytes(rs)))
        fs.pipe("bucket/in/b.jsonl", jsonl_bytes(rs))
        buf = io.BytesIO()
        pq.write_table(pa.table({"text": [r["text"] for r in rs],
                                 "label": [r["label"] for r in rs],
                                 "score": [r["score"] for r in rs]}), buf, row_group_size=15)
        fs.pipe("bucket/in/c.parquet", buf.getvalue())
        plan = plan_source(["s3://bucket/in/*"], storage_options=so, blocksize=500)
        assert [f.url for f in plan.files] == ["s3://bucket/in/a.csv.gz",
                                               "s3://bucket/in/b.jsonl",
                                               "s3://bucket/in/c.parquet"]
        assert all(f.version for f in plan.files)
        assert len(plan.warnings) == 1
        check_columns(plan, COLS, storage_options=so)
        t, skipped, n = read_all(plan, COLS, storage_options=so, chunk_bytes=500)
        assert t.num_rows == 120 and skipped == {}
        assert t.column("text").to_pylist() == [r["text"] for r in rs] * 3
        with pytest.raises(UserError) as e:
            plan_source(["s3://no-such-bucket/x.csv"], storage_options=so)
        assert "no-such-bucket" in str(e.value)
        with pytest.raises(UserError, match="bucket/in/zzz"):
            plan_source(["s3://bucket/in/zzz*.csv"], storage_options=so)


def test_http_byte_ranges(tmp_path):
    rs = rows(200)
    data = csv_bytes(rs)
    (tmp_path / "d.csv").write_bytes(data)
    (tmp_path / "d.jsonl.gz").write_bytes(gzip.compress(jsonl_bytes(rs)))
    with http_server(tmp_path) as base:
        plan = plan_source([f"{base}/d.csv"], blocksize=1000)
        assert plan.files[0].url == f"{base}/d.csv" and plan.files[0].size == len(data)
        assert len(plan.partitions) > 5
        t, skipped, n = read_all(plan, COLS)
        assert t.column("text").to_pylist() == [r["text"] for r in rs] and n == 200
        plan = plan_source([f"{base}/d.jsonl.gz"])
        t, _, _ = read_all(plan, COLS, chunk_bytes=2000)
        assert t.num_rows == 200
        with pytest.raises(UserError) as e:
            plan_source([f"{base}/missing.csv"])
        assert "missing.csv" in str(e.value)


def test_unreachable_http():
    with pytest.raises(UserError) as e:
        plan_source(["http://127.0.0.1:9/x.csv"])
    assert "127.0.0.1:9" in str(e.value)


def test_an_s3_folder_reads_its_files_whatever_their_keys_hold_and_never_its_folder_markers():
    with s3_server() as so:
        fs = fsspec.filesystem("s3", **so)
        fs.call_s3("create_bucket", Bucket="bucket")
        for marker in ("in/", "in/sub/"):   # what a console's "Create folder" writes: a zero-byte key
            fs.call_s3("put_object", Bucket="bucket", Key=marker, Body=b"")
        rs = rows(30)
        fs.pipe("bucket/in/what?.csv.gz", gzip.compress(csv_bytes(rs[:10])))
        fs.pipe("bucket/in/sub/scores[1].csv", csv_bytes(rs[10:]))
        fs.pipe("bucket/in/sub/scores1.csv", csv_bytes(rs[:3]))   # what scores[1].csv read as a pattern matches
        fs.invalidate_cache()
        for url, n in [("s3://bucket/in", 33), ("s3://bucket/in/", 33), ("s3://bucket/in/what?.csv.gz", 10),
                       ("s3://bucket/in/sub/scores[1].csv", 20)]:
            plan = plan_source([url], storage_options=so)
            assert all(not f.url.endswith("/") for f in plan.files), url
            check_columns(plan, COLS, storage_options=so)
            t, skipped, read = read_all(plan, COLS, storage_options=so)
            assert (read, t.num_rows, skipped) == (n, n, {}), url


def test_a_process_planning_s3_data_again_sees_objects_rewritten_and_added_by_another_writer_since():
    # s3fs keeps a process's listings: a second plan in the same process (an estimator fitted
    # again, a workflow, a notebook) saw a glob's object with its old ETag (the old cache entry
    # reused) and no object added since (its rows never read).
    with s3_server() as so:
        ours = fsspec.filesystem("s3", **so)
        other = fsspec.filesystem("s3", skip_instance_cache=True, **so)   # another process's writer
        ours.call_s3("create_bucket", Bucket="bucket")
        other.pipe("bucket/data/a.csv", csv_bytes(rows(10)))
        for n, url in enumerate(("s3://bucket/data/*.csv", "s3://bucket/data/a.csv")):
            before = plan_source([url], storage_options=so)
            ours.glob("bucket/data/*.csv")   # what any earlier listing of this process leaves behind
            other.pipe("bucket/data/a.csv", csv_bytes(rows(10)[::-1] if n == 0 else rows(10)))   # the same size
            assert plan_source([url], storage_options=so).fingerprint() != before.fingerprint()
        other.pipe("bucket/data/b.csv", csv_bytes(rows(5)))
        assert [f.url for f in plan_source(["s3://bucket/data/*.csv"], storage_options=so).files] == [
            "s3://bucket/data/a.csv", "s3://bucket/data/b.csv"]
