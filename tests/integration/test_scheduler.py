"""An existing Dask cluster: real `dask scheduler` and `dask worker` processes
on loopback, used through `--scheduler` and DASK_SCHEDULER_ADDRESS; one of
them shares no disk with the trainer and reaches data and cache through S3."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lancetnic_flow.data.synth import write_corpus

from helpers import cli_signalled_at
from servers import dask_processes, s3_cli_args, scheduler_address, stop_processes

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    with dask_processes(tmp_path_factory.mktemp("cluster"), "1GiB") as (address, _):
        yield address


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


def test_a_tokenizer_module_the_cluster_cannot_import_is_named_before_any_work(dask_cluster, corpus, tmp_path):
    """Importable here (PYTHONPATH), not on the workers and scheduler started elsewhere: the run
    ended in an internal error (lost dependencies), its cause in the scheduler's log only."""
    (tmp_path / "tok_here_only.py").write_text(
        "from lancetnic_flow.features import register_tokenizer\n"
        "register_tokenizer('words', lambda text: text.split())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    r = _train([str(corpus), "--tokenizer", "tok_here_only:words", "--scheduler", dask_cluster, "--epochs", "1",
                "--out", str(tmp_path / "runs")], env=env)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "module 'tok_here_only' cannot be imported on the cluster" in r.stderr
    assert "No module named 'tok_here_only'" in r.stderr and "Traceback" not in r.stderr


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


def test_a_refused_scheduler_port_is_reported_in_seconds_and_one_that_starts_listening_is_waited_for():
    import socket
    import threading
    import time

    from lancetnic_flow.dataflow.cluster import refuse_if_nothing_listens as _refuse_if_nothing_listens
    from lancetnic_flow.errors import UserError

    s = socket.socket()
    s.bind(("127.0.0.1", 0))            # bound, not listening: connections are refused
    port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(UserError) as e:
        _refuse_if_nothing_listens(f"tcp://127.0.0.1:{port}", patience=0.6)
    assert 0.6 <= time.monotonic() - t0 < 5
    assert f"connection refused, nothing listens on 127.0.0.1:{port}" in str(e.value)
    # A scheduler still starting: it listens 0.4 s later, within the patience, and writes its handshake.
    def start() -> None:
        s.listen()
        conn, _ = s.accept()
        conn.sendall((58).to_bytes(8, "little") + b"\x01" * 58)   # a frame's length, as Dask writes it
        conn.close()

    threading.Timer(0.4, start).start()
    _refuse_if_nothing_listens(f"tcp://127.0.0.1:{port}", patience=3)
    s.close()


@pytest.mark.parametrize("address,words", [("127.0.0.1", "missing port"), ("my-scheduler", "missing port"),
                                           ("http://127.0.0.1:8786", "http:// is no Dask protocol")])
def test_an_address_dask_cannot_connect_to_is_a_user_error_naming_it(address, words):
    """These were internal errors (exit 1: ValueError from inside Dask)."""
    from lancetnic_flow.dataflow.cluster import refuse_if_nothing_listens
    from lancetnic_flow.errors import UserError

    with pytest.raises(UserError, match=words) as e:
        refuse_if_nothing_listens(address)
    assert address in e.value.message and "tcp://" in e.value.hint


@pytest.mark.parametrize("reply", [None, b"HTTP/1.0 426 Upgrade Required\r\n\r\n"])
def test_a_server_that_is_not_a_dask_scheduler_is_named_in_seconds(reply):
    """A web server (the dashboard's port, 8787 for 8786) said nothing and the Client waited on it
    forever; one that answered HTTP was read as a frame of exabytes (MemoryError, exit 1)."""
    import socket
    import threading

    from lancetnic_flow.dataflow.cluster import refuse_if_nothing_listens
    from lancetnic_flow.errors import UserError

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def answer() -> None:
        conn, _ = server.accept()
        if reply:
            conn.sendall(reply)
        threading.Event().wait(3)
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    port = server.getsockname()[1]
    with pytest.raises(UserError, match=f"127.0.0.1:{port} is not a Dask scheduler") as e:
        refuse_if_nothing_listens(f"tcp://127.0.0.1:{port}", answer=1.0)
    assert "dashboard" in e.value.hint
    server.close()


def test_a_scheduler_with_no_workers_is_refused_after_the_wait_not_waited_on_forever():
    """predict and evaluate on a scheduler without workers printed nothing and waited forever
    (train and tune said so after 30 s): every command's cluster asks for a worker now."""
    from distributed import LocalCluster

    from lancetnic_flow.dataflow.cluster import open_cluster
    from lancetnic_flow.dataflow.plan import plan_memory
    from lancetnic_flow.errors import UserError

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as empty:
        with pytest.raises(UserError, match=r"no workers \(waited 1 s for one\)"):
            with open_cluster(plan_memory(), scheduler=empty.scheduler_address, workers_wait=1.0):
                pass


def test_cluster_workflow_runs_on_the_existing_scheduler(dask_cluster, corpus, tmp_path):
    wf = Path(__file__).resolve().parents[2] / "workflows" / "cluster.yaml"
    sets = [f"scheduler={dask_cluster}", f"train={corpus}", f"make_data.out={corpus}", f"out={tmp_path}",
            f"cache={tmp_path / 'cache'}", "epochs=1"]
    r = subprocess.run([sys.executable, "-m", "lancetnic_flow", "run", str(wf), *sum([["--set", s] for s in sets], [])],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert "existing cluster: 2 workers" in r.stderr
    assert json.loads((tmp_path / "cluster" / "metrics.json").read_text())["rows"]["read"] == 4000


# ---------------------------------------------------------------- a cluster that shares no disk with the trainer
# The workers see the trainer only through the scheduler and S3: the corpus and
# the shard cache live on a loopback S3 server, the workers run in their own
# folders, and where the machine allows a mount namespace the trainer's folder
# is covered by an empty tmpfs in theirs (so they could not write there even by
# mistake). The same data and seed on a LocalCluster must train the same model.

WORKER_LIMITS = ("1152MiB", "1536MiB")   # different on purpose: the plan takes the smaller


def _hiding_prefix(hidden: Path) -> list[str] | None:
    """A command prefix that runs a program in its own mount namespace with
    ``hidden`` covered by an empty tmpfs; None where this machine forbids it
    (no root and no unprivileged user namespaces)."""
    if not shutil.which("unshare"):
        return None
    (hidden / "marker").write_text("the trainer's folder")
    script = 'mount -t tmpfs tmpfs "$0" && exec "$@"'
    for unshare in (["unshare", "-m", "--propagation", "private"],
                    ["unshare", "-r", "-m", "--propagation", "private"]):
        prefix = [*unshare, "sh", "-c", script, str(hidden)]
        try:
            probe = subprocess.run([*prefix, "ls", "-A", str(hidden)], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0 and probe.stdout.strip() == "":
            return prefix
    return None


@pytest.fixture(scope="module")
def s3_cluster(tmp_path_factory):
    """S3 on loopback holding the corpus; a scheduler and two workers (limits
    WORKER_LIMITS) in private folders; the trainer's own folder."""
    from distributed import Client

    from lancetnic_flow.dataflow.plan import WORKER_ENV

    from servers import s3_server

    trainer = tmp_path_factory.mktemp("trainer")
    private = tmp_path_factory.mktemp("workers")
    hide = _hiding_prefix(trainer)
    with s3_server() as opts:
        import fsspec

        fsspec.filesystem("s3", **opts).call_s3("create_bucket", Bucket="shared")
        write_corpus("s3://shared/train.csv", 4000, classes=3, seed=3, storage_options=opts)
        # No AWS_* variables: the credentials reach the workers only as storage options.
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        sched_file = private / "scheduler.json"
        procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                   "--no-dashboard", "--scheduler-file", str(sched_file)], cwd=private,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
        try:
            address = scheduler_address(sched_file)
            dirs = []
            for i, limit in enumerate(WORKER_LIMITS):
                home = private / f"w{i}"
                home.mkdir()
                dirs.append(home)
                procs.append(subprocess.Popen([*(hide or []), str(BIN / "dask"), "worker", address, "--nworkers", "1",
                                               "--nthreads", "1", "--memory-limit", limit, "--no-dashboard",
                                               "--name", f"s3w{i}", "--local-directory", str(home)],
                                              cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                              env={**env, **WORKER_ENV}))
            with Client(address, timeout="30s") as c:
                c.wait_for_workers(2, timeout=60)
            yield {"address": address, "opts": opts, "env": env, "trainer": trainer, "worker_dirs": dirs,
                   "hidden": hide is not None}
        finally:
            stop_processes(procs)


@pytest.mark.slow
def test_workers_sharing_no_disk_train_through_s3_exactly_like_a_local_cluster(s3_cluster):
    import fsspec
    from distributed import Client

    c, trainer = s3_cluster, s3_cluster["trainer"]
    common = ["s3://shared/train.csv", *s3_cli_args(c["opts"]), "--epochs", "2", "--batch-size", "64",
              "--hidden", "32", "--max-features", "5000", "--seed", "7"]
    remote = _train([*common, "--scheduler", c["address"], "--out", str(trainer / "remote"), "--name", "r",
                     "--cache", "s3://shared/cache"], env=c["env"])
    assert remote.returncode == 0, remote.stderr
    # Each worker's --memory-limit was read from the scheduler; the plan sizes by the smaller one,
    # and says what the two hold together (not twice the smaller).
    assert "existing cluster: 2 workers, 2.6 GiB in all, the smallest 1.1 GiB" in remote.stderr
    m_remote = json.loads((trainer / "remote" / "r" / "metrics.json").read_text())
    assert m_remote["memory"]["plan"]["external"] is True
    assert m_remote["memory"]["plan"]["worker_limit"] == 1152 * 2**20

    # Shards, features and manifest went to S3 and nowhere else.
    fs = fsspec.filesystem("s3", **c["opts"])
    manifests = fs.glob("shared/cache/*/manifest.json")
    assert len(manifests) == 1
    manifest = json.loads(fs.cat(manifests[0]))
    shard_urls = [s["url"] for r in manifest["results"] for s in r["shards"]]
    assert shard_urls and all(u.startswith("s3://shared/cache/") for u in shard_urls)
    assert {s.rsplit(".", 2)[-2] for s in shard_urls} == {"train", "val"}
    assert all(fs.exists(u) for u in shard_urls)
    assert fs.glob("shared/cache/*/features.json")
    for folder in (trainer, *c["worker_dirs"]):
        assert not list(folder.rglob("*.npz")) and not list(folder.rglob("manifest.json")), folder
    if c["hidden"]:
        # The workers' view of the trainer's folder is an empty tmpfs: they never saw the run folder.
        with Client(c["address"], timeout="30s") as client:
            seen = client.run(os.listdir, str(trainer))
        assert len(seen) == 2 and all(listing == [] for listing in seen.values()), seen
        assert (trainer / "remote" / "r" / "model.safetensors").exists()

    # The same data and seed on a LocalCluster of the same shape (2 workers × 1 thread): the same run.
    # The shape matters: small inputs are cut into about 4 partitions per worker thread, and the
    # partition order is part of the seeded batch order; so both runs must cut the data alike.
    # Both train on a worker (--scheduler's default; asked for here): the same trainer task, the same weights.
    local = _train([*common, "--workers", "2", "--worker-threads", "1", "--memory-budget", "3GiB", "--train-on", "cluster",
                    "--out", str(trainer / "local"), "--name", "l", "--cache", "s3://shared/cache-local"],
                   env=c["env"])
    assert local.returncode == 0, local.stderr
    m_local = json.loads((trainer / "local" / "l" / "metrics.json").read_text())
    local_manifest = json.loads(fs.cat(fs.glob("shared/cache-local/*/manifest.json")[0]))
    assert len(local_manifest["partitions"]["train"]) == len(manifest["partitions"]["train"])
    assert m_remote["rows"] == m_local["rows"]
    assert m_remote["rows"]["read"] == 4000
    assert (json.loads((trainer / "remote" / "r" / "features.json").read_text())
            == json.loads((trainer / "local" / "l" / "features.json").read_text()))
    assert m_remote["vocabulary"] == m_local["vocabulary"]
    for e_remote, e_local in zip(m_remote["epochs"], m_local["epochs"], strict=True):
        assert e_remote["val_accuracy"] == e_local["val_accuracy"]
        assert e_remote["val_loss"] == pytest.approx(e_local["val_loss"], rel=1e-6)
        assert e_remote["train_loss"] == pytest.approx(e_local["train_loss"], rel=1e-6)
    assert m_remote["val_accuracy"] == m_local["val_accuracy"] > 0.7
    assert m_remote["val_loss"] == pytest.approx(m_local["val_loss"], rel=1e-6)


# ---------------------------------------------------------------- the trainer on the cluster
# With --scheduler the model trains on a worker (one trainer task, the rank
# machinery with a world of one): the trainer process plans, submits, relays
# the task's events and saves what it sends back; the shards it would read are
# on S3, and it reads none of them (metrics.json counts every shard this
# process loads, dataflow/shards.py SHARD_READS).

def _cluster_args(c: dict, name: str, epochs: int = 5) -> list[str]:
    return ["s3://shared/train.csv", *s3_cli_args(c["opts"]), "--epochs", str(epochs), "--seed", "5",
            "--scheduler", c["address"], "--cache", "s3://shared/cache-trainer", "--checkpoint-every", "off",
            "--out", str(c["trainer"] / "on-cluster"), "--name", name, "--json-log", str(c["trainer"] / f"{name}.jsonl")]


def _events(c: dict, name: str) -> list[dict]:
    return [json.loads(line) for line in (c["trainer"] / f"{name}.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def cluster_trained(s3_cluster):
    r = _train(_cluster_args(s3_cluster, "whole"), env=s3_cluster["env"])
    assert r.returncode == 0, r.stderr
    return r, json.loads((s3_cluster["trainer"] / "on-cluster" / "whole" / "metrics.json").read_text())


@pytest.mark.slow
def test_with_a_scheduler_the_model_trains_on_a_worker_and_the_trainer_process_reads_no_shard(s3_cluster,
                                                                                             cluster_trained):
    r, m = cluster_trained
    assert m["trained_on"] == "cluster"
    assert m["client_shard_reads"] == 0 and m["client_shard_bytes"] == 0   # not one shard, not the validation ones
    assert m["ddp"]["ranks"] == 1 and len(m["ddp"]["workers"]) == 1
    assert "training on the cluster: one trainer task on tcp://127.0.0.1:" in r.stderr
    # The default model, its twin learning the validation rows and its probability scale, as in this process.
    assert m["model"] == "LinearSVM" and m["rows"]["read"] == 4000 and m["val_accuracy"] > 0.7
    config = json.loads((s3_cluster["trainer"] / "on-cluster" / "whole" / "config.json").read_text())
    assert config["cluster"]["train_on"] == "cluster" and config["training"]["learn_val"] is True
    assert m["stage_seconds"]["calibrate"] > 0
    # The dashboard's events are a local run's: each epoch's stages, batches, epoch records; no box of ranks.
    events = _events(s3_cluster, "whole")
    kinds = [e["event"] for e in events]
    stages = [(e["stage"], e.get("epoch")) for e in events if e["event"] == "stage"]
    for epoch in (1, 2, 3, 4, 5):
        assert ("training", epoch) in stages and ("evaluating", epoch) in stages
    assert stages.index(("training", 1)) < stages.index(("evaluating", 1)) < stages.index(("training", 2))
    assert ("calibrating", None) in stages and stages[-1] == ("saving", None)
    assert kinds.count("epoch") == 5 and "rank" not in kinds
    batches = [e for e in events if e["event"] == "batch"]
    assert batches and all(e["total_rows"] == m["rows"]["trained"] for e in batches)
    assert max(e["rows"] for e in batches if e["epoch"] == 5) == m["rows"]["trained"]


@pytest.mark.slow
def test_a_run_trained_on_the_cluster_stops_on_ctrl_c_and_resumes_to_the_uninterrupted_result(s3_cluster,
                                                                                             cluster_trained):
    import signal

    from lancetnic_flow.training.checkpoints import load_checkpoint

    c, (_, whole) = s3_cluster, cluster_trained
    # A checkpoint at every sync (each epoch's end, for the default model) paces the run: its epochs,
    # from kept shards, are otherwise over before a Ctrl-C sent after the first could land. Where
    # checkpoints fall changes no weight (test_ddp.py's checkpoint tests).
    args = [*_cluster_args(c, "stopped"), "--checkpoint-every", "1"]
    # A Ctrl-C once the trainer task has trained epoch 1, sent as the trainer process reports it.
    proc = cli_signalled_at(["train", *args], None, {"event": "epoch"}, [signal.SIGINT], env=c["env"])
    try:
        _, err = proc.communicate(timeout=200)
    finally:
        proc.kill()
    run = c["trainer"] / "on-cluster" / "stopped"
    assert proc.returncode == 130, err
    assert f"--resume {run}" in err, err
    assert (run / "checkpoint.safetensors").exists() and not (run / "model.safetensors").exists()
    saved = load_checkpoint(str(run))
    assert saved["ddp"]["ranks"] == 1 and 1 <= saved["epoch"] < 5   # after epoch 1, before the end

    resumed_log = c["trainer"] / "resumed.jsonl"
    r = _train(["--resume", str(run), "--scheduler", c["address"], *s3_cli_args(c["opts"]),
                "--json-log", str(resumed_log)], env=c["env"])
    assert r.returncode == 0, r.stderr
    # It went on from the checkpoint, not from the start: its first epoch is the checkpoint's.
    stages = [e for e in map(json.loads, resumed_log.read_text().splitlines()) if e.get("stage") == "training"]
    assert stages[0]["epoch"] == saved["epoch"] + 1
    m = json.loads((run / "metrics.json").read_text())
    assert m["trained_on"] == "cluster" and m["client_shard_reads"] == 0
    assert m["rows"] == whole["rows"]
    for e_resumed, e_whole in zip(m["epochs"], whole["epochs"], strict=True):
        assert e_resumed["val_accuracy"] == e_whole["val_accuracy"]
        assert e_resumed["val_loss"] == pytest.approx(e_whole["val_loss"], rel=1e-6)
    assert m["val_accuracy"] == whole["val_accuracy"]


@pytest.mark.slow
def test_the_same_seed_trains_the_same_model_on_the_cluster_as_in_the_trainer_process(s3_cluster, cluster_trained):
    """One trainer task draws the batches the loop in the trainer's process draws
    from the cache (the run's seed, the partitions' seeded order): the same
    epochs, the same model. The trainer's own run reads every shard, and says so."""
    c, (_, whole) = s3_cluster, cluster_trained
    args = _cluster_args(c, "client")
    r = _train([*args, "--train-on", "client"], env=c["env"])
    assert r.returncode == 0, r.stderr
    m = json.loads((c["trainer"] / "on-cluster" / "client" / "metrics.json").read_text())
    assert m["trained_on"] == "client" and "ddp" not in m
    config = json.loads((c["trainer"] / "on-cluster" / "client" / "config.json").read_text())
    assert config["cluster"]["train_on"] == "client" and config["training"]["learn_val"] is True
    # Every epoch reads the training shards, and each epoch's evaluation and the calibration the validation ones.
    assert m["client_shard_reads"] >= 5 * 2 and m["client_shard_bytes"] > 0
    assert m["rows"] == whole["rows"]
    for e_client, e_cluster in zip(m["epochs"], whole["epochs"], strict=True):
        assert e_client["val_accuracy"] == e_cluster["val_accuracy"]
        assert e_client["val_loss"] == pytest.approx(e_cluster["val_loss"], rel=1e-5)
        assert e_client["train_loss"] == pytest.approx(e_cluster["train_loss"], rel=1e-5)
    assert m["val_accuracy"] == whole["val_accuracy"]
