"""Two runs sharing one `--cache` at the same time, as real CLI processes on
LocalClusters of their own: both finish, neither reads a shard the other
wrote or overwrote, and each ends with what it would have had if the two
had run one after the other.

The runs read the same data with the same feature options, so they share a
cache entry, and cut it into partitions of different sizes (as two machines
with different memory plans would): each writes shards its own way under
the same names, which is what made them rebuild each other's shards.

The same on S3 (a moto server on loopback), where the entry's writer holds
a lease object taken by a conditional write (dataflow/entry_lease.py); and
that lease, held by a process that was SIGKILLed, is taken over once it has
not been renewed for its TTL, while a live holder's never is."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import fsspec
import pytest

from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.dataflow.entry_lease import take_lease

from servers import s3_cli_args, s3_server

pytestmark = pytest.mark.slow

# Block sizes that cut the corpus (~2.9 MB) into 23 and 6 partitions.
BLOCKSIZES = {"a": "128KiB", "b": "512KiB"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("shared-cache") / "train.csv"
    write_corpus(str(path), 10_000, classes=4, seed=21)
    return path


def train(corpus: Path | str, out: Path, name: str, cache: Path | str, *more: str) -> subprocess.Popen:
    args = [sys.executable, "-m", "lancetnic_flow", "train", str(corpus), "--run-on", "cluster", "--workers", "1",
            "--memory-budget", "3GiB", "--blocksize", BLOCKSIZES[name], "--epochs", "2", "--early-stopping", "0",
            "--out", str(out), "--name", name, "--cache", str(cache), "--json-log", str(out / f"{name}.jsonl"),
            "--quiet", *more]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p: subprocess.Popen) -> None:
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]


def events(out: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (out / f"{name}.jsonl").read_text().splitlines()]


def outcome(run: Path) -> dict:
    """What a run ended with: rows, every epoch's losses and accuracy, and its weights' digest."""
    m = json.loads((run / "metrics.json").read_text())
    return {"rows": m["rows"], "val_accuracy": m["val_accuracy"],
            "epochs": [(e["train_loss"], e["val_loss"], e["val_accuracy"]) for e in m["epochs"]],
            "weights": hashlib.sha256((run / "model.safetensors").read_bytes()).hexdigest()}


def one_waited_for_the_other(runs: dict, out: Path, fs, cache: str) -> tuple[str, str]:
    """Both runs finished, neither found a shard damaged, every shard the entry's manifest
    lists is whole, no write was left half-done, and one run waited for the other's entry,
    then read it: (the run that wrote the entry, the one that waited)."""
    for p in runs.values():
        finish(p)
    logs = {n: events(out, n) for n in runs}
    damaged = [e["message"] for n in runs for e in logs[n] if e["event"] == "warning" and "damaged" in e["message"]]
    assert not damaged, damaged
    fs.invalidate_cache()
    (entry,) = fs.ls(cache)
    manifest = json.loads(fs.cat_file(f"{entry}/manifest.json"))
    for s in (s for r in manifest["results"] for s in r["shards"]):
        data = fs.cat_file(s["url"])
        assert (len(data), zlib.crc32(data)) == (s["bytes"], s["crc32"]), s["url"]
    assert not [p for p in fs.find(cache, withdirs=True) if ".tmp-" in p]
    waited = [n for n in runs if any(e["event"] == "waiting" for e in logs[n])]
    assert len(waited) == 1, waited
    assert any(e["event"] == "fitted" and e.get("cached") for e in logs[waited[0]])
    return ("a" if waited[0] == "b" else "b"), waited[0]


def test_two_runs_writing_one_cache_entry_at_once_finish_as_if_run_one_after_the_other(corpus, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    runs = {n: train(corpus, shared, n, shared / "cache") for n in ("a", "b")}
    first, second = one_waited_for_the_other(runs, shared, fsspec.filesystem("file"), str(shared / "cache"))

    # The same two runs one after the other, in a cache of their own.
    alone = tmp_path / "alone"
    alone.mkdir()
    for n in (first, second):
        finish(train(corpus, alone, n, alone / "cache"))
    assert outcome(shared / first) == outcome(alone / first)
    assert outcome(shared / second) == outcome(alone / second)


@pytest.fixture(scope="module")
def s3():
    with s3_server() as opts:
        fsspec.filesystem("s3", **opts).call_s3("create_bucket", Bucket="shared")
        write_corpus("s3://shared/train.csv", 10_000, classes=4, seed=21, storage_options=opts)
        yield opts


def test_two_runs_writing_one_s3_cache_entry_at_once_finish_as_if_run_one_after_the_other(s3, tmp_path):
    fs = fsspec.filesystem("s3", **s3)
    runs = {n: train("s3://shared/train.csv", tmp_path, n, "s3://shared/cache", *s3_cli_args(s3)) for n in "ab"}
    # Before the lease neither waited: both wrote the entry, each cutting it its own way.
    first, second = one_waited_for_the_other(runs, tmp_path, fs, "shared/cache")
    assert not fs.exists(f"{fs.ls('shared/cache')[0]}/.lease")     # released once the manifest was written

    alone = tmp_path / "alone"
    alone.mkdir()
    for n in (first, second):
        finish(train("s3://shared/train.csv", alone, n, "s3://shared/alone-cache", *s3_cli_args(s3)))
    assert outcome(tmp_path / first) == outcome(alone / first)
    assert outcome(tmp_path / second) == outcome(alone / second)


HOLDER = """
import json, sys, time
import fsspec
from lancetnic_flow.dataflow.entry_lease import take_lease
held = take_lease(fsspec.filesystem("s3", **json.loads(sys.argv[1])), "shared/leases/e", ttl=float(sys.argv[2]))
print("held", flush=True)
time.sleep(600)
"""


def test_an_s3_lease_is_kept_by_a_live_holder_and_taken_over_once_a_killed_ones_ttl_has_passed(s3):
    # A TTL is time as the waiter's clock tells it: a holder (or this process, where moto serves)
    # held off the CPU for a TTL loses its lease by design, and at 1.5 s a busy host's stall did that.
    ttl = 3.0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, json.dumps(s3), str(ttl)], stdout=subprocess.PIPE,
                              text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        fs = fsspec.filesystem("s3", **s3)
        waits: list[str] = []
        t0 = time.monotonic()
        # A live holder renews every ttl / 6 s: a waiter does not take its lease over in 3 TTLs.
        got: list = []
        waiter = threading.Thread(target=lambda: got.append(take_lease(fs, "shared/leases/e", waits.append,
                                                                       poll=0.1, ttl=ttl)), daemon=True)
        waiter.start()
        waiter.join(3 * ttl)
        assert not got and waits and f"process {holder.pid}" in waits[0], (got, waits)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        killed = time.monotonic()
        waiter.join(30)
        assert got and got[0] is not None
        # Taken over once the killed holder's last renewal is ttl old, not before, and not much later.
        assert ttl / 2 <= time.monotonic() - killed < ttl + 5, time.monotonic() - t0
        got[0].close()
        assert not fs.exists("shared/leases/e/.lease")
    finally:
        holder.kill()
        holder.wait()
