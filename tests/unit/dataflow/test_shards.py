"""dataflow/shards.py: a featurised partition's rows land in train and val
shards whose size and CRC-32 the result records; a damaged or missing shard
is refused and rebuilt by the repair given; the counting pass's raw shards
finish into the same rows."""
from __future__ import annotations

import csv
import dataclasses
import os

import numpy as np
import pyarrow as pa
import pyarrow.csv  # noqa: F401  (pa.csv)
import pytest

from lancetnic_flow.config import FeatureConfig
from lancetnic_flow.data.readers import read_partition
from lancetnic_flow.data.sources import plan_source
from lancetnic_flow.dataflow.shards import (PartitionResult, ShardError, count_partition, featurize_partition,
                                            SHARD_READS, load_or_repair, load_shard, recount_partition)
from lancetnic_flow.features.fit import finish_fit, fit_partition
from lancetnic_flow.data.usable import text_rule
from lancetnic_flow.features import register_tokenizer
from lancetnic_flow.features.rows import RowBlock
from lancetnic_flow.features.split import validation_mask
from lancetnic_flow.features.vocab import merge_stats

from .conftest import BLOCKSIZE, COLUMNS, VAL_FRACTION, write_rows


def partition_table(part):
    return pa.concat_tables([c.table for c in read_partition(part, COLUMNS, chunk_bytes=BLOCKSIZE)])


def test_a_partitions_shards_hold_its_train_and_val_rows_and_their_counts(entry):
    part = entry.spec.train.partitions[1]
    res = entry.results[1]
    table = partition_table(part)
    mask = validation_mask(table, VAL_FRACTION)
    assert res.partition == part.index and res.rows_read == table.num_rows
    assert (res.train_rows, res.val_rows) == (int((~mask).sum()), int(mask.sum()))
    train = [load_shard(s, {}) for s in res.shards if s.split == "train"]
    want = entry.spec.features.transform(table.filter(pa.array(~mask)))
    got = train[0] if len(train) == 1 else type(want).concat(train)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.labels, want.labels)
    for s in res.shards:
        assert os.path.getsize(s.url) == s.bytes and s.rows > 0


def test_a_forced_split_puts_every_row_of_the_partition_in_it(entry, tmp_path):
    part = entry.spec.train.partitions[0]
    res = featurize_partition(part, "val", columns=COLUMNS, features=entry.spec.features,
                              shard_dir=str(tmp_path / "forced"), storage_options={}, cache_options={},
                              chunk_bytes=BLOCKSIZE, val_fraction=VAL_FRACTION)
    assert res.train_rows == 0 and res.val_rows == res.rows_read > 0
    assert {s.split for s in res.shards} == {"val"}


def test_a_shard_whose_bytes_differ_from_the_manifest_is_refused(entry):
    info = entry.results[0].shards[0]
    with open(info.url, "r+b") as f:
        f.seek(info.bytes // 2)
        byte = f.read(1)
        f.seek(info.bytes // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ShardError, match="damaged"):
        load_shard(info, {})


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_load_or_repair_rebuilds_a_missing_or_damaged_shard_to_the_same_rows(entry, damage):
    info = entry.results[0].shards[0]
    before = load_shard(info, {})
    if damage == "missing":
        os.remove(info.url)
    else:
        with open(info.url, "r+b") as f:
            f.truncate(info.bytes - 10)
    spec = entry.spec
    repaired = []

    def repair(shard):   # what ShardFeed asks a worker to do: featurise the partition again
        repaired.append(shard.url)
        featurize_partition(spec.train.partitions[shard.partition], None, columns=COLUMNS,
                            features=spec.features, shard_dir=os.path.dirname(shard.url), storage_options={},
                            cache_options={}, chunk_bytes=BLOCKSIZE, val_fraction=VAL_FRACTION)

    after = load_or_repair(info, {}, repair)
    assert repaired == [info.url]
    np.testing.assert_array_equal(after.indices, before.indices)
    np.testing.assert_array_equal(after.values, before.values)


def test_load_or_repair_does_not_repair_a_sound_shard(entry):
    info = entry.results[0].shards[0]
    load_or_repair(info, {}, lambda s: pytest.fail("repaired a sound shard"))


def test_raw_shards_of_the_counting_pass_finish_into_the_rows_transform_gives(tmp_path):
    data = write_rows(tmp_path / "d.csv")
    fcfg = FeatureConfig(mode="hashing", buckets=2**10, analyzer="word")
    part = plan_source([str(data)], blocksize=2**30).partitions[0]
    stats = count_partition(part, None, columns=COLUMNS, fcfg=fcfg, shard_dir=str(tmp_path / "raw"),
                            storage_options={}, cache_options={}, chunk_bytes=2**30, val_fraction=VAL_FRACTION)
    features = finish_fit(stats, fcfg, COLUMNS)
    (res,) = stats.results
    assert all(s.raw for s in res.shards)
    table = partition_table(part)
    mask = validation_mask(table, VAL_FRACTION)
    want = features.transform(table.filter(pa.array(~mask)))
    got = features.finish(load_shard(next(s for s in res.shards if s.split == "train"), {}))
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_allclose(got.values, want.values, rtol=1e-6)
    np.testing.assert_array_equal(got.labels, want.labels)
    assert stats.docs == int((~mask).sum())


def test_drop_unknown_counts_validation_rows_of_labels_training_never_saw_as_skipped():
    res = PartitionResult(partition=0, val_rows=10, skipped={"malformed": 1}, val_labels={"a": 6, "zz": 4})
    res.drop_unknown(["a", "b"])
    assert res.val_rows == 6 and res.skipped == {"malformed": 1, "unknown_label": 4} and res.val_labels == {}
    same = dataclasses.replace(res, val_labels={"a": 2})
    same.drop_unknown(["a"])
    assert same.val_rows == 6 and same.skipped["unknown_label"] == 4


def test_drop_unknown_notes_validation_labels_the_run_holds_in_another_spelling_and_keeps_their_rows():
    res = PartitionResult(partition=0, val_rows=10, val_labels={"1": 6, "zz": 4})
    res.drop_unknown(["1.0", "2.0"])
    assert res.val_rows == 6 and res.skipped == {"unknown_label": 4}
    assert res.noted == {"label_as_run:1 as 1.0": 6, "label_as_run": 6}
    sets = PartitionResult(partition=0, val_rows=10, val_labels={"1": 6, "zz": 4})
    sets.drop_unknown(["1.0"], sets=True)   # a label set keeps its row, less the label
    assert sets.val_rows == 10 and sets.skipped == {} and sets.noted["label_as_run"] == 6


@pytest.mark.parametrize("multilabel", [False, True])
def test_a_validation_file_spelling_the_runs_labels_otherwise_is_featurised_as_the_runs_labels(tmp_path, multilabel):
    """A --val file whose labels spell the training labels' values otherwise (a Parquet float
    column's 1 for a CSV's 1.0) validates as those labels, counted, in the fitted-vocabulary
    modes (featurised) and with hashing (finished from the counting pass's raw shards)."""
    (tmp_path / "v.csv").write_text("text,label\ngoal team,1\nsoup bread,2\nchip code,2.0\ndisk cloud,9\n")
    columns = dataclasses.replace(COLUMNS, multilabel=multilabel)
    part = plan_source([str(tmp_path / "v.csv")], blocksize=2**30).partitions[0]
    kw = dict(columns=columns, storage_options={}, cache_options={}, chunk_bytes=2**30, val_fraction=VAL_FRACTION)
    want = [[1, 0], [0, 1], [0, 1], [0, 0]] if multilabel else [0, 1, 1]
    for mode in ("tfidf", "hashing"):
        fcfg = FeatureConfig(mode=mode, ngrams=1, analyzer="word", buckets=2**10)
        features = finish_fit(fit_partition(part, columns, fcfg, {}, 2**30, VAL_FRACTION), fcfg, columns)
        features.labels = ["1.0", "2.0"]
        if mode == "tfidf":
            res = featurize_partition(part, "val", features=features, shard_dir=str(tmp_path / mode), **kw)
        else:
            stats = count_partition(part, "val", fcfg=fcfg, shard_dir=str(tmp_path / mode), **kw)
            res = stats.results[0]
            res.drop_unknown(features.labels, sets=multilabel)
        (val,) = [features.finish(load_shard(s, {})) if s.raw else load_shard(s, {}) for s in res.shards]
        assert val.labels.tolist() == want, mode
        assert res.noted == {"label_as_run:1 as 1.0": 1, "label_as_run:2 as 2.0": 1, "label_as_run": 2}, mode
        assert res.skipped.get("unknown_label", 0) == (0 if multilabel else 1), mode


def test_rows_spelling_a_label_otherwise_train_as_the_runs_and_only_the_validation_rows_are_noted(tmp_path):
    """A continued run's new data (1 for the run's 1.0): every row is the run's label; the rows
    noted (``label_as_run``) are the validation rows', as the hashing fit pass counts them."""
    data = write_rows(tmp_path / "d.csv")
    table = pa.csv.read_csv(data).replace_schema_metadata(None)
    rows = table.set_column(1, "label", pa.array(["1"] * table.num_rows))
    pa.csv.write_csv(rows, tmp_path / "one.csv")
    part = plan_source([str(tmp_path / "one.csv")], blocksize=2**30).partitions[0]
    fcfg = FeatureConfig(mode="tfidf", ngrams=1, analyzer="word")
    features = finish_fit(fit_partition(part, COLUMNS, fcfg, {}, 2**30, VAL_FRACTION), fcfg, COLUMNS)
    features.labels = ["1.0"]
    res = featurize_partition(part, None, columns=COLUMNS, features=features, shard_dir=str(tmp_path / "c"),
                              storage_options={}, cache_options={}, chunk_bytes=2**30, val_fraction=VAL_FRACTION)
    assert 0 < res.val_rows < res.train_rows and res.train_rows + res.val_rows == table.num_rows
    assert res.noted == {"label_as_run:1 as 1.0": res.val_rows, "label_as_run": res.val_rows}
    assert all((load_shard(s, {}).labels == 0).all() for s in res.shards)


def test_every_shard_this_process_loads_is_counted_with_its_bytes(entry):
    """The trainer's metrics.json reports ``client_shard_reads`` from this
    counter: a run that trains on the cluster must show 0, so a read here must count."""
    shards = [s for r in entry.results for s in r.shards][:2]
    before = SHARD_READS.now()
    for s in shards:
        load_shard(s, {})
    count, size = SHARD_READS.now()
    assert count - before[0] == 2
    assert size - before[1] == sum(s.bytes for s in shards)


def test_without_a_cache_a_partitions_shards_come_in_the_result_as_the_bytes_a_cache_holds(entry):
    """--cache none: the same shards, carried in the result, of the splits asked for only; every row counted."""
    part, written = entry.spec.train.partitions[1], entry.results[1]
    reads = SHARD_READS.now()
    res = featurize_partition(part, None, columns=COLUMNS, features=entry.spec.features, shard_dir=None,
                              storage_options={}, cache_options={}, chunk_bytes=BLOCKSIZE,
                              val_fraction=VAL_FRACTION, keep=("train",))
    assert (res.train_rows, res.val_rows, res.rows_read) == (written.train_rows, written.val_rows, written.rows_read)
    train = [s for s in written.shards if s.split == "train"]
    assert [s.data for s in res.shards] == [open(s.url, "rb").read() for s in train] and res.shards
    assert all(s.url == "" and s.split == "train" for s in res.shards)
    np.testing.assert_array_equal(load_shard(res.shards[0], {}).indices, load_shard(train[0], {}).indices)
    assert SHARD_READS.now()[0] == reads[0] + 1   # the cached one: bytes in a result are no cache read


def test_without_a_cache_one_splits_pass_counts_the_other_untokenised_as_a_cached_pass_does(tmp_path):
    """A validation row whose label training never had: skipped as unknown_label
    by a pass that featurises it, and by one that only counts it."""
    data = write_rows(tmp_path / "d.csv")
    table = pa.csv.read_csv(data)
    rows = table.to_pylist()
    val = np.flatnonzero(validation_mask(table, VAL_FRACTION))
    rows[int(val[0])]["label"] = "only-in-validation"
    with open(data, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["text", "label"])
        w.writeheader()
        w.writerows(rows)
    part = plan_source([str(data)], blocksize=2**30).partitions[0]
    fcfg = FeatureConfig(mode="tfidf", ngrams=1, analyzer="word")
    features = finish_fit(fit_partition(part, COLUMNS, fcfg, {}, 2**30, VAL_FRACTION), fcfg, COLUMNS)
    assert "only-in-validation" not in features.labels
    kw = dict(columns=COLUMNS, features=features, storage_options={}, cache_options={}, chunk_bytes=2**30,
              val_fraction=VAL_FRACTION)
    cached = featurize_partition(part, None, shard_dir=str(tmp_path / "c"), **kw)
    counts = lambda r: (r.rows_read, r.train_rows, r.val_rows, r.skipped)   # noqa: E731
    assert cached.skipped == {"unknown_label": 1}
    for name in ("train", "val"):
        fresh = featurize_partition(part, None, shard_dir=None, keep=(name,), **kw)
        assert counts(fresh) == counts(cached) and {s.split for s in fresh.shards} == {name}


def test_an_epoch_without_a_cache_finishes_the_rows_a_cached_raw_shard_finishes_into(tmp_path):
    """Hashing features: the raw counts of one split's rows, made alone, finish into the cached shard's rows."""
    data = write_rows(tmp_path / "d.csv")
    fcfg = FeatureConfig(mode="hashing", buckets=2**10, analyzer="word")
    part = plan_source([str(data)], blocksize=BLOCKSIZE).partitions[1]
    stats = count_partition(part, None, columns=COLUMNS, fcfg=fcfg, shard_dir=str(tmp_path / "raw"),
                            storage_options={}, cache_options={}, chunk_bytes=BLOCKSIZE, val_fraction=VAL_FRACTION)
    features = finish_fit(stats, fcfg, COLUMNS)
    for name in ("train", "val"):
        fresh = recount_partition(part, None, columns=COLUMNS, fcfg=fcfg, storage_options={}, chunk_bytes=BLOCKSIZE,
                                  val_fraction=VAL_FRACTION, keep=(name,))
        want = [features.finish(load_shard(s, {})) for s in stats.results[0].shards if s.split == name]
        got = [features.finish(load_shard(s, {})) for s in fresh.shards]
        assert len(got) == len(want) > 0 and all(s.raw and s.data for s in fresh.shards)
        for a, b in zip(got, want):
            for field in ("indices", "offsets", "values", "labels"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


@pytest.mark.parametrize("mode", ["tfidf", "hashing"])
def test_a_validation_shard_names_the_labels_training_never_had_of_its_own_rows_only(tmp_path, mode):
    """Label sets split by hash: each validation shard counts, per row and by name, the labels
    of its rows that training never had (a training row of the same chunk adds none), whether
    featurised or finished from the counting pass's raw counts."""
    rows = [{"text": f"{w} row{i} text", "label": "a|new" if i % 4 == 0 else "b"}
            for i, w in enumerate(["goal", "soup", "chip"] * 40)]
    table = pa.Table.from_pylist(rows)
    is_val = validation_mask(table, VAL_FRACTION)
    assert 0 < is_val.sum() < len(rows)
    with open(tmp_path / "d.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["text", "label"])
        w.writeheader()
        w.writerows([r if v else {**r, "label": r["label"].replace("|new", "")} for r, v in zip(rows, is_val)])
    columns = dataclasses.replace(COLUMNS, multilabel=True, label_sep="|")
    part = plan_source([str(tmp_path / "d.csv")], blocksize=2**30).partitions[0]
    fcfg = FeatureConfig(mode=mode, ngrams=1, analyzer="word", buckets=2**10)
    kw = dict(columns=columns, storage_options={}, cache_options={}, chunk_bytes=2**30, val_fraction=VAL_FRACTION)
    if mode == "tfidf":
        features = finish_fit(fit_partition(part, columns, fcfg, {}, 2**30, VAL_FRACTION), fcfg, columns)
        res = featurize_partition(part, None, features=features, shard_dir=str(tmp_path / "c"), **kw)
    else:
        stats = count_partition(part, None, fcfg=fcfg, shard_dir=str(tmp_path / "c"), **kw)
        features, res = finish_fit(stats, fcfg, columns), stats.results[0]
    assert "new" not in features.labels
    (val,) = [features.finish(load_shard(s, {})) if s.raw else load_shard(s, {}) for s in res.shards
              if s.split == "val"]
    want = [1 if r["label"] == "a|new" else 0 for r, v in zip(rows, is_val) if v]
    assert sum(want) > 0 and val.missed.tolist() == want and val.missed_by_label() == {"new": sum(want)}


CALLS: dict[str, int] = {}


def _counting_split(text: str) -> list[str]:
    CALLS[text] = CALLS.get(text, 0) + 1
    return [w for w in text.split() if any(c.isalnum() for c in w)]


COUNTING = register_tokenizer("unit-counting-split", _counting_split)


@pytest.mark.parametrize("mode", ["tfidf", "hashing"])
def test_an_own_tokenizer_runs_once_a_row_in_each_pass_with_the_terms_and_skips_of_two_runs(tmp_path, mode):
    data = write_rows(tmp_path / "train.csv")
    with open(data, "a", newline="") as f:   # rows the tokenizer reads no token from: empty_text
        f.write("   ,food\n... ,tech\n")
    fcfg = FeatureConfig(mode=mode, ngrams=1, analyzer="word", tokenizer=COUNTING)
    columns = dataclasses.replace(COLUMNS, text_rule=text_rule(fcfg))
    plan = plan_source([str(data)], blocksize=BLOCKSIZE)
    CALLS.clear()
    if mode == "hashing":
        fitted = [count_partition(p, None, columns=columns, fcfg=fcfg, shard_dir=str(tmp_path / "raw"),
                                  storage_options={}, cache_options={}, chunk_bytes=BLOCKSIZE,
                                  val_fraction=VAL_FRACTION) for p in plan.partitions]
    else:
        fitted = [fit_partition(p, columns, fcfg, {}, BLOCKSIZE, VAL_FRACTION) for p in plan.partitions]
    assert max(CALLS.values()) == 1 and len(CALLS) == 241   # every text not blank, once, in the fit pass
    stats = merge_stats(fitted)
    assert stats.skipped == {"empty_text": 2}
    features = finish_fit(stats, fcfg, columns)
    if mode == "hashing":
        return
    CALLS.clear()
    results = [featurize_partition(p, None, columns=columns, features=features, shard_dir=str(tmp_path / "s"),
                                   storage_options={}, cache_options={}, chunk_bytes=BLOCKSIZE,
                                   val_fraction=VAL_FRACTION) for p in plan.partitions]
    assert max(CALLS.values()) == 1 and len(CALLS) == 241
    table = pa.concat_tables([c.table for p in plan.partitions
                              for c in read_partition(p, columns, chunk_bytes=BLOCKSIZE)]).select(["text", "label"])
    mask = validation_mask(table, VAL_FRACTION)
    want = features.transform(table.filter(pa.array(~mask)))   # the texts alone: tokenised here, again
    got = RowBlock.concat([load_shard(s, {}) for r in results for s in r.shards if s.split == "train"])
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.values, want.values)
    assert sum(r.skipped.get("empty_text", 0) for r in results) == 2
