"""An existing Dask cluster: real `dask scheduler` and `dask worker` processes
on loopback, used through `--scheduler` and DASK_SCHEDULER_ADDRESS."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lancetnic_flow.synth import write_corpus

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster")
    sched_file = tmp / "scheduler.json"
    env = {**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "system"}
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(sched_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        for i in range(2):
            procs.append(subprocess.Popen([str(BIN / "dask"), "worker", address, "--nworkers", "1", "--nthreads", "1",
                                           "--memory-limit", "1GiB", "--no-dashboard", "--name", f"w{i}",
                                           "--local-directory", str(tmp / f"w{i}")],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        from distributed import Client

        with Client(address, timeout="30s") as c:
            c.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "train.csv"
    write_corpus(str(path), 4000, classes=3, seed=3)
    return path


def _train(args, env=None):
    return subprocess.run([sys.executable, "-m", "lancetnic_flow", "train", *args], capture_output=True, text=True,
                          timeout=240, env=env)


def test_train_on_an_existing_scheduler_plans_from_its_workers_limits(dask_cluster, corpus, tmp_path):
    r = _train([str(corpus), "--scheduler", dask_cluster, "--epochs", "2", "--batch-size", "64",
                "--out", str(tmp_path), "--name", "ext"])
    assert r.returncode == 0, r.stderr
    assert "existing cluster: 2 workers × 1.0 GiB" in r.stderr
    metrics = json.loads((tmp_path / "ext" / "metrics.json").read_text())
    assert metrics["memory"]["plan"]["external"] is True
    assert metrics["memory"]["plan"]["worker_limit"] == 2**30
    assert metrics["rows"]["read"] == 4000
    assert metrics["val_accuracy"] > 0.7


def test_dask_scheduler_address_environment_variable_is_honoured(dask_cluster, corpus, tmp_path):
    env = {**os.environ, "DASK_SCHEDULER_ADDRESS": dask_cluster}
    r = _train([str(corpus), "--epochs", "1", "--out", str(tmp_path), "--name", "env"], env=env)
    assert r.returncode == 0, r.stderr
    assert "existing cluster" in r.stderr


def test_unreachable_scheduler_is_a_user_error(corpus, tmp_path):
    r = _train([str(corpus), "--scheduler", "tcp://127.0.0.1:9", "--out", str(tmp_path)])
    assert r.returncode == 2
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in r.stderr
    assert "Traceback" not in r.stderr


def test_cluster_workflow_runs_on_the_existing_scheduler(dask_cluster, corpus, tmp_path):
    wf = Path(__file__).resolve().parent.parent / "workflows" / "cluster.yaml"
    sets = [f"scheduler={dask_cluster}", f"train={corpus}", f"make_data.out={corpus}", f"out={tmp_path}",
            f"cache={tmp_path / 'cache'}", "epochs=1"]
    r = subprocess.run([sys.executable, "-m", "lancetnic_flow", "run", str(wf), *sum([["--set", s] for s in sets], [])],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert "existing cluster: 2 workers" in r.stderr
    assert json.loads((tmp_path / "cluster" / "metrics.json").read_text())["rows"]["read"] == 4000
