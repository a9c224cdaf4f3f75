"""The Dask scheduler lost in the middle of a `--scheduler` run: real
`dask scheduler` and `dask worker` processes on loopback, the scheduler
SIGKILLed while epoch 1 still featurises on the cluster. The run must end in
bounded time with one message and exit 2, leave a checkpoint, and `--resume`
on a new scheduler must continue from it."""
from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.training.checkpoints import load_checkpoint

from helpers import cli, cli_signalled_at
from servers import scheduler_address, stop_processes

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
BATCH = 512
WAIT_S = 3


@contextlib.contextmanager
def scheduler_and_worker(folder: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """A `dask scheduler` on loopback and one `dask worker`: the address and the scheduler's process."""
    from distributed import Client

    folder.mkdir()
    sched_file = folder / "scheduler.json"
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(sched_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        address = scheduler_address(sched_file)
        procs.append(subprocess.Popen([str(BIN / "dask"), "worker", address, "--nworkers", "1", "--nthreads", "1",
                                       "--memory-limit", "1GiB", "--no-dashboard", "--local-directory",
                                       str(folder / "w")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(address, timeout="30s") as c:
            c.wait_for_workers(1, timeout=60)
        yield address, procs[0]
    finally:
        stop_processes(procs)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("scheduler-lost") / "train.csv"
    write_corpus(str(path), 20_000, classes=4, seed=5)
    return path


def events(log: Path) -> list[dict]:
    out = []
    for line in log.read_text().splitlines() if log.exists() else []:
        with contextlib.suppress(ValueError):   # the line being written
            out.append(json.loads(line))
    return out


def train_losing_the_scheduler(args: list, scheduler: subprocess.Popen) -> subprocess.Popen:
    """``train ARGS``, which kills its ``scheduler`` as it reports its first checkpoint. (Killed
    by the test once it read the checkpoint in the log, the scheduler outlived the run's
    last epochs, two seconds later, when the test waited for the CPU.)"""
    return cli_signalled_at(["train", *map(str, args)], None, {"event": "checkpoint"}, [signal.SIGKILL],
                            target=scheduler.pid)


def lose_the_scheduler(p: subprocess.Popen, log: Path, scheduler: subprocess.Popen, address: str, run: Path) -> None:
    """The run ``p`` killed its scheduler once it had written a checkpoint; the
    run must end within seconds in one message naming the scheduler and the
    resume command, with exit 2 and no traceback."""
    deadline = time.monotonic() + 180
    while scheduler.poll() is None:
        assert p.poll() is None and time.monotonic() < deadline, "no checkpoint killed the scheduler"
        time.sleep(0.02)
    lost_at = time.monotonic()
    out, err = p.communicate(timeout=120)
    took = time.monotonic() - lost_at
    said = out + err
    assert p.returncode == 2, said[-3000:]
    assert took < WAIT_S + 30, f"the run took {took:.0f} s to end after its scheduler was killed"
    assert "Traceback" not in said and said.count("error:") == 1, said[-3000:]
    assert f"lost the Dask scheduler at {address}" in said and f"lancetnic-flow train --resume {run}" in said, said


def test_a_lost_scheduler_ends_the_run_in_seconds_with_exit_2_and_a_checkpoint_resume_continues(corpus, tmp_path):
    run, log = tmp_path / "run", tmp_path / "lost.jsonl"
    with scheduler_and_worker(tmp_path / "first") as (address, scheduler):
        # A fitted vocabulary: epoch 1 featurises on the cluster while it trains, so the
        # scheduler is still needed after the first checkpoints (every 2 batches). The model
        # trains in this process (--train-on client): it holds every batch trained so far.
        p = train_losing_the_scheduler([corpus, "--scheduler", address, "--train-on", "client",
                                        "--scheduler-wait", f"{WAIT_S}s", "--features", "tfidf", "--blocksize",
                                        "128KiB", "--shuffle-buffer", "1000", "--checkpoint-every", "2", "--epochs",
                                        "2", "--early-stopping", "0", "--out", tmp_path, "--name", "run",
                                        "--json-log", log], scheduler)
        lose_the_scheduler(p, log, scheduler, address, run)
    assert [e for e in events(log) if e["event"] == "featurized"][-1]["done"] < 45, "epoch 1 had finished featurising"
    last = [e for e in events(log) if e["event"] == "checkpoint"][-1]
    assert last["reason"] == "scheduler_lost" and last["epoch"] == 1 and last["batches"] >= 2, last
    saved = load_checkpoint(str(run))
    assert (saved["epoch"], saved["batches"]) == (0, last["batches"])

    # A new scheduler and worker, at another address: the run goes on from its checkpoint.
    log2 = tmp_path / "resumed.jsonl"
    with scheduler_and_worker(tmp_path / "second") as (address2, _):
        r = cli("train", "--resume", run, "--scheduler", address2, "--json-log", log2, "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    resumed = events(log2)
    assert [(e["epoch"], e["batches"]) for e in resumed if e["event"] == "resumed"] == [(1, last["batches"])]
    # The batches trained before the checkpoint are replayed, not trained again.
    first_rows = min(e["rows"] for e in resumed if e["event"] == "batch" and e["epoch"] == 1)
    assert first_rows == (last["batches"] + 1) * BATCH
    metrics = json.loads((run / "metrics.json").read_text())
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2]
    assert (run / "model.json").exists() and load_checkpoint(str(run)) is None


def test_a_scheduler_lost_while_the_model_trains_on_a_worker_ends_in_seconds_and_resume_goes_on_from_the_last_sync(
        corpus, tmp_path):
    """The default with --scheduler: one trainer task on the worker. Its results
    travel through the scheduler, so what it trained since its last pause (an
    epoch's end) goes with it: one message, exit 2, the checkpoint of that pause
    kept, and --resume on a new scheduler continues from it."""
    run, log = tmp_path / "run", tmp_path / "lost.jsonl"
    with scheduler_and_worker(tmp_path / "first") as (address, scheduler):
        p = train_losing_the_scheduler([corpus, "--scheduler", address, "--scheduler-wait", f"{WAIT_S}s",
                                        "--checkpoint-every", "2", "--epochs", "6", "--out", tmp_path, "--name", "run",
                                        "--json-log", log], scheduler)
        lose_the_scheduler(p, log, scheduler, address, run)
    saved = load_checkpoint(str(run))
    assert saved["ddp"]["ranks"] == 1 and 1 <= saved["epoch"] < 6 and saved["batches"] == 0

    log2 = tmp_path / "resumed.jsonl"
    with scheduler_and_worker(tmp_path / "second") as (address2, _):
        r = cli("train", "--resume", run, "--scheduler", address2, "--json-log", log2, "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    resumed = events(log2)
    assert [e["epoch"] for e in resumed if e["event"] == "resumed"] == [saved["epoch"] + 1]
    assert [e["epoch"] for e in resumed if e.get("stage") == "training"][0] == saved["epoch"] + 1
    metrics = json.loads((run / "metrics.json").read_text())
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2, 3, 4, 5, 6]
    assert metrics["trained_on"] == "cluster" and metrics["client_shard_reads"] == 0
