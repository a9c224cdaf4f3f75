"""Two runs sharing one `--cache` at the same time, as real CLI processes on
LocalClusters of their own: both finish, neither reads a shard the other
wrote or overwrote, and each ends with what it would have had if the two
had run one after the other.

The runs read the same data with the same feature options, so they share a
cache entry, and cut it into partitions of different sizes (as two machines
with different memory plans would): each writes shards its own way under
the same names, which is what made them rebuild each other's shards."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from lancetnic_flow.data.synth import write_corpus

pytestmark = pytest.mark.slow

# Block sizes that cut the corpus (~2.9 MB) into 23 and 6 partitions.
BLOCKSIZES = {"a": "128KiB", "b": "512KiB"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("shared-cache") / "train.csv"
    write_corpus(str(path), 10_000, classes=4, seed=21)
    return path


def train(corpus: Path, out: Path, name: str, cache: Path) -> subprocess.Popen:
    args = [sys.executable, "-m", "lancetnic_flow", "train", str(corpus), "--run-on", "cluster", "--workers", "1",
            "--memory-budget", "3GiB", "--blocksize", BLOCKSIZES[name], "--epochs", "2", "--early-stopping", "0",
            "--out", str(out), "--name", name, "--cache", str(cache), "--json-log", str(out / f"{name}.jsonl"),
            "--quiet"]
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


def test_two_runs_writing_one_cache_entry_at_once_finish_as_if_run_one_after_the_other(corpus, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    runs = {n: train(corpus, shared, n, shared / "cache") for n in ("a", "b")}
    for p in runs.values():
        finish(p)
    logs = {n: events(shared, n) for n in runs}
    damaged = [e["message"] for n in runs for e in logs[n] if e["event"] == "warning" and "damaged" in e["message"]]
    assert not damaged, damaged
    # Every shard the entry's manifest lists is whole, and no write was left half-done.
    (entry,) = (shared / "cache").iterdir()
    manifest = json.loads((entry / "manifest.json").read_text())
    for s in (s for r in manifest["results"] for s in r["shards"]):
        data = Path(s["url"]).read_bytes()
        assert (len(data), zlib.crc32(data)) == (s["bytes"], s["crc32"]), s["url"]
    assert not [p for p in (shared / "cache").rglob("*") if ".tmp-" in p.name]
    # The run that found the entry held by the other waited for it, then read it.
    waited = [n for n in runs if any(e["event"] == "waiting" for e in logs[n])]
    assert len(waited) == 1, waited
    second = waited[0]
    first = "a" if second == "b" else "b"
    assert any(e["event"] == "fitted" and e.get("cached") for e in logs[second])

    # The same two runs one after the other, in a cache of their own.
    alone = tmp_path / "alone"
    alone.mkdir()
    for n in (first, second):
        finish(train(corpus, alone, n, alone / "cache"))
    assert outcome(shared / first) == outcome(alone / first)
    assert outcome(shared / second) == outcome(alone / second)
