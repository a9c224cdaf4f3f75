"""Several machines, by hand (docs/cluster.md §2 and §7), on one box.

Each "machine" is a Linux network namespace with its own address on a
bridge: the scheduler on 10.77.X.2, two workers on .3 and .4 (each also in a
private mount namespace that hides the trainer's folder), and the trainer,
the "laptop", on the bridge's own address .1 in the host namespace, where
the S3 server runs too. Nothing is reachable over 127.0.0.1 across machines,
so every address the run uses (scheduler, worker, the ranks' rendezvous on
rank 0's worker, object store) is a real network address between stacks.

The commands are the ones docs/cluster.md gives. Needs root (or CAP_NET_ADMIN)
for ``ip netns``; skips elsewhere.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.dataflow.plan import WORKER_ENV

from servers import s3_cli_args, stop_processes

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class Network:
    """A bridge in the host namespace and one namespace per machine, joined by veth pairs."""

    def __init__(self, names: list[str]):
        tag = f"{os.getpid() % 10000}"
        self.subnet = f"10.77.{os.getpid() % 200 + 20}"
        self.bridge = f"lfbr{tag}"
        self.host = f"{self.subnet}.1"
        self.machines: dict[str, tuple[str, str]] = {}   # name -> (namespace, address)
        self._links: list[str] = []
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.host}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, name in enumerate(names):
            ns, addr = f"lf{tag}{name}", f"{self.subnet}.{i + 2}"
            outer, inner = f"lfv{tag}{i}", f"lfp{tag}{i}"
            _ip("netns", "add", ns)
            self.machines[name] = (ns, addr)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            self._links.append(outer)
            _ip("link", "set", outer, "master", self.bridge)
            _ip("link", "set", outer, "up")
            _ip("link", "set", inner, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def on(self, name: str, cmd: list[str]) -> list[str]:
        """``cmd`` as run on machine ``name``."""
        return ["ip", "netns", "exec", self.machines[name][0], *cmd]

    def close(self) -> None:
        for ns, _ in self.machines.values():
            _ip("netns", "del", ns, check=False)
        for link in self._links:
            _ip("link", "del", link, check=False)
        _ip("link", "del", self.bridge, check=False)


def _can_make_networks() -> bool:
    if not shutil.which("ip") or not shutil.which("unshare"):
        return False
    probe = f"lfprobe{os.getpid()}"
    ok = _ip("netns", "add", probe, check=False).returncode == 0
    _ip("netns", "del", probe, check=False)
    return ok


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    """The scheduler and two workers on their own machines; S3 and the trainer on the host."""
    if not _can_make_networks():
        pytest.skip("needs `ip netns` (root or CAP_NET_ADMIN)")
    from distributed import Client

    from servers import s3_server

    trainer = tmp_path_factory.mktemp("laptop")
    (trainer / "marker").write_text("the trainer's folder")
    private = tmp_path_factory.mktemp("machines")
    net = Network(["sched", "w1", "w2"])
    procs: list[subprocess.Popen] = []
    try:
        with s3_server(ip=net.host) as opts:
            import fsspec

            fsspec.filesystem("s3", **opts).call_s3("create_bucket", Bucket="hosts")
            write_corpus("s3://hosts/train.csv", 6000, classes=4, seed=11, storage_options=opts)
            # No AWS_* variables anywhere: credentials travel as storage options.
            env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
            sched_addr = net.machines["sched"][1]
            address = f"tcp://{sched_addr}:8786"
            procs.append(subprocess.Popen(net.on("sched", [str(BIN / "dask"), "scheduler", "--host", sched_addr,
                                                           "--port", "8786", "--no-dashboard"]),
                                          cwd=private, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
            hide = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                    'mount -t tmpfs tmpfs "$0" && exec "$@"', str(trainer)]
            for name in ("w1", "w2"):
                home = private / name
                home.mkdir()
                # docs/cluster.md §2: one worker per machine here, its memory capped.
                procs.append(subprocess.Popen(
                    net.on(name, [*hide, str(BIN / "dask"), "worker", address, "--host", net.machines[name][1],
                                  "--nworkers", "1", "--nthreads", "1", "--memory-limit", "1536MiB",
                                  "--no-dashboard", "--name", name, "--local-directory", str(home)]),
                    cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**env, **WORKER_ENV}))
            deadline = time.monotonic() + 60
            while True:   # the scheduler takes a moment to listen
                try:
                    with Client(address, timeout="5s") as c:
                        c.wait_for_workers(2, timeout=60)
                        workers = sorted(c.scheduler_info()["workers"])
                        seen = c.run(os.listdir, str(trainer))
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            yield {"net": net, "address": address, "opts": opts, "env": env, "trainer": trainer,
                   "workers": workers, "workers_see": seen}
    finally:
        stop_processes(procs)
        net.close()


def _train(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lancetnic_flow", "train", *args], capture_output=True, text=True,
                          timeout=400, env=env, cwd=cwd)


def test_ddp_across_machines_trains_through_s3_and_matches_the_laptop_run(machines):
    m = machines
    net, trainer = m["net"], m["trainer"]
    # Two machines, two addresses; neither worker sees the trainer's folder.
    w1, w2 = (net.machines[n][1] for n in ("w1", "w2"))
    assert [w.split("://")[1].rsplit(":", 1)[0] for w in m["workers"]] == sorted([w1, w2])
    assert all(listing == [] for listing in m["workers_see"].values()), m["workers_see"]

    common = ["s3://hosts/train.csv", *s3_cli_args(m["opts"]), "--epochs", "2", "--batch-size", "64",
              "--hidden", "32", "--max-features", "5000", "--seed", "5", "--ddp", "2", "--json-log", "log.jsonl"]
    # docs/cluster.md §2 and §7: the scheduler's address, a cache both sides reach.
    remote = _train([*common, "--scheduler", m["address"], "--cache", "s3://hosts/cache", "--out",
                     str(trainer / "runs"), "--name", "cluster", "--checkpoint-every", "25"], m["env"], trainer)
    assert remote.returncode == 0, remote.stderr[-3000:]
    run = trainer / "runs" / "cluster"
    metrics = json.loads((run / "metrics.json").read_text())
    ddp = metrics["ddp"]
    assert ddp["backend"] == "gloo" and ddp["workers"] == m["workers"]
    assert len(set(ddp["replica_digests"])) == 1
    events = [json.loads(x) for x in (trainer / "log.jsonl").read_text().splitlines()]
    # Both ranks reported from their own machines, and the ranks paused for checkpoints
    # the trainer wrote into its own folder, which the workers cannot see.
    assert {e["worker"] for e in events if e["event"] == "rank"} == set(m["workers"])
    assert {e["reason"] for e in events if e["event"] == "checkpoint"} == {"periodic", "epoch"}
    assert (run / "model.safetensors").exists() and not (run / "checkpoint.safetensors").exists()
    assert metrics["memory"]["plan"]["external"] is True

    # The same command on the laptop alone (a LocalCluster of the same shape): the same model.
    local = _train([*common, "--workers", "2", "--worker-threads", "1", "--memory-budget", "3GiB",
                    "--cache", str(trainer / "cache"), "--out", str(trainer / "runs"), "--name", "laptop"],
                   m["env"], trainer)
    assert local.returncode == 0, local.stderr[-3000:]
    lm = json.loads((trainer / "runs" / "laptop" / "metrics.json").read_text())
    assert metrics["rows"] == lm["rows"] and metrics["rows"]["read"] == 6000
    assert metrics["val_accuracy"] == lm["val_accuracy"] > 0.7
    assert metrics["val_loss"] == pytest.approx(lm["val_loss"], rel=1e-6)
    assert ddp["replica_digests"][0] == pytest.approx(lm["ddp"]["replica_digests"][0], rel=1e-9)
