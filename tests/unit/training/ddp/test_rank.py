"""One --ddp rank's own bookkeeping (training/ddp/rank.py), without a group:
a stand-in for torch.distributed whose two ranks hold equal replicas."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from lancetnic_flow.training.ddp.rank import RankRun


class TwoEqualRanks:
    """torch.distributed as one of two ranks with equal replicas sees it: a sum doubles."""

    ReduceOp = SimpleNamespace(SUM="sum", MAX="max")

    def __init__(self):
        self.reduced = 0

    def get_world_size(self) -> int:
        return 2

    def all_reduce(self, t: torch.Tensor, op=None) -> None:
        self.reduced += 1
        if op is None:
            t.mul_(2)


def averaging_rank() -> RankRun:
    run = RankRun.__new__(RankRun)   # the averaging alone: no worker, no group
    torch.manual_seed(0)
    run.averaging, run.job, run.model, run.dist = True, SimpleNamespace(world=2), torch.nn.Linear(5, 3), TwoEqualRanks()
    run.touched, run.clock, run.sent_bytes, run.device, run._synced_at = None, {"exchange": 0.0}, 0, "cpu", 0
    return run


def test_a_sync_due_on_an_epochs_last_step_is_not_sent_again_at_the_epochs_end():
    """With --sync-every dividing an epoch's steps, the cadence's last sync fell on the
    epoch's last step and the epoch's end averaged the equal replicas again:
    ddp.rank_sent_bytes counted 9 syncs an epoch where ddp.sync said 8."""
    run = averaging_rank()
    before = {k: v.clone() for k, v in run.model.state_dict().items()}
    run._average(4)                 # a cadence step
    one = run.sent_bytes
    assert one == (5 * 3 + 3) * 4   # a ring over two ranks sends the replica once
    run._average(4)                 # the epoch ends at that step: nothing more to send
    assert run.sent_bytes == one
    run._average(6)                 # steps since: a sync
    assert run.sent_bytes == 2 * one
    assert all(torch.equal(before[k], v) for k, v in run.model.state_dict().items())   # equal replicas' mean


def test_an_epoch_or_segment_that_starts_from_a_sync_and_ends_without_a_step_sends_nothing():
    run = averaging_rank()
    run._average(0)
    assert run.sent_bytes == 0 and run.dist.reduced == 0


class PeerDigest(TwoEqualRanks):
    """As TwoEqualRanks, but the other rank's digest is ``theirs`` (its weights differ: a bug)."""

    def __init__(self, theirs: int):
        super().__init__()
        self.theirs = theirs

    def all_reduce(self, t: torch.Tensor, op=None) -> None:
        if op == "max":   # the digest's check: [digest, ~digest] as int64 bits, on each rank
            signed = self.theirs - (1 << 64) if self.theirs >= 1 << 63 else self.theirs
            torch.maximum(t, torch.tensor([signed, ~signed], dtype=torch.int64), out=t)
            return
        super().all_reduce(t, op)


def test_replicas_whose_digests_differ_after_a_sync_stop_the_run_rather_than_train_on():
    import pytest

    run = averaging_rank()
    mine = run.digest()
    for theirs in (mine + 1, (mine + (1 << 63)) % (1 << 64), (mine - 1) % (1 << 64)):
        run = averaging_rank()
        run.dist = PeerDigest(theirs)
        with pytest.raises(RuntimeError, match="replicas differ after averaging"):
            run._average(3)


def test_equal_replicas_pass_the_check_whatever_half_of_the_digests_range_they_fall_in():
    halves = set()
    for width in (5, 2000):   # the larger's digest is 2^63 or more: it travels as a negative int64
        run = averaging_rank()
        torch.manual_seed(0)
        run.model = torch.nn.Linear(width, 100)
        halves.add(run.digest() >= 1 << 63)
        run.dist = PeerDigest(run.digest())
        run._average(3)
        assert run.sent_bytes > 0
    assert halves == {False, True}


def test_kept_row_steps_run_together_up_to_the_next_meet_sync_or_planned_step_and_never_past_them():
    from lancetnic_flow.training.ddp.cadence import Cadence
    from lancetnic_flow.training.ddp.rank import PICKED_RUN_ROWS

    def run_from(done: int, meet_at: int, planned: int, every: int, batch_rows: int = 256, left: int = 10**6) -> list:
        run = RankRun.__new__(RankRun)
        run.picked, run._meets = object(), SimpleNamespace(next=meet_at)
        stream = iter([[0] * batch_rows] * left)
        return run._picked_run(next(stream), stream, done, planned, Cadence(every, 1, "test"))

    assert len(run_from(done=32, meet_at=40, planned=2000, every=0)) == 8           # up to the meet's step
    assert len(run_from(done=92, meet_at=4000, planned=2000, every=100)) == 8       # up to the next sync (step 100)
    assert len(run_from(done=1990, meet_at=4000, planned=1995, every=0)) == 5       # the planned last step
    assert len(run_from(done=1995, meet_at=1996, planned=1995, every=0)) == 1       # past it: a step at a time
    assert len(run_from(done=0, meet_at=4000, planned=4000, every=0)) == PICKED_RUN_ROWS // 256
    assert len(run_from(done=0, meet_at=4000, planned=4000, every=0, batch_rows=512)) == PICKED_RUN_ROWS // 512
    assert len(run_from(done=0, meet_at=40, planned=4000, every=0, left=3)) == 3    # the share runs out first
    plain = RankRun.__new__(RankRun)
    plain.picked = None                                                             # streamed batches: one a step
    assert plain._picked_run([1], iter([[2], [3]]), 0, 100, Cadence(0, 1, "test")) == [[1]]
    assert plain._picked_run(None, iter([]), 0, 100, Cadence(0, 1, "test")) == [None]
