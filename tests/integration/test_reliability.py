"""Faults, injected for real: damaged shards, a worker killed by SIGKILL,
messy input accounted row by row."""
from __future__ import annotations

import json
import os
import signal
import threading
import time

from lancetnic_flow.events import Events
from lancetnic_flow.training.orchestrator import train

from helpers import make_config


def _events():
    seen: list[tuple[str, dict]] = []
    ev = Events()
    ev.subscribe(lambda kind, data: seen.append((kind, data)))
    return ev, seen


def test_damaged_and_missing_shards_are_detected_and_rebuilt(client, small_corpus, tmp_path):
    cache = tmp_path / "cache"
    first = train(make_config(small_corpus, tmp_path / "a", epochs=2, cache=cache, blocksize=100_000), client=client)
    shards = sorted(cache.glob("*/shards/*.train.npz"))
    assert len(shards) >= 3
    data = bytearray(shards[0].read_bytes())
    data[len(data) // 2] ^= 0xFF                      # same size, one flipped byte: only the CRC sees it
    shards[0].write_bytes(bytes(data))
    shards[1].write_bytes(shards[1].read_bytes()[:100])  # truncated
    shards[2].unlink()                                 # gone
    ev, seen = _events()
    second = train(make_config(small_corpus, tmp_path / "b", epochs=2, cache=cache, blocksize=100_000), ev,
                   client=client)
    warnings = [d["message"] for k, d in seen if k == "warning"]
    assert sum("missing or damaged" in w for w in warnings) == 3
    assert second.metrics["val_accuracy"] == first.metrics["val_accuracy"]
    assert [e["train_loss"] for e in second.metrics["epochs"]] == [e["train_loss"] for e in first.metrics["epochs"]]
    assert shards[2].exists()


def test_messy_input_every_row_is_trained_validated_or_skipped_with_a_reason(client, tmp_path):
    lines = ['text,label']
    lines += [f'"good row number {i} about sports and games",{"sports" if i % 2 else "tech"}' for i in range(300)]
    lines += ['"too,many",fields,here,x',        # malformed
              '"",sports',                       # empty text
              '"no label at all",',              # missing label
              '"unbalanced quote,tech']          # malformed (runs to EOF or breaks the row)
    path = tmp_path / "messy.csv"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'"bad \xff\xfe bytes",tech\n')
    res = train(make_config(path, tmp_path, epochs=1, blocksize=2048), client=client)
    rows = res.metrics["rows"]
    assert rows["read"] == rows["trained"] + rows["validated"] + sum(rows["skipped"].values())
    assert rows["read"] >= 303
    assert rows["skipped"].get("empty_text") == 1
    assert rows["skipped"].get("missing_label") == 1
    assert rows["skipped"].get("undecodable") == 1
    assert rows["skipped"].get("malformed", 0) >= 1
    assert rows["trained"] + rows["validated"] == 300


def test_a_worker_killed_during_featurisation_loses_nothing(own_cluster, client, corpus4, tmp_path):
    reference = train(make_config(corpus4, tmp_path / "ref", epochs=1, blocksize=200_000), client=client)
    pids = list(own_cluster.run(os.getpid).values())
    ev, seen = _events()
    killed = threading.Event()

    def kill_on_first_batch(kind: str, data: dict) -> None:
        if kind == "batch" and not killed.is_set():
            killed.set()
            os.kill(pids[0], signal.SIGKILL)           # mid epoch 1: partitions still being featurised

    ev.subscribe(kill_on_first_batch)
    res = train(make_config(corpus4, tmp_path / "kill", epochs=1, blocksize=200_000), ev, client=own_cluster)
    assert killed.is_set()
    assert res.metrics["rows"] == reference.metrics["rows"]
    ref_vocab = json.loads((tmp_path / "ref" / "runs").glob("*/features.json").__next__().read_text())["vocabulary"]
    vocab = json.loads(next((tmp_path / "kill" / "runs").glob("*/features.json")).read_text())["vocabulary"]
    assert vocab == ref_vocab


def test_a_worker_that_keeps_dying_is_explained_not_dumped():
    """KilledWorker (a task that killed its worker every retry) becomes a sentence with a fix."""
    from distributed import KilledWorker

    from lancetnic_flow.cli.main import known_failure as _known_failure

    message, hint = _known_failure(KilledWorker("featurize_partition-1", "tcp://127.0.0.1:1", 3))
    assert "worker died" in message and "featurize_partition-1" in message
    assert "--blocksize" in hint and "--memory-budget" in hint
    from lancetnic_flow.training.ddp.driver import RanksKeptFailing

    message, hint = _known_failure(RanksKeptFailing("worker tcp://10.0.0.3:4000 left the cluster during --ddp"))
    assert "tcp://10.0.0.3:4000" in message and "--resume" in hint and "memory" in hint
    assert _known_failure(ValueError("a bug")) is None


def _checksum(index: int, *, value) -> tuple[int, int]:
    return index, int(value[::4096].sum())


def test_shared_data_goes_out_as_one_copy_with_no_scheduler_broadcast_a_dying_worker_could_hang(own_cluster):
    """The scheduler's copy-to-every-worker step waits forever on a worker
    killed during it (and blocks every later broadcast): ``share`` never
    asks for it, so a kill mid-transfer can cost a retry, never a hang."""
    import numpy as np

    from lancetnic_flow.reconnect import share

    value = np.arange(2_000_000, dtype=np.int64)
    fut = share(own_cluster, value)
    got = own_cluster.gather([own_cluster.submit(_checksum, i, value=fut, pure=False) for i in range(4)])
    assert {c for _, c in got} == {int(value[::4096].sum())}
    actions = [e.get("action") for _, e in own_cluster.get_events("all") if isinstance(e, dict)]
    assert "replicate" not in actions


def test_shared_data_whose_every_holder_died_is_shared_again_and_no_job_is_lost(own_cluster):
    """Every worker holding a shared value dies: Dask cancels the tasks that
    need it; the window shares it again and runs every job, in order."""
    import numpy as np

    from lancetnic_flow.dataflow.window import OrderedWindow
    from lancetnic_flow.reconnect import share

    value = np.arange(3_000_000, dtype=np.int64)
    own_cluster.wait_for_workers(2, timeout=120)
    fut = share(own_cluster, value)
    holders = own_cluster.who_has(fut)[fut.key]
    assert len(holders) == 1
    pid = own_cluster.run(os.getpid, workers=list(holders))[holders[0]]
    os.kill(pid, signal.SIGKILL)
    renewed = []

    def renew() -> dict:
        renewed.append(1)
        return {"value": share(own_cluster, value)}

    window = OrderedWindow(own_cluster, _checksum, [(i,) for i in range(8)], 3, renew=renew, value=fut)
    got = list(window)
    assert [i for i, _ in got] == list(range(8))
    assert {c for _, c in got} == {int(value[::4096].sum())}
    assert renewed, "the lost value was never shared again"


def test_a_worker_killed_while_shared_data_goes_out_costs_at_most_a_retry(own_cluster):
    """SIGKILL a worker at a random moment of a 120 MB share: the call returns
    (bounded, tried again on the worker left) and the tasks reading the value
    (through the window, as the feed does) all see it whole."""
    import random

    import numpy as np

    from lancetnic_flow.dataflow.window import OrderedWindow
    from lancetnic_flow.reconnect import share

    value = np.random.default_rng(7).integers(0, 2**31, 15_000_000, dtype=np.int64)
    want = int(value[::4096].sum())
    for attempt in range(2):
        own_cluster.wait_for_workers(2, timeout=120)
        pids = list(own_cluster.run(os.getpid).values())
        timer = threading.Timer(random.uniform(0.02, 0.4), os.kill, (pids[attempt % 2], signal.SIGKILL))
        timer.start()
        started = time.monotonic()
        fut = share(own_cluster, value, timeout=30)
        timer.join()
        assert time.monotonic() - started < 150
        # The kill may land after the call returned, on the one worker holding the value.
        window = OrderedWindow(own_cluster, _checksum, [(i,) for i in range(4)], 2,
                               renew=lambda: {"value": share(own_cluster, value, timeout=30)}, value=fut)
        assert list(window) == [(i, want) for i in range(4)]
        del fut, window


def _log_at_teardown(dask_worker, **kw):
    """Stands in for a heartbeat that fails as the scheduler goes: an error
    with a traceback from the worker's own logger, while the cluster closes."""
    import logging

    from distributed.diagnostics.plugin import WorkerPlugin

    class LogsAtClose(WorkerPlugin):
        def teardown(self, worker):
            try:
                raise ConnectionError("Stream is closed")
            except ConnectionError:
                logging.getLogger("distributed.worker").exception(
                    "Failed to communicate with scheduler during heartbeat.")

    dask_worker.plugins["logs-at-close"] = LogsAtClose()


def test_a_local_cluster_closing_after_a_good_run_prints_no_worker_traceback(capfd):
    from lancetnic_flow.dataflow.cluster import open_cluster
    from lancetnic_flow.dataflow.plan import GiB, plan_memory

    with open_cluster(plan_memory(3 * GiB, workers=1)) as client:
        client.run(_log_at_teardown)
    err = capfd.readouterr().err
    assert "Failed to communicate" not in err and "Traceback" not in err, err
