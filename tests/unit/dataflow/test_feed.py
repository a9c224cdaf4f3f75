"""dataflow/feed.py: a ShardFeed over a complete cache entry (no client, as a
tune trial reads it) gives every training row once per epoch, in a seeded
partition order, and the validation rows; an incomplete or stale entry is not
complete."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from lancetnic_flow.dataflow.feed import ShardFeed
from lancetnic_flow.events import NULL_EVENTS
from lancetnic_flow.features.rows import RowBlock
from lancetnic_flow.features.split import validation_mask

from .conftest import VAL_FRACTION, make_entry


def row_set(blocks) -> list[tuple]:
    block = RowBlock.concat(list(blocks))
    return sorted((int(block.labels[i]), tuple(block.indices[block.offsets[i]:block.offsets[i + 1]].tolist()),
                   tuple(np.round(block.values[block.offsets[i]:block.offsets[i + 1]], 5).tolist()))
                  for i in range(len(block)))


def expected(entry, val: bool) -> list[tuple]:
    table = entry.table.select(["text", "label"])
    mask = validation_mask(table, VAL_FRACTION)
    return row_set([entry.spec.features.transform(table.filter(pa.array(mask if val else ~mask)))])


def test_a_feed_over_a_finished_entry_is_complete_and_counts_its_training_rows(entry):
    feed = ShardFeed(None, entry.spec, NULL_EVENTS)
    assert feed.complete
    mask = validation_mask(entry.table.select(["text"]), VAL_FRACTION)
    assert feed.total_rows() == int((~mask).sum()) == sum(r.train_rows for r in entry.results)
    assert feed.has_val()


def test_an_entry_without_its_manifest_is_not_complete_and_counts_the_fit_pass_rows(tmp_path):
    entry = make_entry(tmp_path, finish=False)
    feed = ShardFeed(None, entry.spec, NULL_EVENTS)
    assert not feed.complete
    assert feed.total_rows() == entry.spec.features.docs


def test_a_manifest_of_another_key_is_stale(tmp_path):
    entry = make_entry(tmp_path)
    other = ShardFeed(None, type(entry.spec)(**{**entry.spec.__dict__, "key": "another-key"}), NULL_EVENTS)
    assert not other.complete


def test_each_epoch_reads_every_training_row_once_from_the_cache(entry):
    feed = ShardFeed(None, entry.spec, NULL_EVENTS)
    want = expected(entry, val=False)
    for epoch in range(3):
        blocks, source = feed.train_blocks(epoch)
        assert source == "cache"
        assert row_set(blocks()) == want


def test_epochs_visit_the_partitions_in_a_seeded_order_that_changes_per_epoch(entry):
    assert len(entry.spec.train.partitions) >= 4
    feed = ShardFeed(None, entry.spec, NULL_EVENTS)

    def first_rows(epoch):
        return [b.labels[:3].tolist() + b.indices[:3].tolist() for b in feed.train_blocks(epoch)[0]()]

    assert first_rows(0) == first_rows(0)
    assert first_rows(0) != first_rows(1)


def test_the_validation_blocks_are_the_held_out_rows(entry):
    feed = ShardFeed(None, entry.spec, NULL_EVENTS)
    assert row_set(feed.val_blocks()) == expected(entry, val=True)


def test_kept_shards_are_read_once_and_give_every_epoch_the_same_batches_as_reading_them_again(entry):
    from lancetnic_flow.dataflow.shards import SHARD_READS
    from lancetnic_flow.dataflow.stream import BatchStream

    def epochs(feed):
        out = []
        for epoch in range(3):
            blocks, _ = feed.train_blocks(epoch)
            out.append([(b.indices.copy(), b.values.copy(), b.labels.copy()) for b in BatchStream(
                blocks, batch_size=7, shuffle_buffer=20, seed=0, epoch=epoch)])
            out.append([(b.indices.copy(), b.values.copy(), b.labels.copy()) for b in feed.val_blocks()])
        return out

    plain = ShardFeed(None, entry.spec, NULL_EVENTS)
    reads = SHARD_READS.now()[0]
    want = epochs(plain)
    every_epoch = SHARD_READS.now()[0] - reads
    kept = ShardFeed(None, entry.spec, NULL_EVENTS)
    kept.keep(1 << 30)
    reads = SHARD_READS.now()[0]
    got = epochs(kept)
    shards = sum(len(r.shards) for r in entry.results)
    assert SHARD_READS.now()[0] - reads == shards < every_epoch   # each shard once, not once an epoch
    assert kept.kept_shards()["shards"] == shards and 0 < kept.kept_shards()["bytes"] <= 1 << 30
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert len(g) == len(w)
        for a, b in zip(g, w):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)


def test_shards_are_kept_only_up_to_the_limit_and_the_rest_read_each_epoch(entry):
    feed = ShardFeed(None, entry.spec, NULL_EVENTS)
    sizes = sorted(feed.load(s).nbytes for r in entry.results for s in r.shards)
    feed = ShardFeed(None, entry.spec, NULL_EVENTS)
    feed.keep(sizes[0] + sizes[1] - 1)   # room for one shard or two small ones, never all
    want = expected(entry, val=False)
    for epoch in range(2):
        blocks, _ = feed.train_blocks(epoch)
        assert row_set(blocks()) == want
    info = feed.kept_shards()
    assert 1 <= info["shards"] < len(sizes) and info["bytes"] <= info["limit"] == sizes[0] + sizes[1] - 1
    assert ShardFeed(None, entry.spec, NULL_EVENTS).kept_shards()["shards"] == 0   # nothing kept unless asked
