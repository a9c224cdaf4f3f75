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
    with pytest.raises(UserError, match="--ddp 2 needs 2 Dask workers, the cluster has 1") as resumed:
        preflight(OneWorker(), 2, 0, resuming=True)
    assert "lower --ddp" not in resumed.value.hint
    assert "--workers 2" in resumed.value.hint and "--scheduler" in resumed.value.hint
    with pytest.raises(UserError) as new_run:   # a new run may take fewer ranks
        preflight(OneWorker(), 2, 0)
    assert "--workers 2" in new_run.value.hint and "lower --ddp" in new_run.value.hint
