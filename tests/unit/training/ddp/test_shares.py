"""Each rank's share of the shards (training/ddp/shares.py: share, steps_in, even_out)."""
from __future__ import annotations

import pytest

from lancetnic_flow.dataflow.shards import ShardInfo
from lancetnic_flow.dataflow.stream import epoch_order
from lancetnic_flow.training.ddp.shares import even_out, rank_batches, share, shares, split_batch, steps_in

ROWS = [900, 100, 500, 500, 300, 700, 200, 800, 400, 600, 250, 350]


def _shards(rows: list[int], chunks: int = 1) -> list[ShardInfo]:
    return [ShardInfo(f"s{i}-{c}", "train", i, c, n, n * 10, n * 80, 0)
            for i, n in enumerate(rows) for c in range(chunks)]


def _urls(part: list) -> list[str]:
    return [s.url for s in part]


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("owned", [False, True])
def test_shares_are_disjoint_cover_every_shard_and_hold_similar_rows_every_epoch(world, owned):
    shards = _shards(ROWS, chunks=2)
    for epoch in range(4):
        parts = [share(shards, r, world, 5, epoch, owned) for r in range(world)]
        urls = [u for p in parts for u in _urls(p)]
        assert sorted(urls) == sorted(_urls(shards)) and len(urls) == len(set(urls))
        rows = [sum(s.rows for s in p) for p in parts]
        assert max(rows) - min(rows) <= 2 * max(ROWS)   # at most one partition (two chunks) apart


@pytest.mark.parametrize("world", [2, 4])
def test_an_owned_share_holds_the_same_partitions_every_epoch_visited_in_each_epochs_order(world):
    shards = _shards(ROWS)
    for rank in range(world):
        first = share(shards, rank, world, 5, 0, owned=True)
        orders = [_urls(share(shards, rank, world, 5, e, owned=True)) for e in range(6)]
        assert all(sorted(o) == sorted(_urls(first)) for o in orders)
        assert len({tuple(o) for o in orders}) > 1   # not the same order every epoch
    # dealt again each epoch (a gradient rule), a rank's partitions change
    assert {frozenset(_urls(share(shards, 0, 2, 5, e))) for e in range(6)} != {frozenset(_urls(first))}


def test_an_owned_shares_chunks_stay_together_in_order():
    shards = _shards(ROWS, chunks=3)
    got = share(shards, 1, 2, 9, 3, owned=True)
    assert all(got[i].partition == got[i + 2].partition and [s.chunk for s in got[i:i + 3]] == [0, 1, 2]
               for i in range(0, len(got), 3))


def test_one_rank_visits_the_partitions_in_a_single_process_runs_order_owned_or_not():
    shards = _shards(ROWS)
    for epoch in range(3):
        want = [f"s{i}-0" for i in epoch_order(len(ROWS), 5, epoch)]
        assert _urls(share(shards, 0, 1, 5, epoch, owned=True)) == want == _urls(share(shards, 0, 1, 5, epoch))


def test_steps_in_an_epoch_are_the_largest_owned_shares_batches():
    shards = _shards(ROWS)
    mine = [sum(s.rows for s in share(shards, r, 3, 5, 0, owned=True)) for r in range(3)]
    assert steps_in(shards, 3, 5, 2, 300, owned=True) == max(-(-m // 100) for m in mine)


@pytest.mark.parametrize("world", [2, 3, 4])
def test_ranks_that_exchange_gradients_split_the_batch_by_their_shares_and_step_as_one_process(world):
    """Each step trains the global batch in all and an epoch has a single process's steps, however
    unevenly whole partitions deal: a corpus of one partition on two ranks stepped half batches on
    rank 0 alone, twice a single process's steps at twice the per-example rate."""
    for rows in ([2692], ROWS, [6000, 40, 3]):
        shards = _shards(rows)
        for epoch in range(3):
            sizes = rank_batches(shards, world, 5, epoch, 128)
            mine = [sum(s.rows for s in share(shards, r, world, 5, epoch)) for r in range(world)]
            assert sum(b for b, m in zip(sizes, mine) if m) in (128, 129)   # a share of 3 rows takes one a step
            one = -(-sum(rows) // 128)
            assert one - 1 <= steps_in(shards, world, 5, epoch, 128) <= one + 1
    assert rank_batches(_shards([2692]), 2, 5, 0, 128)[0] == 128
    assert steps_in(_shards([2692]), 2, 5, 0, 128) == 22


def test_a_batch_splits_in_proportion_to_the_shares_into_parts_that_add_up_to_it():
    assert split_batch([1346, 1346], 128) == [64, 64]
    assert split_batch([2000, 692], 128) == [95, 33]
    assert split_batch([100, 100, 100], 100) == [34, 33, 33]   # the remainder to the lower rank
    assert split_batch([10000, 5], 128) == [128, 1]   # a share with a row takes one a step
    assert split_batch([0, 0], 128) == [64, 64]


def test_ranks_that_average_their_weights_take_an_equal_part_of_the_batch_each():
    assert rank_batches(_shards(ROWS), 3, 5, 0, 300, owned=True) == [100, 100, 100]


def _spread(parts: list[list]) -> int:
    rows = [sum(s.rows for s in p) for p in parts]
    return max(rows) - min(rows)


def test_an_owned_deal_evens_out_rows_that_a_seeded_deal_leaves_a_partition_apart():
    # a file cut into blocks of a few MB: partitions of 8,000–9,700 rows and a short last one
    rows = [8000 + (i * 7919) % 1700 for i in range(49)] + [3025]
    shards = _shards(rows)
    for world in (2, 3, 4):
        for seed in (1, 2, 3):
            assert _spread(shares(shards, world, seed, 0, owned=True)) <= 32, (world, seed)   # of ~110,000+
    assert max(_spread(shares(shards, 2, seed, 0)) for seed in (1, 2, 3)) > 1000   # dealt in seeded order


def test_evening_out_never_makes_the_heaviest_share_heavier_and_keeps_every_partition():
    import numpy as np

    rng = np.random.default_rng(4)
    for _ in range(50):
        world = int(rng.integers(2, 6))
        rows = rng.integers(1, 1000, int(rng.integers(world, 30)))
        parts = [[] for _ in range(world)]
        for i in range(len(rows)):
            parts[int(rng.integers(world))].append(i)
        before = max(int(rows[p].sum()) for p in parts)
        even_out(parts, rows, 8 * world)
        assert sorted(i for p in parts for i in p) == list(range(len(rows)))
        assert max(int(rows[p].sum()) for p in parts) <= before


def test_evening_out_moves_a_partition_when_no_swap_is_needed():
    import numpy as np

    parts = [[0, 1, 2], [3]]
    even_out(parts, np.array([5, 5, 4, 6]), 4)
    assert sorted(sum([5, 5, 4, 6][i] for i in p) for p in parts) == [10, 10]
