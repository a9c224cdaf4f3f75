"""dataflow/fresh.py: without a cache, every pass featurises the partitions
again and hands over the very blocks a cached feed reads, in the cached
order — training rows only in an epoch, validation rows only in a
validation pass — and writes no shard."""
from __future__ import annotations

import dataclasses

import numpy as np

from lancetnic_flow.config import FeatureConfig
from lancetnic_flow.dataflow.feed import ShardFeed
from lancetnic_flow.dataflow.fresh import FreshFeed, fit_partition_counted
from lancetnic_flow.dataflow.inprocess import InProcessClient
from lancetnic_flow.dataflow.shards import PartitionResult, count_partition
from lancetnic_flow.dataflow.stream import cached_blocks
from lancetnic_flow.events import NULL_EVENTS
from lancetnic_flow.features.fit import finish_fit
from lancetnic_flow.features.vocab import merge_stats

from .conftest import BLOCKSIZE, COLUMNS, VAL_FRACTION, make_entry


def same_blocks(a, b) -> None:
    a, b = list(a), list(b)
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        for name in ("indices", "offsets", "values", "labels"):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name))


def trained_counts(spec) -> list[PartitionResult]:
    stats = merge_stats([fit_partition_counted(p, COLUMNS, FeatureConfig(**spec.feature_config), {}, BLOCKSIZE,
                                               VAL_FRACTION) for p in spec.train.partitions])
    return stats.results


def test_each_epoch_and_validation_pass_gives_the_cached_feeds_blocks_and_writes_nothing(tmp_path):
    entry = make_entry(tmp_path)
    cached = ShardFeed(None, entry.spec, NULL_EVENTS)
    spec = dataclasses.replace(entry.spec, entry=None, cache_options={})
    with InProcessClient(2) as client:
        fresh = FreshFeed(client, spec, NULL_EVENTS, trained=trained_counts(spec), results=None)
        for epoch in range(3):
            blocks, source = fresh.train_blocks(epoch)
            assert source == "fresh"
            same_blocks(blocks(), cached.train_blocks(epoch)[0]())
            assert fresh.has_val()
            same_blocks(fresh.val_blocks(), cached.val_blocks())
    assert fresh.total_rows() == cached.total_rows()
    assert sorted((r.partition, r.rows_read, r.train_rows, r.val_rows) for r in fresh.results()) == sorted(
        (r.partition, r.rows_read, r.train_rows, r.val_rows) for r in cached.results())
    assert all(not r.shards for r in fresh.results())   # counts kept, the shards' bytes gone with their blocks


def test_later_epochs_visit_the_partitions_with_training_rows_in_the_cached_order(tmp_path):
    """A partition without training rows has no training shard: a cached epoch
    orders the others, and so must a fresh one (hashing features: from epoch 1)."""
    entry = make_entry(tmp_path)
    parts = entry.spec.train.partitions
    assert len(parts) >= 4
    spec = dataclasses.replace(entry.spec, features=dataclasses.replace(entry.spec.features, mode="hashing"))
    trained = [PartitionResult(partition=p.index, train_rows=0 if p.index == 1 else 5) for p in parts]
    fresh = FreshFeed(None, spec, NULL_EVENTS, trained=trained, results=trained)
    shards = [s for r in entry.results if r.partition != 1 for s in r.shards if s.split == "train"]
    for epoch in range(3):
        want = []
        list(cached_blocks(shards, spec.seed, epoch, lambda s: want.append(s.partition)))
        got = [p.index for p, _ in fresh._epoch_jobs(epoch)]
        assert got == list(dict.fromkeys(want)) and 1 not in got


def test_counting_pass_without_a_cache_counts_rows_and_keeps_no_shard(tmp_path):
    entry = make_entry(tmp_path)
    fcfg = FeatureConfig(mode="hashing", buckets=2**10, analyzer="word")
    part = entry.spec.train.partitions[0]
    stats = count_partition(part, None, columns=COLUMNS, fcfg=fcfg, shard_dir=None, storage_options={},
                            cache_options={}, chunk_bytes=BLOCKSIZE, val_fraction=VAL_FRACTION, keep=())
    (res,) = stats.results
    assert res.shards == [] and res.train_rows == stats.docs > 0 and res.val_rows > 0
    assert finish_fit(stats, fcfg, COLUMNS).idf is not None


def test_has_val_says_whether_a_cached_run_would_have_validation_shards(tmp_path):
    entry = make_entry(tmp_path)
    spec = dataclasses.replace(entry.spec, features=dataclasses.replace(entry.spec.features, mode="hashing"))
    # A raw validation shard keeps rows of labels training never saw until it is read: it exists.
    only_unknown = [PartitionResult(partition=0, train_rows=5, skipped={"unknown_label": 2})]
    none = [PartitionResult(partition=0, train_rows=5)]
    assert FreshFeed(None, spec, NULL_EVENTS, trained=only_unknown, results=only_unknown).has_val()
    assert not FreshFeed(None, spec, NULL_EVENTS, trained=none, results=none).has_val()


def test_pieces_a_rank_featurises_itself_give_the_cached_shards_rows_and_the_accounting(tmp_path):
    """--cache none with ranks on the workers: each piece read by a FreshReader
    (in the rank's thread) gives the cached shards of its partition, the
    training pieces carry the fit pass's row counts the deal balances on, and
    the accounting the reads made comes back to the feed."""
    entry = make_entry(tmp_path)
    cached = ShardFeed(None, entry.spec, NULL_EVENTS)
    spec = dataclasses.replace(entry.spec, entry=None, cache_options={})
    with InProcessClient(2) as client:
        fresh = FreshFeed(client, spec, NULL_EVENTS, trained=trained_counts(spec), results=None)
        train, val, reader = fresh.pieces()
    shards = cached.manifest.shards("train")
    assert [p.partition for p in train] == sorted({s.partition for s in shards})
    assert [p.rows for p in train] == [sum(s.rows for s in shards if s.partition == p.partition) for p in train]
    assert val and {p.keep for p in val} == {"val"} and {p.keep for p in train} == {"train"}
    counted: dict = {}
    same_blocks((b for p in train for b in reader.blocks(p, spec.features, counted)),
                (cached.load(s) for s in sorted(shards, key=lambda s: (s.partition, s.chunk))))
    same_blocks((b for p in val for b in reader.blocks(p, spec.features, counted)),
                (cached.load(s) for s in sorted(cached.manifest.shards("val"), key=lambda s: (s.partition, s.chunk))))
    fresh.counted_by_ranks(counted)
    assert sorted((r.partition, r.rows_read, r.train_rows, r.val_rows) for r in fresh.results()) == sorted(
        (r.partition, r.rows_read, r.train_rows, r.val_rows) for r in cached.results())


def test_rows_cut_at_max_len_are_counted_in_both_splits_as_a_cached_run_counts_them(tmp_path):
    """A pass without a cache tokenises one split: the training pass counts its rows
    cut at a sequence model's max_len, the validation pass adds its own, once
    however many epochs (and ranks) read them; the total is the cached run's."""
    from lancetnic_flow.features.vectorize import TRUNCATED

    entry = make_entry(tmp_path, fcfg=FeatureConfig(mode="ids", max_len=4))   # every row holds 5 tokens
    cached = ShardFeed(None, entry.spec, NULL_EVENTS)
    kept = sum(r.train_rows + r.val_rows for r in cached.results())
    assert sum(r.noted.get(TRUNCATED, 0) for r in cached.results()) == kept > 0
    spec = dataclasses.replace(entry.spec, entry=None, cache_options={})
    with InProcessClient(2) as client:
        fresh = FreshFeed(client, spec, NULL_EVENTS, trained=trained_counts(spec), results=None)
        for epoch in range(2):
            list(fresh.train_blocks(epoch)[0]())
            list(fresh.val_blocks())
        ranks = FreshFeed(client, spec, NULL_EVENTS, trained=trained_counts(spec), results=None)
        train, val, reader = ranks.pieces()
        for _ in range(2):   # two ranks, each reading every piece: counted once
            counted: dict = {}
            for piece in [*train, *val, *train]:
                list(reader.blocks(piece, spec.features, counted))
            ranks.counted_by_ranks(counted)
    for feed in (fresh, ranks):
        assert sum(r.noted.get(TRUNCATED, 0) for r in feed.results()) == kept
