"""How often LinearSVM's --ddp ranks average: the default grows with the ranks; --sync-every wins."""
import pytest

from lancetnic_flow.training.ddp.cadence import EPOCH_SYNC_RANKS, cadence, syncs_per_epoch
from lancetnic_flow.ui.dashboard.summary import milestone


@pytest.mark.parametrize("ranks, want", [(1, 1), (2, 1), (4, 1), (5, 2), (6, 3), (8, 4), (16, 16)])
def test_the_default_syncs_once_an_epoch_up_to_four_ranks_then_more_with_more_ranks(ranks, want):
    assert syncs_per_epoch(ranks) == want


def test_the_default_spreads_its_syncs_evenly_over_the_epochs_steps():
    c = cadence(8, 95, None)
    assert (c.every, c.chosen_by) == (23, "default")
    due = [step for step in range(1, 96) if c.due(step)]
    assert due == [23, 46, 69, 92]          # and the epoch's end (95) syncs anyway
    assert c.per_epoch == 5


def test_up_to_four_ranks_the_default_syncs_only_at_the_epochs_end():
    for ranks in range(1, EPOCH_SYNC_RANKS + 1):
        c = cadence(ranks, 1000, None)
        assert c.every == 0 and c.per_epoch == 1 and not any(c.due(s) for s in range(1, 1001))


def test_an_epoch_shorter_than_the_syncs_asked_syncs_every_step_not_never():
    c = cadence(16, 3, None)
    assert c.every == 1 and all(c.due(s) for s in (1, 2, 3))


def test_sync_every_is_the_users_whatever_the_ranks():
    c = cadence(16, 95, 40)
    assert (c.every, c.per_epoch, c.chosen_by) == (40, 3, "--sync-every")
    assert cadence(2, 95, 10).every == 10


def test_the_run_says_how_often_its_ranks_average():
    assert "at each epoch's end" in cadence(2, 95, None).describe(2)
    assert "every 23 steps, 5 times an epoch (8 ranks" in cadence(8, 95, None).describe(8)
    assert "(--sync-every;" in cadence(2, 95, 10).describe(2)
    line = milestone("ddp", {"ranks": 8, "workers": ["tcp://a:1"], "backend": "gloo", "device": "cpu",
                             "sync": cadence(8, 95, None).describe(8)})
    assert line.startswith("training on the cluster: 8 ranks on tcp://a:1 (gloo, cpu); the 8 ranks average")


def test_ranks_meet_about_every_quarter_second_of_steps_within_bounds():
    from lancetnic_flow.training.ddp.cadence import MEET_FIRST, MEET_MAX, MEET_SECONDS, meet_interval

    assert meet_interval(MEET_SECONDS / 500) == 500            # fast steps: fewer meets
    assert meet_interval(1.0) == MEET_FIRST                     # slow steps: never under the first interval
    assert meet_interval(1e-9) == MEET_MAX                      # nor over the last
    assert meet_interval(0.0) == meet_interval(float("nan")) == MEET_FIRST   # nothing measured yet
