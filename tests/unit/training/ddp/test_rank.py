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
