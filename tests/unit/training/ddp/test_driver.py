"""training/ddp/driver.py's relay: a rank's events reach the trainer's
dashboard as a run in the trainer's process would emit them: a single trainer
task's progress as ``batch``, several ranks' as ``rank``, rank 0's stages as
``stage``."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from lancetnic_flow.errors import UserError
from lancetnic_flow.events import Events
from lancetnic_flow.training.ddp.driver import RankDriver, preflight
from lancetnic_flow.ui.dashboard import DashboardState, milestone


def driver(world: int) -> tuple[RankDriver, list]:
    seen: list = []
    events = Events()
    events.subscribe(lambda kind, e: seen.append((kind, e)))
    d = RankDriver.__new__(RankDriver)   # the relay alone: no cluster
    d.job, d.events, d.received, d.total_rows = SimpleNamespace(world=world), events, {}, 1000
    d.segments = {"s"}
    return d, seen


def msg(kind: str, rank: int = 0, world: int = 1, segment: str = "s", **data) -> tuple:
    return ("t", {"kind": kind, "rank": rank, "world": world, "segment": segment, "worker": "tcp://w:1", **data})


def test_a_single_trainer_tasks_events_look_like_a_local_runs_to_the_dashboard():
    d, seen = driver(1)
    d.relay(msg("stage", stage="training", epoch=1, epochs=2, total_rows=1000, source="cluster", ranks=1))
    d.relay(msg("progress", epoch=1, epochs=2, rows=400, rows_per_s=100.0, tokens=4000, loss=0.5))
    d.relay(msg("epoch", record={"epoch": 1, "train_loss": 0.4, "val_accuracy": 0.9}))
    assert [k for k, _ in seen] == ["stage", "batch", "epoch"]
    assert "rank" not in seen[0][1] and "worker" not in seen[0][1]
    batch = {k: v for k, v in seen[1][1].items() if k != "t"}   # the event's time aside
    assert batch == {"epoch": 1, "rows": 400, "total_rows": 1000, "loss": 0.5, "tokens": 4000}
    state = DashboardState()
    for kind, e in seen:
        state.update(kind, e)
    assert (state.stage, state.epoch, state.rows, state.total_rows, state.tokens) == ("training", 1, 400, 1000, 4000)
    assert not state.ranks   # no box of ranks: it looks like a run in the trainer's process
    assert d.received == {("s", 0): 3}   # counted: the driver waits for every event a segment sent


def test_several_ranks_progress_stays_per_rank():
    d, seen = driver(2)
    d.relay(msg("progress", rank=1, world=2, epoch=1, epochs=2, rows=10, rows_per_s=5.0))
    assert seen[0][0] == "rank" and seen[0][1]["rank"] == 1


def test_the_ddp_milestone_says_where_the_model_trains():
    assert milestone("ddp", {"ranks": 1, "workers": ["tcp://w:1"], "device": "cpu"}) == (
        "training on the cluster: one trainer task on tcp://w:1 (cpu)")
    assert "2 ranks on tcp://a:1, tcp://b:1" in milestone("ddp", {"ranks": 2, "workers": ["tcp://a:1", "tcp://b:1"],
                                                                "backend": "gloo", "device": "cpu"})


def test_events_of_another_runs_ranks_on_the_same_cluster_are_not_relayed():
    """The event topic is the cluster's: runs sharing a cluster must not show
    each other's epochs (a regression's val_loss in a classifier's dashboard)."""
    d, seen = driver(1)
    d.relay(msg("epoch", segment="another-run", record={"epoch": 1, "val_loss": 0.3}))
    d.relay(msg("progress", segment="another-run", epoch=1, epochs=2, rows=10, rows_per_s=5.0))
    assert seen == [] and d.received == {}


class OneWorker:   # the in-process stand-in's answer: a cluster of one worker
    scheduler = None

    def scheduler_info(self):
        return {"workers": {"tcp://w:1": {"memory_limit": 0}}}


def test_too_few_workers_for_a_resumed_ddp_run_are_refused_offering_only_what_resume_accepts():
    """--resume keeps the run's --ddp (its checkpoint holds that many ranks' state):
    the hint offers more workers, never a lower --ddp, which --resume refuses."""
    with pytest.raises(UserError, match="ddp 2 needs 2 Dask workers, the cluster has 1") as resumed:
        preflight(OneWorker(), 2, 0, resuming=True)
    message, hint = resumed.value.said("cli")
    assert message.startswith("--ddp 2 needs") and "lower --ddp" not in hint
    assert "--workers 2" in hint and "--scheduler" in hint
    with pytest.raises(UserError) as new_run:   # a new run may take fewer ranks
        preflight(OneWorker(), 2, 0)
    assert "--workers 2" in new_run.value.said("cli")[1] and "lower --ddp" in new_run.value.said("cli")[1]
    assert "workers 2" in new_run.value.hint and "lower ddp" in new_run.value.hint


class Weights:
    """Stands for a state's tensors: the test follows it with a weak reference."""


class Segments:
    """A cluster stand-in for RankDriver.run: each segment pauses with a new state
    (its weights followed weakly) until ``pauses`` have passed; ``lose`` segments
    (by number) lose their rank's worker once."""

    def __init__(self, monkeypatch, pauses: int, lose: tuple = ()):
        import weakref

        from lancetnic_flow.training.ddp import driver as drv

        self.pauses, self.lose, self.n, self.alive_while_training, self.shipped = pauses, set(lose), 0, [], []
        self.refs: list = []
        self.weakref = weakref
        monkeypatch.setattr("distributed.Event", lambda *a, **k: SimpleNamespace(set=lambda: None, clear=lambda: None))
        monkeypatch.setattr(drv, "share", lambda client, start, **k: self.shipped.append(
            None if start is None else (start.epoch, start.batches)) or "shipped")
        monkeypatch.setattr(drv, "wait_for_ranks", self.wait)
        monkeypatch.setattr(drv, "forget_segment", lambda client, segment: None)
        monkeypatch.setattr(drv.RankDriver, "place", lambda d: setattr(d, "chosen", ["tcp://w:1"]))
        monkeypatch.setattr(drv.RankDriver, "_retire_stop_event", lambda d: None)
        self.client = SimpleNamespace(scheduler=SimpleNamespace(address="tcp://s:1"), submit=lambda *a, **k: None,
                                      subscribe_topic=lambda *a: None, unsubscribe_topic=lambda *a: None,
                                      wait_for_workers=lambda *a, **k: None)

    def state(self, at: int):
        from lancetnic_flow.training.state import TrainState

        weights = Weights()
        self.refs.append(self.weakref.ref(weights))
        return TrainState(epoch=0, batches=at, model={"w": weights})

    def wait(self, client, futures, chosen, stop, stop_event) -> list:
        from lancetnic_flow.training.ddp.driver import RankLost

        self.n += 1
        self.alive_while_training.append(sum(r() is not None for r in self.refs))
        if self.n in self.lose:
            self.lose.discard(self.n)
            raise RankLost("tcp://w:1")
        common = {"events": 0, "clock": {}, "digest": 1.0, "rng": "rng"}
        if len(self.refs) < self.pauses:
            return [{"reason": "periodic", "state": self.state(len(self.refs) + 1), **common}]
        return [{"reason": "done", "weights": {}, "history": [], "confusions": [], "best": None, "last_val": {},
                 "calibration": None, "calibrate_seconds": 0.0, "steps": 1, **common}]


def segments_job():
    from lancetnic_flow.config import CheckpointEvery, TrainingConfig
    from lancetnic_flow.training.ddp.rank import RankJob

    return RankJob(world=1, training=TrainingConfig(), net="n", model_kwargs={}, task={}, train_shards=[],
                   val_shards=[], cache_options={}, every=CheckpointEvery(batches=1))


def test_the_trainer_holds_no_checkpointed_state_while_the_next_segment_trains(monkeypatch):
    # Each segment's start stayed referenced until the next state arrived beside it: two states at each pause.
    cluster = Segments(monkeypatch, pauses=6)
    written: list = []
    d = RankDriver(cluster.client, segments_job(), Events())
    d.run(None, lambda reason, at: written.append(at.batches), reload=lambda: pytest.fail("nothing was lost"))
    assert written == [1, 2, 3, 4, 5, 6]
    assert cluster.shipped == [(0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6)]
    assert cluster.alive_while_training == [0] * 7


def test_a_segment_lost_after_a_checkpoint_restarts_from_the_checkpoint_read_back(monkeypatch):
    from lancetnic_flow.training.state import TrainState

    cluster = Segments(monkeypatch, pauses=3, lose=(3,))
    seen: list = []
    events = Events()
    events.subscribe(lambda kind, e: seen.append(e.get("message")) if kind == "warning" else None)
    d = RankDriver(cluster.client, segments_job(), events)
    d.run(None, lambda reason, at: None, reload=lambda: TrainState(epoch=0, batches=2, model={"w": "read back"}))
    # the third segment (from the second pause) was lost: it ran again from the checkpoint, read back once
    assert cluster.shipped == [(0, 1), (0, 2), (0, 2), (0, 3)]
    assert seen == ["worker tcp://w:1 left during training on the cluster; restarting the trainer task from "
                    "epoch 1, step 2"]


def test_without_a_reader_a_lost_segment_restarts_from_the_state_kept_in_memory(monkeypatch):
    cluster = Segments(monkeypatch, pauses=2, lose=(2,))
    d = RankDriver(cluster.client, segments_job(), Events())
    d.run(None, lambda reason, at: None)
    assert cluster.shipped == [(0, 1), (0, 1), (0, 2)]


class Workers:
    """A cluster of workers with the given memory limits (0: none)."""

    scheduler = None

    def __init__(self, **limits):
        self.limits = limits

    def scheduler_info(self):
        return {"workers": {f"tcp://{w}:1": {"memory_limit": lim} for w, lim in self.limits.items()}}


def test_ranks_go_to_workers_that_hold_one_passing_over_a_smaller_worker_first_by_address():
    """An existing cluster of two 4 GiB workers and a 700 MiB one between them
    by address was refused for --ddp 2 naming the small one; the large ones hold the ranks."""
    cluster = Workers(a=4 << 30, b=700 << 20, c=4 << 30)
    rank = 644 << 20
    assert preflight(cluster, 2, rank) == ["tcp://a:1", "tcp://c:1"]
    assert preflight(cluster, 1, rank) == ["tcp://a:1"]
    assert preflight(Workers(a=0, b=700 << 20), 2, 10 << 20) == ["tcp://a:1", "tcp://b:1"]   # no limit holds one
    with pytest.raises(UserError, match=r"worker tcp://b:1 has a 700.0 MiB memory limit; 2 of the 3 workers can "
                                        r"hold one, ddp 3 needs 3"):
        preflight(cluster, 3, rank)
    with pytest.raises(UserError, match=r"worker tcp://a:1 has a 700.0 MiB memory limit") as none_holds:
        preflight(Workers(a=700 << 20), 1, rank)
    assert "can hold one" not in str(none_holds.value)
