"""Chaos on a real cluster: `dask scheduler` and `dask worker` processes whose
workers are SIGKILLed at random moments of a run, and a trainer whose
connection to the scheduler drops for a few seconds. The run must finish with
the same rows, features and metrics as an undisturbed run with the same seed."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from lancetnic_flow.data.synth import write_corpus

from servers import DroppingProxy, dask_processes

# Two runs whose workers and trainer are killed mid-epoch: minutes each.
pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A real scheduler and two `dask worker` processes (each a nanny that restarts
    its worker), shared by this file's tests: each starts once both workers are back."""
    with dask_processes(tmp_path_factory.mktemp("chaos-cluster"), "1.5GiB") as (address, nannies):
        yield address, nannies


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("chaos") / "train.csv"
    write_corpus(str(path), 40_000, classes=4, seed=11)
    return path


def both_workers(address: str) -> None:
    from distributed import Client

    with Client(address, timeout="30s") as c:
        c.wait_for_workers(2, timeout=60)


@pytest.fixture(scope="module")
def reference(cluster, corpus, tmp_path_factory) -> dict:
    """The undisturbed run both tests compare with (same corpus, seed and options)."""
    out = tmp_path_factory.mktemp("chaos-ref")
    ref = train(cluster[0], corpus, out, "ref")
    _, err = ref.communicate(timeout=300)
    assert ref.returncode == 0, err[-3000:]
    return outcome(out / "ref")


def train(address: str, corpus: Path, out: Path, name: str, *extra: str) -> subprocess.Popen:
    args = [sys.executable, "-m", "lancetnic_flow", "train", str(corpus), "--scheduler", address, "--epochs", "3",
            "--early-stopping", "0", "--blocksize", "512KiB", "--features", "tfidf", "--out", str(out), "--name", name,
            "--cache", str(out / f"cache-{name}"), "--quiet", *extra]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def outcome(run: Path) -> dict:
    m = json.loads((run / "metrics.json").read_text())
    return {"rows": m["rows"], "epochs": [(e["train_loss"], e["val_loss"], e["val_accuracy"]) for e in m["epochs"]],
            "features": json.loads((run / "features.json").read_text())}


def worker_processes(nannies: list[subprocess.Popen]) -> list[psutil.Process]:
    """The worker processes the nannies started (what dies when a worker dies)."""
    out = []
    for n in nannies:
        try:
            kids = psutil.Process(n.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        out += [k for k in kids if "spawn_main" in " ".join(k.cmdline())]
    return out


def test_workers_killed_at_random_moments_change_nothing_in_the_result(cluster, corpus, reference, tmp_path):
    address, nannies = cluster
    both_workers(address)
    rng = random.Random(7)
    run = train(address, corpus, tmp_path, "chaos")
    kills = []
    start = time.monotonic()
    while run.poll() is None and len(kills) < 5:
        time.sleep(rng.uniform(1.0, 2.5))
        alive = worker_processes(nannies)
        if alive and run.poll() is None:
            victim = rng.choice(alive)
            try:
                os.kill(victim.pid, signal.SIGKILL)
                kills.append(round(time.monotonic() - start, 1))
            except ProcessLookupError:
                pass
    _, err = run.communicate(timeout=300)
    assert run.returncode == 0, f"kills at {kills} s\n" + err[-3000:]
    assert kills, "no worker was killed while the run lasted"
    assert outcome(tmp_path / "chaos") == reference, f"kills at {kills} s"


def test_a_trainer_whose_scheduler_connection_drops_for_seconds_finishes_the_same_run(cluster, corpus, reference,
                                                                                      tmp_path):
    address, _ = cluster
    both_workers(address)
    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    with DroppingProxy(host, int(port)) as proxy:
        run = train(f"tcp://127.0.0.1:{proxy.port}", corpus, tmp_path, "dropped")
        dropped = threading.Event()

        def drop_once() -> None:
            # Once the trainer is connected and working: cut it off for 3 seconds.
            deadline = time.monotonic() + 60
            while proxy.connections() == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(2.0)
            proxy.drop(3.0)
            dropped.set()

        t = threading.Thread(target=drop_once, daemon=True)
        t.start()
        _, err = run.communicate(timeout=300)
        t.join(5)
    assert dropped.is_set()
    assert run.returncode == 0, err[-3000:]
    assert outcome(tmp_path / "dropped") == reference
