"""Remote storage for real: a moto S3 server and a Range-capable HTTP server
on loopback, driven through the CLI in a subprocess (its Dask workers open
the URLs themselves)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest

from lancetnic_flow.data.synth import write_corpus

from helpers import charts_drawn
from servers import http_server, s3_cli_args, s3_server

CLI = [sys.executable, "-m", "lancetnic_flow"]
SMALL = ["--workers", "1", "--memory-budget", "3GiB", "--epochs", "3", "--batch-size", "64", "--max-features", "5000", "--hidden", "32"]


def run(args, **kw):
    return subprocess.run(CLI + args, capture_output=True, text=True, timeout=240, **kw)


@pytest.fixture(scope="module")
def s3():
    with s3_server() as opts:
        fs = fsspec.filesystem("s3", **opts)
        fs.call_s3("create_bucket", Bucket="corpus")
        for i, ext in enumerate(["csv.gz", "jsonl", "parquet"]):
            write_corpus(f"s3://corpus/train/part-{i}.{ext}", 1500, classes=3, seed=i, storage_options=opts)
        yield opts


@pytest.fixture(scope="module")
def s3_run(s3, tmp_path_factory):
    out = tmp_path_factory.mktemp("s3runs")
    r = run(["train", "s3://corpus/train/*", *s3_cli_args(s3), *SMALL, "--out", str(out), "--name", "s3",
             "--cache", "s3://corpus/cache"])
    assert r.returncode == 0, r.stderr
    return out / "s3", r


def test_train_reads_gzip_csv_jsonl_and_parquet_objects_from_one_s3_glob(s3_run):
    run_dir, r = s3_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["rows"]["read"] == 4500
    assert metrics["rows"]["read"] == metrics["rows"]["trained"] + metrics["rows"]["validated"]
    assert metrics["val_accuracy"] > 0.6
    assert "compressed" in r.stderr and "part-0.csv.gz" in r.stderr, "the one-worker warning names the file"


def test_shard_cache_and_manifest_live_on_s3(s3, s3_run):
    fs = fsspec.filesystem("s3", **s3)
    assert len(fs.glob("corpus/cache/*/manifest.json")) == 1
    assert fs.glob("corpus/cache/*/shards/*.train.npz")
    assert fs.glob("corpus/cache/*/features.json")


def test_credentials_given_as_storage_options_stay_out_of_the_run_folder(s3_run):
    run_dir, r = s3_run
    for name in ("config.json", "metrics.json"):
        assert "testing" not in (run_dir / name).read_text()
    assert "testing" not in r.stdout + r.stderr


def test_batch_prediction_reads_and_writes_s3(s3, s3_run):
    run_dir, _ = s3_run
    r = run(["predict", str(run_dir), "--input", "s3://corpus/train/part-0.csv.gz",
             "--output", "s3://corpus/out/pred.jsonl", *s3_cli_args(s3), "--workers", "1", "--memory-budget", "3GiB"])
    assert r.returncode == 0, r.stderr
    fs = fsspec.filesystem("s3", **s3)
    lines = fs.cat("corpus/out/pred.jsonl").decode().splitlines()
    assert len(lines) == 1500
    assert {"text", "predicted", "probability"} <= set(json.loads(lines[0]))


def test_missing_bucket_is_a_user_error_naming_the_url(s3, tmp_path):
    r = run(["train", "s3://no-such-bucket/data/*.csv", *s3_cli_args(s3), *SMALL, "--out", str(tmp_path)])
    assert r.returncode == 2
    assert "no-such-bucket" in r.stderr and "Traceback" not in r.stderr


def test_train_from_http_reads_byte_ranges(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    write_corpus(str(root / "train.csv"), 3000, classes=3, seed=4)
    with http_server(root) as base:
        r = run(["train", f"{base}/train.csv", *SMALL, "--blocksize", "64KiB", "--out", str(tmp_path / "runs"),
                 "--name", "h"])
    assert r.returncode == 0, r.stderr
    metrics = json.loads((tmp_path / "runs" / "h" / "metrics.json").read_text())
    assert metrics["rows"]["read"] == 3000


def test_s3_workflow_runs_against_the_loopback_server(s3, tmp_path):
    sets = [f"storage_option.key={s3['key']}", f"storage_option.secret={s3['secret']}",
            f"storage_option.client_kwargs.endpoint_url={s3['client_kwargs']['endpoint_url']}",
            f"out={tmp_path}", "epochs=2", "batch_size=64", "workers=1", "memory_budget=3GiB"]
    r = subprocess.run(CLI + ["run", str(Path(__file__).resolve().parents[2] / "workflows" / "s3.yaml"),
                              *sum([["--set", s] for s in sets], [])], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    metrics = json.loads((tmp_path / "s3" / "metrics.json").read_text())
    assert metrics["rows"]["read"] == 1500
    assert "testing" not in (tmp_path / "s3" / "config.json").read_text()


# ---------------------------------------------------------------- the run folder itself on S3

@pytest.fixture(scope="module")
def s3_out_run(s3):
    """A run trained from S3 whose run folder is on S3 too (--out s3://...)."""
    r = run(["train", "s3://corpus/train/*", *s3_cli_args(s3), *SMALL, "--out", "s3://corpus/runs", "--name", "remote",
             "--cache", "s3://corpus/cache"])
    assert r.returncode == 0, r.stderr
    assert charts_drawn(r.stdout + r.stderr), "the charts are drawn after the command, into S3 as well"
    return "s3://corpus/runs/remote", r


def test_train_writes_the_run_folder_and_its_plots_to_s3_with_the_data_storage_options(s3, s3_out_run):
    url, r = s3_out_run
    fs = fsspec.filesystem("s3", **s3)
    names = {p.rsplit("/", 1)[-1] for p in fs.ls("corpus/runs/remote")}
    assert {"config.json", "features.json", "model.json", "model.safetensors", "metrics.json", "history.csv"} <= names
    metrics = json.loads(fs.cat("corpus/runs/remote/metrics.json"))
    assert metrics["val_accuracy"] > 0.6
    assert {"loss.png", "accuracy.png", "confusion_matrix.png", "per_class.csv"} <= set(metrics["plots"]) <= names
    assert fs.cat("corpus/runs/remote/loss.png")[:8] == b"\x89PNG\r\n\x1a\n"
    assert "testing" not in fs.cat("corpus/runs/remote/config.json").decode(), "credentials stay out"
    assert url in r.stderr, "the CLI names the run by its URL"


def test_a_run_folder_on_s3_predicts_here_and_evaluates_on_the_workers(s3, s3_out_run, client):
    import pickle

    from lancetnic_flow.data.sources import Columns, plan_source
    from lancetnic_flow.runs.evaluate import evaluate_files
    from lancetnic_flow.runs.folder import RunFolder
    from lancetnic_flow.runs.predict import Predictor

    url, _ = s3_out_run
    predictor = Predictor(url, storage_options=s3)
    predictions = predictor.predict(["one text", "and another"])
    assert len(predictions) == 2 and {p["label"] for p in predictions} <= set(predictor.labels)
    # A RunFolder (what train() returns) carries its storage options, also
    # through the pickling that ships it to the workers: no run_options needed.
    folder = pickle.loads(pickle.dumps(RunFolder(url, s3)))
    assert folder == url and folder.storage_options == s3 and "testing" not in json.dumps(folder)
    src = plan_source(["s3://corpus/train/part-1.jsonl"], storage_options=s3, blocksize=1 << 20)
    scores, _ = evaluate_files(client, folder, src, Columns(text=("text",), label="label"), storage_options=s3,
                               run_options={}, chunk_bytes=1 << 20, window=2)
    assert scores["rows"]["evaluated"] == 1500 and scores["accuracy"] > 0.6


def test_cli_predicts_and_evaluates_with_a_run_folder_on_s3(s3, s3_out_run):
    url, _ = s3_out_run
    p = run(["predict", url, "--text", "one text", *s3_cli_args(s3)])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.splitlines()[0])["label"]
    e = run(["evaluate", url, "s3://corpus/train/part-1.jsonl", "--json", "--workers", "1",
             "--memory-budget", "3GiB", *s3_cli_args(s3)])
    assert e.returncode == 0, e.stderr
    scores = json.loads(e.stdout)
    assert scores["rows"]["evaluated"] == 1500 and scores["accuracy"] > 0.6


def test_a_missing_key_in_an_existing_bucket_is_a_user_error_naming_the_url(s3, tmp_path):
    r = run(["train", "s3://corpus/train/no-such-object.csv", *s3_cli_args(s3), *SMALL, "--out", str(tmp_path)])
    assert r.returncode == 2, r.stderr
    assert "s3://corpus/train/no-such-object.csv" in r.stderr and "Traceback" not in r.stderr


def test_bad_credentials_are_a_user_error_not_a_traceback(tmp_path):
    """A moto server that checks signatures (INITIAL_NO_AUTH_ACTION_COUNT=0): unknown keys are refused."""
    import os
    import socket
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
                              env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.monotonic()
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() - t0 < 30, "moto_server did not start"
                time.sleep(0.2)
        bad = {"key": "AKIAWRONG", "secret": "wrong",
               "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}"}}
        r = run(["train", "s3://corpus/train.csv", *s3_cli_args(bad), *SMALL, "--out", str(tmp_path)])
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert r.returncode == 2, r.stderr
    assert "s3://corpus/train.csv" in r.stderr and "credentials" in r.stderr and "Traceback" not in r.stderr
    assert "AKIAWRONG" not in r.stderr   # the key is not echoed
