"""The meets of ranks that average weights (training/ddp/meets.py), on a real
one-rank gloo group in this process: what a meet answers, and when the next falls."""
from __future__ import annotations

import pytest
import torch.distributed as dist

from lancetnic_flow.training.ddp.cadence import MEET_FIRST
from lancetnic_flow.training.ddp.meets import Meets


@pytest.fixture(scope="module")
def group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield dist
    dist.destroy_process_group()


def test_a_meet_answers_with_the_previous_meets_agreement_so_no_rank_waits_at_it(group):
    meets = Meets(group, "cpu", 0, 0)
    assert meets.due(MEET_FIRST, 10**6) and not meets.due(MEET_FIRST - 1, 10**6)
    assert meets.meet(MEET_FIRST, 10**6, True, 2) == (1, 0)      # nothing read yet: go on
    assert meets.pending is not None
    assert meets.meet(meets.next, 10**6, False, 0) == (1, 2)     # the first meet's word, read at the second
    assert meets.meet(meets.next, 10**6, False, 0) == (0, 0)     # the second's: no rank had a batch
    assert meets.drain() == 0 and meets.pending is None


def test_the_next_meet_falls_where_rank_0_proposed_at_the_meet_read(group):
    meets = Meets(group, "cpu", 0, 0)
    assert meets.next == MEET_FIRST
    meets.meet(MEET_FIRST, 10**6, True, 0)
    assert meets.next == 2 * MEET_FIRST          # the first proposal is read at the next meet only
    meets.meet(2 * MEET_FIRST, 10**6, True, 0)
    assert meets.next > 2 * MEET_FIRST + MEET_FIRST   # steps of microseconds: rank 0 proposed more than the first


def test_meets_from_the_planned_last_step_wait_and_keep_a_word_still_in_flight(group):
    meets = Meets(group, "cpu", 0, 5)
    assert meets.meet(MEET_FIRST + 5, 100, True, 1) == (1, 0)   # a stop posted, not read yet
    assert meets.due(100, 100) and meets.due(101, 100)
    assert meets.meet(100, 100, True, 0) == (1, 1)   # the end: this meet's answer, the earlier stop kept
    assert meets.pending is None and meets.next == 101
    assert meets.meet(101, 100, False, 0) == (0, 0)
