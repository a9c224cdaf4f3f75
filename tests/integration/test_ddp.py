"""--ddp N: data-parallel training on Dask workers with torch.distributed (gloo).

Real ranks in real worker processes of the session's LocalCluster; no mocks."""
from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from lancetnic_flow.config import ModelConfig
from lancetnic_flow.dataflow.shards import ShardInfo
from lancetnic_flow.errors import UserError
from lancetnic_flow.events import Events
from lancetnic_flow.runs.predict import Predictor
from lancetnic_flow.training.checkpoints import CHECKPOINT, load_checkpoint
from lancetnic_flow.training.ddp.shares import share
from lancetnic_flow.training.orchestrator import train
from lancetnic_flow.training.resume import resume_config
from lancetnic_flow.training.stop import TrainingInterrupted

from helpers import cli, make_config, templated_csv


def _shards(rows: list[int]) -> list[ShardInfo]:
    return [ShardInfo(f"s{i}", "train", i, 0, n, n * 10, n * 80, 0) for i, n in enumerate(rows)]


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_shares_are_disjoint_cover_every_shard_and_hold_similar_rows(world):
    shards = _shards([900, 100, 500, 500, 300, 700, 200, 800])
    for epoch in range(3):
        parts = [share(shards, r, world, seed=5, epoch=epoch) for r in range(world)]
        urls = [s.url for p in parts for s in p]
        assert sorted(urls) == sorted(s.url for s in shards) and len(urls) == len(set(urls))
        rows = [sum(s.rows for s in p) for p in parts]
        assert max(rows) - min(rows) <= 900   # at most one partition apart
    # the deal follows the epoch's seeded order
    assert [s.url for s in share(shards, 0, 2, 5, 0)] != [s.url for s in share(shards, 0, 2, 5, 1)]


def test_ddp_two_ranks_reach_the_single_process_accuracy_with_equal_replicas(client, corpus4, tmp_path):
    single = train(make_config(corpus4, tmp_path, epochs=3, blocksize=256 * 1024), client=client)
    cfg = make_config(corpus4, tmp_path, epochs=3, blocksize=256 * 1024)
    cfg.training.ddp, cfg.training.device = 2, "cpu"
    seen: list[tuple[str, dict]] = []
    events = Events()
    events.subscribe(lambda kind, e: seen.append((kind, e)) if kind in ("rank", "epoch", "ddp") else None)
    res = train(cfg, events, client=client)

    assert abs(res.metrics["val_accuracy"] - single.metrics["val_accuracy"]) <= 0.01
    ddp = res.metrics["ddp"]
    assert ddp["ranks"] == 2 and len(set(ddp["workers"])) == 2 and ddp["backend"] == "gloo" and ddp["device"] == "cpu"
    assert len(set(ddp["replica_digests"])) == 1   # every rank ended with the same weights
    ranks = {e["rank"]: e for k, e in seen if k == "rank"}
    assert set(ranks) == {0, 1} and {e["worker"] for e in ranks.values()} == set(ddp["workers"])
    assert [e["epoch"] for k, e in seen if k == "epoch"] == [1, 2, 3]
    # The ranks' epoch events carry the single-process names (val_precision, not val_macro_precision).
    assert all("val_precision" in e and "val_macro_precision" not in e for k, e in seen if k == "epoch")
    # The ranks' rows in the last epoch add up to every training row.
    last = {e["rank"]: e["rows"] for k, e in seen if k == "rank" and e.get("done") and e["epoch"] == 3}
    assert sum(last.values()) == res.metrics["rows"]["trained"]
    # The run folder is an ordinary run: it loads and predicts.
    p = Predictor(res.run).predict(["the match ended in a late goal"])
    assert p[0]["label"] in res.metrics["labels"]


def _featurised(events: Events) -> list:
    seen: list = []
    events.subscribe(lambda kind, e: seen.append(e) if kind == "featurized" else None)
    return seen


def test_ddp_with_more_ranks_than_workers_is_a_user_error_before_any_featurising(client, small_corpus, tmp_path):
    cfg = make_config(small_corpus, tmp_path, epochs=1)
    cfg.training.ddp = 3
    events = Events()
    seen = _featurised(events)
    with pytest.raises(UserError, match="ddp 3 needs 3 Dask workers, the cluster has 2"):
        train(cfg, events, client=client)
    assert seen == []


def test_a_rank_that_cannot_fit_in_its_workers_memory_limit_is_refused_before_any_featurising(
        client, small_corpus, tmp_path):
    cfg = make_config(small_corpus, tmp_path, epochs=1)
    cfg.training.ddp = 2
    cfg.features.mode, cfg.features.buckets, cfg.model.hidden = "hashing", 2**21, 128   # ~4.5 GB of model state
    cfg.features.max_features = None   # hashed columns: no vocabulary to cap
    events = Events()
    seen = _featurised(events)
    with pytest.raises(UserError, match=r"ddp: a rank needs about .* memory limit") as refused:
        train(cfg, events, client=client)
    assert "1.5 GiB memory limit" in str(refused.value) and "max_features" in refused.value.hint
    assert seen == []


def test_ddp_waits_for_its_own_local_workers_that_are_restarting_and_refuses_a_short_existing_cluster_at_once():
    # A run's own LocalCluster briefly has fewer workers when its nannies
    # restart one (killed by the OS, or for memory, under load): that is no
    # user error. An existing cluster's count is taken as it is.
    import time

    from distributed import Client, LocalCluster

    from lancetnic_flow.dataflow.cluster import workers_info
    from lancetnic_flow.training.ddp.driver import preflight

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      memory_limit="1GiB") as cluster, Client(cluster) as client:
        client.wait_for_workers(2, timeout=60)

        def killed_both() -> None:
            for pid in client.run(os.getpid).values():
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while len(workers_info(client)) == 2:
                assert time.monotonic() < deadline, "the workers did not die"
                time.sleep(0.02)

        killed_both()
        with pytest.raises(UserError, match="ddp 2 needs 2 Dask workers, the cluster has [01]"):
            preflight(client, 2, 0)
        client.wait_for_workers(2, timeout=60)
        killed_both()
        events, warned = Events(), []
        events.subscribe(lambda kind, e: warned.append(e["message"]) if kind == "warning" else None)
        chosen = preflight(client, 2, 0, own_workers=2, events=events)
        assert len(chosen) == 2 and set(chosen) == set(workers_info(client))
        assert warned and "restarting" in warned[0]


@pytest.mark.slow
def test_train_ddp_through_the_cli_on_a_local_cluster(small_corpus, tmp_path):
    # 4 GiB: at 3 GiB each worker's 890 MiB share holds a rank with ~50 MiB to spare, and under load
    # (CI building the image beside the suite) the nannies killed both workers for memory.
    p = cli("train", small_corpus, "--ddp", "2", "--workers", "2", "--memory-budget", "4GiB", "--epochs", "2",
            "--buckets", "65536", "--blocksize", "128KiB", "--out", tmp_path / "runs", "--name", "d", "--json-log", tmp_path / "log.jsonl",
            "--checkpoint-every", "4", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    m = json.loads((tmp_path / "runs" / "d" / "metrics.json").read_text())
    assert m["ddp"]["ranks"] == 2 and m["val_accuracy"] > 0.5
    events = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert {e["rank"] for e in events if e["event"] == "rank"} == {0, 1}
    # The ranks paused for checkpoints; the finished run keeps none.
    assert [e["reason"] for e in events if e["event"] == "checkpoint"].count("epoch") == 1
    assert not (tmp_path / "runs" / "d" / CHECKPOINT).exists()


def test_the_dashboard_shows_every_rank_and_their_rows_add_up():
    from lancetnic_flow.ui.dashboard import DashboardState, render, status_line

    s = DashboardState(clock=lambda: 10.0)
    s.update("stage", {"stage": "training", "epoch": 1, "epochs": 2, "total_rows": 1000, "t": 1.0})
    for t, (rank, rows) in enumerate([(0, 200), (1, 150), (0, 400), (1, 380)]):
        s.update("rank", {"rank": rank, "world": 2, "worker": f"tcp://10.0.0.{rank + 1}:40000", "epoch": 1,
                          "epochs": 2, "rows": rows, "rows_per_s": 500.0, "loss": 0.5, "t": 2.0 + t})
    frame = render(s, width=100).plain
    assert "ranks (--ddp 2)" in frame
    assert "rank 0  tcp://10.0.0.1:40000  epoch 1/2 · rows 400" in frame
    assert "rank 1  tcp://10.0.0.2:40000  epoch 1/2 · rows 380" in frame
    assert s.rows == 780 and "rows 780/1,000" in status_line(s) and "ranks 0:400 1:380" in status_line(s)


def _ddp_config(corpus, tmp_path, name: str, every: str, model: str = "ScalpelMC"):
    cfg = make_config(corpus, tmp_path, epochs=3)
    cfg.training.ddp, cfg.training.checkpoint_every = 2, every
    cfg.model.name, cfg.output.name = model, name
    return cfg


def _same_run(a: dict, b: dict) -> None:
    assert b["val_loss"] == pytest.approx(a["val_loss"], rel=1e-6)
    assert b["val_accuracy"] == pytest.approx(a["val_accuracy"], abs=1e-9)
    assert [e["train_loss"] for e in b["epochs"]] == pytest.approx([e["train_loss"] for e in a["epochs"]], rel=1e-6)
    assert b["ddp"]["steps"] == a["ddp"]["steps"]
    assert b["ddp"]["replica_digests"][0] == pytest.approx(a["ddp"]["replica_digests"][0], rel=1e-9)


@pytest.mark.parametrize("model", ["ScalpelMC", "LancetMC"])   # LancetMC: dropout draws resume per rank
def test_ddp_checkpoint_pauses_leave_the_result_unchanged(client, small_corpus, tmp_path, model):
    """Ranks pause every 5 steps and at each epoch end (the trainer writes a
    checkpoint each time, then starts the next segment from it): the run must
    be the one that never paused."""
    ref = _ddp_config(small_corpus, tmp_path, "ref", "off", model)
    paused = _ddp_config(small_corpus, tmp_path, "paused", "5", model)
    if model.startswith("Lancet"):
        for c in (ref, paused):   # token ids: no term weighting to turn off (refused there)
            c.features.max_len, c.model.embed, c.features.sublinear_tf = 32, 32, True
    seen: list[dict] = []
    events = Events()
    events.subscribe(lambda kind, e: seen.append(e) if kind == "checkpoint" else None)
    a = train(ref, client=client).metrics
    b = train(paused, events, client=client).metrics
    assert len(seen) >= 5 and {e["reason"] for e in seen} == {"periodic", "epoch"}
    _same_run(a, b)
    assert not (tmp_path / "runs" / "paused" / CHECKPOINT).exists()   # dropped once the model is saved


def test_a_ddp_epoch_paused_by_checkpoints_reports_its_whole_time_and_every_ranks_rows(client, small_corpus, tmp_path):
    """Each segment after a periodic checkpoint goes on with the epoch's clock and
    each rank's rows: history.csv's seconds and rows/s are the epoch's (they were
    the last segment's alone, rows/s many times too high), and the ranks' last
    reports add up to the epoch's rows (a rank other than 0 counted from 0 again)."""
    seen: list[tuple[str, dict]] = []
    saved: list[dict] = []   # each periodic checkpoint's epoch, rows and seconds, read as it is written

    def listen(kind: str, e: dict) -> None:
        seen.append((kind, e))
        if kind == "checkpoint" and e["reason"] == "periodic":
            state = load_checkpoint(e["run"])
            saved.append({"epoch": state["epoch"] + 1, "rows": state["rows"], "seconds": state.get("seconds", 0.0)})

    events = Events()
    events.subscribe(listen)
    res = train(_ddp_config(small_corpus, tmp_path, "paused", "5"), events, client=client).metrics
    trained = res["rows"]["trained"]
    for record in res["epochs"]:
        epoch = record["epoch"]
        last = {e["rank"]: e["rows"] for k, e in seen if k == "rank" and e["epoch"] == epoch and e.get("done")}
        assert sum(last.values()) == trained == record["rows"]
        pauses = [p for p in saved if p["epoch"] == epoch]
        assert len(pauses) >= 2
        # Every segment adds to the epoch's seconds; the record holds them all.
        seconds = [p["seconds"] for p in pauses] + [record["seconds"]]
        assert all(a < b for a, b in zip(seconds, seconds[1:])), seconds
        assert record["rows_per_s"] == pytest.approx(record["rows"] / record["seconds"])


def _ctrl_c_in_epoch_1() -> Events:
    """Events that send this process one real SIGINT (a Ctrl-C) at the first
    rank report of epoch 1 (a progress report, or the epoch's last one on a
    machine fast enough to need no other): two epochs of slack for it to land."""
    events = Events()
    sent: list[int] = []

    def ctrl_c(kind: str, e: dict) -> None:
        if kind == "rank" and e["epoch"] == 1 and not sent:
            sent.append(e["rows"])
            os.kill(os.getpid(), signal.SIGINT)

    events.subscribe(ctrl_c)
    return events


@pytest.fixture(scope="module")
def ddp_reference(client, corpus4, tmp_path_factory) -> dict:
    """The metrics of one undisturbed --ddp 2 run on corpus4 (never paused: pauses
    do not change a run, see test_ddp_checkpoint_pauses_leave_the_result_unchanged)."""
    return train(_ddp_config(corpus4, tmp_path_factory.mktemp("ddp-ref"), "ref", "off"), client=client).metrics


def test_ddp_ctrl_c_checkpoints_and_resume_ends_with_the_uninterrupted_metrics(client, corpus4, tmp_path,
                                                                                ddp_reference):
    ref = ddp_reference
    with pytest.raises(TrainingInterrupted) as stopped:
        train(_ddp_config(corpus4, tmp_path, "stopped", "off"), _ctrl_c_in_epoch_1(), client=client)
    run = tmp_path / "runs" / "stopped"
    assert f"--resume {run}" in str(stopped.value)
    saved = load_checkpoint(str(run))
    assert saved["ddp"]["ranks"] == 2 and len(saved["ddp"]["rng"]) == 2
    assert saved["epoch"] < 3 and not (run / "model.safetensors").exists()

    res = train(resume_config(str(run)), client=client, resume=str(run))
    assert res.run == str(run) and not (run / CHECKPOINT).exists()
    _same_run(ref, res.metrics)
    assert res.metrics["rows"] == ref["rows"]


def test_a_ddp_checkpoint_cannot_resume_without_ddp_nor_as_another_network(client, corpus4, tmp_path):
    with pytest.raises(TrainingInterrupted):
        train(_ddp_config(corpus4, tmp_path, "d", "off"), _ctrl_c_in_epoch_1(), client=client)
    run = str(tmp_path / "runs" / "d")
    cfg = resume_config(run)
    cfg.training.ddp, cfg.cluster.train_on = None, "client"   # config.json says where it trained: the cluster
    with pytest.raises(UserError, match="the configuration given changes ddp.*the run's: ddp=2"):
        train(cfg, client=client, resume=run)
    original = (Path(run) / "config.json").read_text()
    _edit_config(run, lambda c: c["training"].update(ddp=None) or c["cluster"].update(train_on="client"))
    with pytest.raises(UserError, match="with ddp and cannot continue in the other mode"):
        train(resume_config(run), client=client, resume=run)
    # The checkpoint records its network as a single process's does: an edited config.json is refused.
    (Path(run) / "config.json").write_text(original)
    assert load_checkpoint(run)["network"]["kwargs"]["dropout"] == 0.1
    _edit_config(run, lambda c: c["model"].update(dropout=0.4))
    with pytest.raises(UserError, match=r"holds a network other than .* \(dropout 0\.1 → 0\.4\)"):
        train(resume_config(run), client=client, resume=run)


def _edit_config(run: str, edit) -> None:
    path = Path(run) / "config.json"
    config = json.loads(path.read_text())
    edit(config)
    path.write_text(json.dumps(config))


def _lose_rank_0_after_epoch_1(lose) -> tuple[Events, list[str], list[str]]:
    """Events that call ``lose(worker)`` once, for rank 0's worker, once epoch 1
    is trained; and the workers lost and the warnings seen."""
    events, lost, warnings = Events(), [], []

    def on(kind: str, e: dict) -> None:
        if kind == "warning":
            warnings.append(e["message"])
        if kind == "rank" and e["rank"] == 0 and (e["epoch"] == 2 or e.get("done")) and not lost:
            lost.append(e["worker"])
            lose(e["worker"])

    events.subscribe(on)
    return events, lost, warnings


def test_a_rank_whose_worker_is_killed_restarts_from_the_last_checkpoint_and_the_run_ends_the_same(
        own_cluster, corpus4, tmp_path, ddp_reference):
    pids = own_cluster.run(os.getpid)
    events, killed, warnings = _lose_rank_0_after_epoch_1(lambda w: os.kill(pids[w], signal.SIGKILL))
    res = train(_ddp_config(corpus4, tmp_path, "killed", "5"), events, client=own_cluster)
    assert killed and any(re.search(f"worker {re.escape(killed[0])} left during ddp training; restarting the "
                                    r"ranks from epoch [123], step \d+", w) for w in warnings), warnings
    assert killed[0] not in res.metrics["ddp"]["workers"]   # the ranks ended on the workers there were then
    _same_run(ddp_reference, res.metrics)


def test_a_rank_worker_that_never_comes_back_ends_the_run_in_words_and_resume_on_another_cluster_ends_the_same(
        own_cluster, client, corpus4, tmp_path, ddp_reference, monkeypatch):
    """The scheduler drops rank 0's worker (as it does one it thinks
    unresponsive) and no nanny brings it back: after WORKERS_BACK_S the run
    stops naming the worker and the workers it has, its last checkpoint
    kept; ``--resume`` on a cluster with enough workers ends as if nothing
    had happened."""
    from lancetnic_flow.cli.main import known_failure
    from lancetnic_flow.training.ddp import driver

    monkeypatch.setattr(driver, "WORKERS_BACK_S", 10.0)

    async def drop(dask_scheduler, address):
        return await dask_scheduler.remove_worker(address, stimulus_id="test-drop", close=False)

    # events arrive on the client's event loop: a blocking call from there would never run
    events, dropped, _ = _lose_rank_0_after_epoch_1(lambda w: threading.Thread(
        target=own_cluster.run_on_scheduler, args=(drop,), kwargs={"address": w}).start())
    with pytest.raises(driver.RankWorkersGone) as gone:
        train(_ddp_config(corpus4, tmp_path, "dropped", "5"), events, client=own_cluster)
    assert f"worker {dropped[0]} left during ddp training and the cluster has 1 of the 2 workers" in str(gone.value)   # a Python caller: ddp=
    assert "--resume" in known_failure(gone.value)[1]
    run = tmp_path / "runs" / "dropped"
    assert (run / CHECKPOINT).exists() and not (run / "model.json").exists()
    res = train(resume_config(str(run)), client=client, resume=str(run))
    _same_run(ddp_reference, res.metrics)


# The dropped-rank scenario once hung for over an hour in CI (a cause not found since: twenty runs
# alone and three of this file beside others did not hang). Should it hang again, what every worker's
# threads and the scheduler were doing goes to the test's output, beside pytest-timeout's stacks of
# this process's threads.
STUCK_AFTER_S = 300


def _say_where_stuck(client, finished: threading.Event, seen: list) -> None:
    def stacks() -> str:   # nested: pickled by value, so the workers need not import this file
        import sys
        import traceback

        names = {t.ident: t.name for t in threading.enumerate()}
        return "\n".join(f"--- {names.get(ident)}\n" + "".join(traceback.format_stack(frame)[-10:])
                         for ident, frame in sys._current_frames().items())

    def watch() -> None:
        if finished.wait(STUCK_AFTER_S):
            return
        print(f"stuck after {STUCK_AFTER_S} s; the run's events: {seen[-20:]}", file=sys.stderr, flush=True)
        try:
            print(f"tasks processing: {client.processing()}", file=sys.stderr, flush=True)
            for worker, text in client.run(stacks, on_error="return").items():
                print(f"=== worker {worker}\n{text}", file=sys.stderr, flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"asking the workers failed: {exc!r}", file=sys.stderr, flush=True)

    threading.Thread(target=watch, daemon=True, name="where-stuck").start()


def _a_dropped_rank(corpus4, out, name: str) -> list:
    """Train 40 epochs on 3 workers, the scheduler dropping rank 1's worker at its first
    progress (its process lives on, its rank and rank 0 still stepping together); the
    abandoned segment's events later than 10 s after the drop (rank 0 reports twice a second
    while it steps), once the run has ended whole."""
    from distributed import Client, LocalCluster

    from lancetnic_flow.training.ddp.rank import EVENT_TOPIC

    cluster = LocalCluster(n_workers=3, threads_per_worker=1, processes=True, memory_limit="1.5GiB",
                           dashboard_address=":0", silence_logs=logging.ERROR)
    client = Client(cluster)
    finished, seen = threading.Event(), []
    _say_where_stuck(client, finished, seen)
    try:
        events, dropped = Events(), []
        events.subscribe(lambda kind, e: seen.append((round(time.time(), 1), kind, str(e)[:160]))
                         if kind in ("warning", "ddp", "stage") else None)

        async def drop(dask_scheduler, address):
            return await dask_scheduler.remove_worker(address, stimulus_id="test-drop", close=False)

        def drop_now(address: str) -> None:
            client.run_on_scheduler(drop, address=address)
            dropped.append((address, time.time()))   # dropped from here on: on a loaded host the call takes seconds

        def on(kind: str, e: dict) -> None:
            # The first progress of rank 1: the segment has most of its epochs ahead.
            if kind == "rank" and e["rank"] == 1 and not asked:
                asked.append(e["worker"])
                threading.Thread(target=drop_now, args=(e["worker"],)).start()

        asked: list[str] = []

        events.subscribe(on)
        # 40 epochs: left alone, the abandoned segment would train for many seconds after the drop.
        cfg = _ddp_config(corpus4, out, name, "off")
        cfg.training.epochs = EPOCHS = 40
        res = train(cfg, events, client=client)
        assert dropped, "rank 1 never reported progress"
        worker, at = dropped[0]
        assert worker not in res.metrics["ddp"]["workers"]
        log = [(t, m) for t, m in client.get_events(EVENT_TOPIC) if isinstance(m, dict)]
        first = next(m["segment"] for _, m in log)
        abandoned = [(t, m) for t, m in log if m["segment"] == first]
        done = [t for t, m in log if m["segment"] != first]
        assert done, "no segment ran after the drop"
        # The restart began at the run's start (no checkpoint): the run is whole, trained once.
        assert [e["epoch"] for e in res.metrics["epochs"]] == list(range(1, EPOCHS + 1))
        assert res.metrics["val_accuracy"] > 0.8   # 4 classes: chance is 0.25
        return [(round(t - at, 1), m["kind"], m.get("epoch")) for t, m in abandoned if t > at + 10]
    finally:
        finished.set()
        client.close()
        cluster.close()


def test_a_dropped_rank_whose_worker_lives_on_stops_within_seconds_and_the_restart_ends_as_an_undisturbed_run(
        corpus4, tmp_path):
    """The scheduler drops rank 1's worker (as it drops one that misses its
    heartbeats under load) but the process lives on, its rank and rank 0 still
    stepping together. A third worker lets the run restart at once; the
    abandoned segment must stop at its next step, not train on to its end
    beside the new one while holding rank 0's worker thread (8 ranks on 2
    cores waited over 12 minutes for it). Seen in the scheduler's own log of
    the ranks' events: the abandoned segment falls silent within seconds of
    the drop (about 2 s, also beside 3 busy loops), and the run ends as an
    undisturbed one. In a busy test session it trained on past 10 s once in
    several runs, a race not yet found (docs/reliability.md): a second run of
    the scenario must then be silent. Without the stop both run on (33 late
    events each)."""
    late = _a_dropped_rank(corpus4, tmp_path, "dropped1")
    if late:
        late = _a_dropped_rank(corpus4, tmp_path, "dropped2")
    assert not late, f"the abandoned segment trained on after the drop: {late[:5]} … ({len(late)} events)"


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the CPU fallback")
def test_ranks_fall_back_to_cpu_without_gpus_and_device_cuda_is_refused_naming_the_worker(client):
    from lancetnic_flow.training.ddp.driver import choose_device as _choose_device

    chosen = sorted(client.scheduler_info()["workers"])[:2]
    assert _choose_device(client, chosen, "auto") == ("cpu", [0, 1])   # two ranks on one machine: local 0, 1
    assert _choose_device(client, chosen, "cpu") == ("cpu", [0, 1])
    with pytest.raises(UserError, match=f"worker {chosen[0]} sees 0 CUDA device"):
        _choose_device(client, chosen, "cuda")


@pytest.mark.skipif(__import__("torch").cuda.device_count() < 2, reason="needs 2 GPUs (one per rank)")
def test_ddp_on_cuda_ranks(corpus4, tmp_path):
    """Where CUDA is present: 2 ranks on 2 GPUs with nccl reach the CPU run's accuracy."""
    import logging

    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as c:
        cpu = make_config(corpus4, tmp_path, epochs=3)
        cpu.training.device, cpu.output.name = "cpu", "cpu"
        single = train(cpu, client=c)
        cfg = make_config(corpus4, tmp_path, epochs=3)
        cfg.training.ddp, cfg.training.device, cfg.output.name = 2, "cuda", "gpu"
        res = train(cfg, client=c)
    assert res.metrics["ddp"]["backend"] == "nccl" and res.metrics["ddp"]["device"] == "cuda"
    assert len(set(res.metrics["ddp"]["replica_digests"])) == 1
    assert abs(res.metrics["val_accuracy"] - single.metrics["val_accuracy"]) <= 0.01


def test_ctrl_c_while_a_ddp_run_featurises_stops_before_training_without_a_checkpoint(client, corpus4, tmp_path):
    cfg = _ddp_config(corpus4, tmp_path, "early", "off")
    cfg.cluster.blocksize = 128 * 1024
    seen: list[dict] = []
    events = Events()

    def ctrl_c(kind: str, e: dict) -> None:
        if kind == "featurized":
            seen.append(e)
            if len(seen) == 1:
                os.kill(os.getpid(), signal.SIGINT)

    events.subscribe(ctrl_c)
    with pytest.raises(KeyboardInterrupt) as stopped:
        train(cfg, events, client=client)
    assert type(stopped.value) is KeyboardInterrupt   # not TrainingInterrupted: nothing was trained
    assert seen and len(seen) < seen[0]["total"]      # it did not featurise everything first
    assert not (tmp_path / "runs" / "early" / CHECKPOINT).exists()


def test_a_diverging_ddp_run_ends_in_the_ranks_words_not_a_peers_broken_connection(client, tmp_path):
    """One rank raises "training diverged" at its epoch's end while its peer
    waits in a collective and fails with gloo's "Connection closed by peer":
    before, that second error became the run's (an internal error, exit 1)."""
    path = templated_csv(tmp_path / "templated.csv", rows=1500)
    cfg = make_config(path, tmp_path, epochs=2)
    cfg.data.label, cfg.data.target = None, "y"
    cfg.model = ModelConfig(name="ScalpelReg", layers=0)   # no hidden layer: its width and dropout are refused
    cfg.training.task, cfg.training.ddp = "regress", 2
    cfg.training.sparse_optimizer, cfg.training.sparse_lr = "sgd", 100.0
    with pytest.raises(UserError, match="training diverged"):
        train(cfg, Events(), client=client)


def _linear_config(corpus, tmp_path, name: str, every: str = "off", ddp: int = 2, epochs: int = 3):
    """The default model, its own defaults, on hashed buckets (2^16: small replicas to average)."""
    from lancetnic_flow.config import (ClusterConfig, DataConfig, FeatureConfig, ModelConfig, OutputConfig,
                                       TrainConfig, TrainingConfig)

    return TrainConfig(
        data=DataConfig(train=[str(corpus)]), features=FeatureConfig(buckets=2**16),
        model=ModelConfig(name="LinearSVM"),
        training=TrainingConfig(epochs=epochs, ddp=ddp or None, checkpoint_every=every, device="cpu"),
        cluster=ClusterConfig(blocksize=256 * 1024),
        output=OutputConfig(out=str(tmp_path / "runs"), name=name, cache=str(tmp_path / "cache")))


@pytest.fixture(scope="module")
def linear_reference(client, corpus4, tmp_path_factory) -> dict:
    """One undisturbed LinearSVM --ddp 2 run on corpus4, and the same model in one process."""
    tmp = tmp_path_factory.mktemp("ddp-linear")
    single = train(_linear_config(corpus4, tmp, "single", ddp=0), client=client).metrics
    ddp = train(_linear_config(corpus4, tmp, "ref"), client=client)
    return {"single": single, "ddp": ddp.metrics, "ddp_run": ddp.run}


def test_linear_svm_ranks_find_each_classes_strongest_terms_that_the_saved_model_holds(linear_reference):
    """Rank 0 finds top_terms.csv's weights and terms on the weights it sends
    (calibrated), so the trainer only names them: the same as computed from
    the saved model."""
    import csv

    import numpy as np

    from lancetnic_flow.runs.explain import Decomposition, top_rows
    from lancetnic_flow.runs.loading import read_weights

    run = linear_reference["ddp_run"]
    meta = json.loads(open(os.path.join(run, "model.json")).read())
    best_w, best_i = top_rows(Decomposition(meta, read_weights(run, meta=meta, arrays=True)))
    with open(os.path.join(run, "top_terms.csv")) as fh:
        rows = list(csv.DictReader(fh))
    classes = list(dict.fromkeys(r["class"] for r in rows))
    assert len(classes) == best_w.shape[1] > 1
    for j, name in enumerate(classes):
        order = np.lexsort((best_i[:, j], -best_w[:, j]))
        mine = [r for r in rows if r["class"] == name]
        assert [int(r["feature"]) for r in mine] == best_i[order, j].tolist()
        assert [float(r["weight"]) for r in mine] == pytest.approx(best_w[order, j].tolist(), rel=1e-5)


def test_linear_svm_under_ddp_averages_its_ranks_to_one_model_near_the_single_process_accuracy(linear_reference):
    single, ddp = linear_reference["single"], linear_reference["ddp"]
    assert ddp["model"] == "LinearSVM" and single["model"] == "LinearSVM"
    info = ddp["ddp"]
    assert info["averaged"] and info["ranks"] == 2 and len(set(info["replica_digests"])) == 1
    assert ddp["val_accuracy"] >= single["val_accuracy"] - 0.02, (ddp["val_accuracy"], single["val_accuracy"])
    # Each epoch's sync sends about the replica's bytes (weights + bias, float32) per rank.
    replica = 2**16 * 4 * 4 + 4 * 4
    assert all(3 * replica * 0.9 <= sent <= 3 * replica * 1.1 + 64 for sent in info["rank_sent_bytes"])
    assert ddp["rows"]["trained"] == single["rows"]["trained"]
    # each rank kept the finished shards it read, within its limit (the no-cache ranks, which keep
    # none, end with these ranks' weights: tests/integration/test_nocache.py)
    assert info["keep_limit"] > 0 and all(0 < kept <= info["keep_limit"] for kept in info["rank_kept_bytes"])
    # each rank owns its share for the run: over 3 epochs the ranks read each training shard once between them
    reads = [r["train"] for r in info["rank_shard_reads"]]
    assert sum(reads) == info["train_shards"] and min(reads) > 0, (reads, info["train_shards"])
    # and trains epochs 2 and 3 on the kept rows in place, to the weights of streaming them (test_nocache.py)
    assert info["rank_picked_epochs"] == [2, 2]
    # an epoch's record counts every rank's rows, not rank 0's share
    assert [e["rows"] for e in ddp["epochs"]] == [e["rows"] for e in single["epochs"]]


def test_ranks_quiet_their_workers_housekeeping_while_they_train_and_give_it_back(client, linear_reference):
    """Each rank stopped its worker's profiler and slowed its loop checks for the run
    (training/ddp/quiet.py); the workers have them back as they were once it ended."""
    from lancetnic_flow.training.ddp.quiet import QUIET_MS

    assert linear_reference["ddp"]["ddp"]["rank_quieted"] == [sorted(QUIET_MS)] * 2
    states = client.run(lambda dask_worker: {n: (pc.callback_time, pc.is_running())
                                             for n, pc in dask_worker.periodic_callbacks.items() if n in QUIET_MS})
    for state in states.values():
        assert state["tick"][1] and state["memory_monitor"][1], state
        assert state["tick"][0] != QUIET_MS["tick"] and state["memory_monitor"][0] != QUIET_MS["memory_monitor"], state
        assert "profile" not in state or state["profile"][1], state


def test_linear_svm_ranks_averaging_the_touched_rows_end_with_the_weights_of_averaging_every_row(
        client, corpus4, tmp_path, linear_reference):
    """--sync-rows touched: each sync all-reduces the rows some rank touched
    since the last; the others are equal on both ranks, so their mean is
    themselves and two ranks end bit for bit where averaging every row ends.
    An epoch of this corpus touches most of its 2^16 buckets: about a replica
    and the mask (a byte a row) per sync (fewer rows: the sync-every test)."""
    cfg = _linear_config(corpus4, tmp_path, "touched")
    cfg.training.sync_rows = "touched"
    touched = train(cfg, client=client).metrics
    _same_run(linear_reference["ddp"], touched)
    replica, mask = 2**16 * 4 * 4 + 4 * 4, 2**16
    assert all(3 * mask < sent <= 3 * (replica + mask) for sent in touched["ddp"]["rank_sent_bytes"])


def test_linear_svm_under_ddp_gives_the_same_weights_for_the_same_seed(client, corpus4, tmp_path, linear_reference):
    again = train(_linear_config(corpus4, tmp_path, "again"), client=client).metrics
    _same_run(linear_reference["ddp"], again)
    assert again["ddp"]["sync"] == {"every": 0, "per_epoch": 1, "chosen_by": "default"}   # 2 ranks: epochs' ends


def test_linear_svm_under_ddp_checkpoints_at_its_syncs_only_and_pausing_leaves_the_result_unchanged(
        client, corpus4, tmp_path, linear_reference):
    seen: list[dict] = []
    events = Events()
    events.subscribe(lambda kind, e: seen.append(e) if kind == "checkpoint" else None)
    paused = train(_linear_config(corpus4, tmp_path, "paused", every="5"), events, client=client).metrics
    assert seen and {e["reason"] for e in seen} == {"epoch"}   # every 5 steps asked: the epochs' ends given
    _same_run(linear_reference["ddp"], paused)


def test_linear_svm_ranks_syncing_every_few_steps_stay_equal_and_averaging_touched_rows_send_under_half_a_replica(
        client, corpus4, tmp_path, linear_reference):
    cfg = _linear_config(corpus4, tmp_path, "often")
    cfg.training.sync_every, cfg.training.sync_rows = 2, "touched"
    often = train(cfg, client=client).metrics
    info, ref = often["ddp"], linear_reference["ddp"]["ddp"]
    assert (info["sync"]["every"], info["sync"]["chosen_by"]) == (2, "--sync-every")
    assert len(set(info["replica_digests"])) == 1 and info["replica_digests"] != ref["replica_digests"]
    syncs = info["sync"]["per_epoch"] * len(often["epochs"])   # every 2 steps and each epoch's end, once a step
    replica, mask = 2**16 * 4 * 4 + 4 * 4, 2**16          # two steps touch a fraction of the rows
    assert all(syncs * mask < sent < syncs * replica * 0.5 for sent in info["rank_sent_bytes"])
    assert often["val_accuracy"] >= linear_reference["single"]["val_accuracy"] - 0.02


def test_linear_svm_ranks_send_as_many_syncs_as_ddp_sync_says_when_one_falls_on_an_epochs_last_step(
        client, corpus4, tmp_path, linear_reference):
    """--sync-every the epoch's steps: the cadence's sync falls on the epoch's last
    step, which is its end; it was averaged there and again at the end (twice the
    bytes, for replicas already equal). One sync an epoch, the weights of the default."""
    ref = linear_reference["ddp"]
    cfg = _linear_config(corpus4, tmp_path, "on-the-end")
    cfg.training.sync_every = ref["ddp"]["steps"] // len(ref["epochs"])
    info = train(cfg, client=client).metrics["ddp"]
    assert info["sync"]["per_epoch"] == 1 and info["sync"]["every"] == cfg.training.sync_every
    # the default's bytes: one sync at each of the 3 epochs' ends (about 3 replicas: the first test)
    assert info["rank_sent_bytes"] == ref["ddp"]["rank_sent_bytes"]
    assert info["replica_digests"] == ref["ddp"]["replica_digests"]


def test_a_linear_svm_rank_whose_worker_is_killed_restarts_from_the_last_sync_and_the_run_ends_the_same(
        own_cluster, corpus4, tmp_path, linear_reference):
    pids = own_cluster.run(os.getpid)
    events, killed, warnings = _lose_rank_0_after_epoch_1(lambda w: os.kill(pids[w], signal.SIGKILL))
    res = train(_linear_config(corpus4, tmp_path, "killed", every="5"), events, client=own_cluster)
    assert killed and any(re.search(f"worker {re.escape(killed[0])} left during ddp training; restarting the "
                                    r"ranks from (epoch [23], step 0|the start of training)", w) for w in warnings), warnings
    _same_run(linear_reference["ddp"], res.metrics)


def _stop_events(client) -> set:
    """The trainers' stop events the scheduler holds (a distributed.Event exists there while set)."""
    return set(client.run_on_scheduler(lambda dask_scheduler: [
        str(n) for n in dask_scheduler.extensions["events"]._events if "lancetnic-flow-stop-" in str(n)]))


def test_linear_svm_ranks_stop_on_ctrl_c_and_resume_to_the_uninterrupted_weights(client, corpus4, tmp_path,
                                                                                 linear_reference):
    """A Ctrl-C reaches ranks that average (rank 0 reads the trainer's stop at the
    ranks' meets and at each epoch's end); the checkpoint holds the averaged
    weights, and the resumed run ends where the uninterrupted one did; the stop
    leaves no event on the scheduler, which may outlive many such runs."""
    before = _stop_events(client)
    with pytest.raises(TrainingInterrupted) as stopped:
        train(_linear_config(corpus4, tmp_path, "stopped", every="1"), _ctrl_c_in_epoch_1(), client=client)
    assert _stop_events(client) - before == set()
    run = tmp_path / "runs" / "stopped"
    assert f"--resume {run}" in str(stopped.value)
    assert load_checkpoint(str(run))["epoch"] < 3 and not (run / "model.safetensors").exists()
    res = train(resume_config(str(run)), client=client, resume=str(run))
    _same_run(linear_reference["ddp"], res.metrics)


class _Held:
    """Stands for a segment's state in the frame that waits for the ranks."""


def _hold_and_wait(client, futures, chosen):
    import weakref

    from lancetnic_flow.training.ddp.driver import wait_for_ranks

    state = _Held()
    assert wait_for_ranks(client, futures, chosen, None, None) == [1]
    return weakref.ref(state)


def test_waiting_for_the_ranks_leaves_no_reference_cycle_holding_the_waiting_frames_states(client):
    # distributed.wait(timeout=...) raised a TimeoutError a quarter of a second, each one a cycle through
    # the frames above it: the trainer kept every segment's start and results until the collector ran.
    import gc

    chosen = sorted(client.scheduler_info()["workers"])[:1]
    futures = [client.submit(lambda: time.sleep(1.2) or 1, workers=chosen, pure=False)]
    gc.collect()
    gc.disable()
    try:
        held = _hold_and_wait(client, futures, chosen)
        assert held() is None
    finally:
        gc.enable()


@pytest.mark.timeout(120)
def test_a_finished_rank_whose_worker_is_dropped_before_its_result_is_read_is_a_lost_rank_not_a_wait_forever(
        own_cluster):
    """The scheduler drops a worker (its process lives on) after the rank on it
    finished and before the trainer read its result: the result went with the
    worker, and the rank's task, bound to it, can never run again. Reading the
    results must end as a lost rank within seconds (the segment then runs
    again), not wait for that task forever."""
    from distributed import wait

    from lancetnic_flow.training.ddp import driver

    workers = sorted(own_cluster.scheduler_info()["workers"])
    futures = [own_cluster.submit(lambda r: {"rank": r}, r, workers=[w], allow_other_workers=False, pure=False)
               for r, w in enumerate(workers)]
    wait(futures)

    async def drop(dask_scheduler, address):
        return await dask_scheduler.remove_worker(address, stimulus_id="test-drop", close=False)

    own_cluster.run_on_scheduler(drop, address=workers[1])
    began = time.monotonic()
    with pytest.raises(driver.RankLost) as lost:
        driver.gather_results(own_cluster, futures, workers)
    assert str(lost.value) == workers[1]
    assert time.monotonic() - began < 60
