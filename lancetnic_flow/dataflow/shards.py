"""Shards: featurised partitions, written to the cache by the workers.

The worker that featurises a partition writes its rows straight to the cache
(a local folder or any fsspec URL) and returns only addresses and counts,
so no feature array crosses the scheduler. Each shard's size and CRC-32 go
into the manifest (:mod:`.manifest`): a damaged shard is detected on read
and rebuilt from its partition.

Without a cache (``--cache none``, ``shard_dir=None``) the same tasks return
the packed bytes of the splits asked for (``keep``) in the result instead of
writing them: the trainer decodes exactly the bytes a cached run would read.
"""
from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from ..allocator import trim_allocator
from ..data.readers import read_partition
from ..data.sources import Columns, Partition
from ..config import FeatureConfig
from ..features.fit import bucket_frequencies, table_stats
from ..features.names import sample_names
from ..features.rows import RowBlock
from ..features.fit import record_held_out
from ..features.label_values import counted_names, in_run_spelling, noted_read_as
from ..features.labelsets import unseen_per_row
from ..features.split import Holdout, learned_rows, split_rows
from ..features.vectorize import TRUNCATED, FittedFeatures, cut_rows, text_options
from ..features.vocab import FitStats, merge_stats
from ..storage import join, read_bytes, write_bytes


@dataclass
class ShardInfo:
    url: str
    split: str          # "train" or "val"
    partition: int
    chunk: int
    rows: int
    nnz: int
    bytes: int
    crc32: int
    raw: bool = False   # term counts of the counting fit pass: FittedFeatures.finish makes them model rows
    data: bytes | None = None   # the shard's bytes, carried in the result when there is no cache (url is "")


@dataclass
class PartitionResult:
    partition: int
    shards: list[ShardInfo] = field(default_factory=list)
    rows_read: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    noted: dict[str, int] = field(default_factory=dict)   # rows kept but read changed, by reason (Chunk.noted)
    train_rows: int = 0
    val_rows: int = 0
    tokens: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    val_labels: dict[str, int] = field(default_factory=dict)   # raw val shards: labels of their rows
    # A pass that tokenised one split only (no cache): the split whose rows noted counts cut at max_len.
    cut_splits: list[str] = field(default_factory=list)

    def drop_unknown(self, labels: list[str], sets: bool = False) -> None:
        """Raw val shards, once the label set is known: a label the run holds in another
        spelling of its value is read as the run's when the shard is finished
        (:meth:`~lancetnic_flow.features.vectorize.FittedFeatures.finish`), so
        noted; a row whose label no training row had in any spelling is dropped
        when read, so counted as skipped (``sets``: label sets, whose row stays)."""
        read_as, unknown_names = counted_names(self.val_labels, labels)
        noted_read_as(self.noted, read_as)
        unknown = 0 if sets else sum(unknown_names.values())
        if unknown:
            self.val_rows -= unknown
            self.skipped["unknown_label"] = self.skipped.get("unknown_label", 0) + unknown
        self.val_labels = {}


SPLITS = ("train", "val")
# Validation rows a continued run's model had learned: noted where the hash held them out (they
# train instead), skipped where a separate validation source holds them.
LEARNED = "learned_by_init"


def _write_split(parts: dict[str, RowBlock], shard_dir: str | None, part: Partition, chunk: int,
                 cache_options: dict, res: "PartitionResult", raw: bool, keep: tuple[str, ...] = SPLITS) -> None:
    """Write a chunk's train and val rows as shards; count them in ``res``.

    Every split is counted; only those in ``keep`` are stored: written under
    ``shard_dir``, or with no cache (``shard_dir`` None) carried in the result."""
    for name, rows in parts.items():
        if not len(rows):
            continue
        if name == "train":
            res.train_rows += len(rows)
        else:
            res.val_rows += len(rows)
        if name not in keep:
            continue
        data = rows.to_bytes()
        url = "" if shard_dir is None else join(shard_dir, f"part-{part.index:06d}-{chunk:04d}.{name}.npz")
        if shard_dir is not None:
            write_bytes(url, data, cache_options)
        res.shards.append(ShardInfo(url, name, part.index, chunk, len(rows), int(rows.offsets[-1]),
                                    len(data), zlib.crc32(data), raw, data=None if shard_dir is not None else data))


def _tables(part: Partition, columns: Columns, storage_options: dict, chunk_bytes: int,
            res: "PartitionResult", split: str | None = None, held: float | Holdout = 0.0) -> Iterator[pa.Table]:
    """A partition's chunks as tables, their rows read, skipped and noted counted in ``res``.
    A separate validation source (``split`` "val") leaves out the rows a continued
    run's model learned (``held``): skipped, as they would not test it."""
    for chunk in read_partition(part, columns, storage_options=storage_options, chunk_bytes=chunk_bytes):
        res.rows_read += chunk.rows_read
        for k, v in chunk.skipped.items():
            res.skipped[k] = res.skipped.get(k, 0) + v
        for k, v in chunk.noted.items():
            res.noted[k] = res.noted.get(k, 0) + v
        table = chunk.table
        learned = learned_rows(table, held) if split == "val" else None
        if learned is not None and learned.any():
            res.skipped[LEARNED] = res.skipped.get(LEARNED, 0) + int(learned.sum())
            table = table.filter(pa.array(~learned))
        yield table


def _val_mask(table: pa.Table, split: str | None, val_fraction: float | Holdout,
              res: "PartitionResult") -> np.ndarray:
    """Which rows are validation rows: all or none for a forced ``split``, else by
    hash, less the rows a continued run's model learned, which train (counted in
    ``res`` as noted: kept, but not held out)."""
    is_val, learned = split_rows(table, val_fraction, split)
    if learned:
        res.noted[LEARNED] = res.noted.get(LEARNED, 0) + learned
    return is_val


def _by_split(block: RowBlock, is_val: np.ndarray) -> dict[str, RowBlock]:
    if is_val.all() or not is_val.any():   # one split: no copy
        return {"val" if is_val.all() else "train": block}
    return {"train": block.take(np.flatnonzero(~is_val)), "val": block.take(np.flatnonzero(is_val))}


def _featurized_split(block: RowBlock, is_val: np.ndarray, table: pa.Table,
                      features: FittedFeatures) -> dict[str, RowBlock]:
    """:func:`_by_split` of a featurised chunk: a validation block cut from the
    chunk's rows names the labels training never had of its own rows (the
    chunk's named those of every row), so its figures count each such label."""
    parts = _by_split(block, is_val)
    val = parts.get("val")
    if val is not None and val is not block and val.missed is not None:
        val.set_missed(val.missed, unseen_per_row(table["label"].filter(pa.array(is_val)), features.labels)[1])
    return parts


def _in_run_labels(table: pa.Table, is_val: np.ndarray, labels: list[str], res: "PartitionResult") -> pa.Table:
    """``table`` with each label the run holds in another spelling of its value (a --val
    Parquet's 1 for a CSV's 1.0; a continued run's new data) as the run's. The validation
    rows' are noted in ``res``, as the counting pass notes them (:meth:`PartitionResult.drop_unknown`)."""
    if is_val.all():
        return in_run_spelling(table, labels, res.noted)
    if is_val.any():
        in_run_spelling(table.filter(pa.array(is_val)), labels, res.noted)
    return in_run_spelling(table, labels, {})


def count_partition(part: Partition, split: str | None, *, columns: Columns, fcfg: FeatureConfig,
                    shard_dir: str | None, storage_options: dict, cache_options: dict, chunk_bytes: int,
                    val_fraction: float | Holdout, keep: tuple[str, ...] = SPLITS) -> FitStats:
    """Worker task of the hashing features' fit pass: one partition's fit
    statistics, with its term counts written as raw shards on the way — the
    corpus is tokenised once, and every epoch reads these shards. With no
    cache (``shard_dir`` None, ``keep`` empty) the rows are only counted.

    ``split`` forces every row into one split (a separate validation source);
    otherwise rows go to train or val by :func:`~lancetnic_flow.features.split.validation_mask`."""
    t0 = time.monotonic()
    counter = FittedFeatures(mode="hashing", **text_options(fcfg), buckets=fcfg.buckets)
    res = PartitionResult(partition=part.index)
    stats: list[FitStats] = []
    for ci, table in enumerate(_tables(part, columns, storage_options, chunk_bytes, res, split, val_fraction)):
        is_val = _val_mask(table, split, val_fraction, res)
        block = counter.raw(table)
        res.tokens += int(block.values.sum())
        s = table_stats(table, ~is_val, columns.numeric)
        record_held_out(s, table, is_val, val_fraction)
        s.buckets = bucket_frequencies(block, ~is_val, fcfg.buckets)
        # The buckets' names (top_terms.csv): the terms of a bounded sample of the training rows.
        texts = counter.texts(table)
        s.names = sample_names(counter, texts.filter(pa.array(~is_val)) if is_val.any() else texts)
        stats.append(s)
        _write_split(_by_split(block, is_val), shard_dir, part, ci, cache_options, res, raw=True, keep=keep)
        del block, table
    out = merge_stats(stats) if stats else FitStats()
    out.rows_read, out.skipped, out.tokens = res.rows_read, dict(res.skipped), res.tokens
    res.val_labels = dict(out.val_labels)
    res.bytes_read = out.bytes_read = part.length if part.length > 0 else part.file.size
    res.seconds = time.monotonic() - t0
    out.results = [res]
    del stats
    trim_allocator()
    return out


def _one_split(table: pa.Table, is_val: np.ndarray, name: str, res: "PartitionResult",
               unknown: Callable[[pa.Table], int] | None = None) -> pa.Table:
    """No cache, one split wanted: that split's rows, the only ones worth
    tokenising (a validation pass reads a tenth of the rows it would); the
    other split's rows are counted untokenised, validation rows whose label
    training never had (``unknown``) as the skip a tokenised pass would count."""
    mine = is_val if name == "val" else ~is_val
    other = int((~mine).sum())
    if name == "val":
        res.train_rows += other
    elif other:
        dropped = unknown(table.filter(pa.array(~mine))) if unknown is not None else 0
        res.val_rows += other - dropped
        if dropped:
            res.skipped["unknown_label"] = res.skipped.get("unknown_label", 0) + dropped
    return table if mine.all() else table.filter(pa.array(mine))


def count_once(counted: dict, key: tuple, res: PartitionResult) -> None:
    """Keep the first row accounting of each partition (``key``: its source and
    index) in ``counted``. A pass without a cache tokenises one split only, so it
    counts the rows cut at a sequence model's max_len of that split alone: the
    first pass over the other split adds its own, once."""
    first = counted.setdefault(key, res)
    new = [s for s in res.cut_splits if s not in first.cut_splits]
    if first is res or not first.cut_splits or not new:
        return
    if res.noted.get(TRUNCATED):
        first.noted[TRUNCATED] = first.noted.get(TRUNCATED, 0) + res.noted[TRUNCATED]
    first.cut_splits = first.cut_splits + new


def recount_partition(part: Partition, split: str | None, *, columns: Columns, fcfg: FeatureConfig,
                      storage_options: dict, chunk_bytes: int, val_fraction: float | Holdout,
                      keep: tuple[str]) -> PartitionResult:
    """Worker task of an epoch without a cache, hashing features: the raw
    shards of split ``keep`` that :func:`count_partition` would have written,
    carried in the result. Made from that split's rows alone: a row's counts
    are its own, and the labels go by name, so the finished rows are the same."""
    t0 = time.monotonic()
    res = PartitionResult(partition=part.index)
    counter = FittedFeatures(mode="hashing", **text_options(fcfg), buckets=fcfg.buckets)
    (name,) = keep
    for ci, table in enumerate(_tables(part, columns, storage_options, chunk_bytes, res, split, val_fraction)):
        block = counter.raw(_one_split(table, _val_mask(table, split, val_fraction, res), name, res))
        res.tokens += int(block.values.sum())
        _write_split({name: block}, None, part, ci, {}, res, raw=True, keep=keep)
        del block, table
    res.bytes_read = part.length if part.length > 0 else part.file.size
    res.seconds = time.monotonic() - t0
    trim_allocator()
    return res


def featurize_partition(part: Partition, split: str | None, *, columns: Columns, features: FittedFeatures,
                        shard_dir: str | None, storage_options: dict, cache_options: dict, chunk_bytes: int,
                        val_fraction: float | Holdout, keep: tuple[str, ...] = SPLITS) -> PartitionResult:
    """Worker task: read one partition, featurise it chunk by chunk, write shards
    (with no cache, ``shard_dir`` None: carry those of the one split in ``keep``
    in the result, featurising that split's rows alone).

    ``split`` forces every row into one split (a separate validation source);
    otherwise rows go to train or val by :func:`~lancetnic_flow.features.split.validation_mask`."""
    t0 = time.monotonic()
    res = PartitionResult(partition=part.index)
    one = keep[0] if shard_dir is None and split is None and len(keep) == 1 else None
    for ci, table in enumerate(_tables(part, columns, storage_options, chunk_bytes, res, split, val_fraction)):
        is_val = _val_mask(table, split, val_fraction, res)
        table = _in_run_labels(table, is_val, features.labels, res)
        if one is not None:   # featurise only the split asked for
            res.cut_splits = [one]
            table = _one_split(table, is_val, one, res, features.unknown_labels)
            is_val = np.full(table.num_rows, one == "val")
        cut: list = []
        block = features.transform(table, cut)
        longer = cut_rows(cut, len(block))
        res.tokens += int(block.offsets[-1])
        if block.labels is not None:
            unknown = block.labels < 0
            if unknown.any():
                # A label the fit never saw (validation data, or rows a continued run moved to training).
                n = int(unknown.sum())
                res.skipped["unknown_label"] = res.skipped.get("unknown_label", 0) + n
                keep_rows = np.flatnonzero(~unknown)
                block, is_val, longer = block.take(keep_rows), is_val[keep_rows], longer[keep_rows]
        if longer.any():   # kept, but a sequence model reads the first --max-len tokens of it
            res.noted[TRUNCATED] = res.noted.get(TRUNCATED, 0) + int(longer.sum())
        _write_split(_featurized_split(block, is_val, table, features), shard_dir, part, ci, cache_options, res,
                     raw=False, keep=keep)
    res.bytes_read = part.length if part.length > 0 else part.file.size
    res.seconds = time.monotonic() - t0
    trim_allocator()   # this task's tables are freed: hand their heap back before the next one
    return res


class ShardError(Exception):
    """A shard in the cache is missing or damaged."""


class ShardReads:
    """Shards this process has read (:func:`load_shard`), and their bytes: a
    run records the trainer's own (``client_shard_reads`` in metrics.json), so
    a run that trains on the cluster shows it read none."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = self.bytes = 0

    def add(self, size: int) -> None:
        with self.lock:
            self.count += 1
            self.bytes += size

    def now(self) -> tuple[int, int]:
        return self.count, self.bytes


SHARD_READS = ShardReads()


def load_shard(info: ShardInfo, cache_options: dict) -> RowBlock:
    if info.data is not None:   # no cache: the bytes came in the task's result, nothing is read
        data = info.data
    else:
        data = read_bytes(info.url, cache_options)
        SHARD_READS.add(len(data))
    if len(data) != info.bytes or zlib.crc32(data) != info.crc32:
        raise ShardError(f"shard {info.url} is damaged (size or checksum differs from the manifest)")
    return RowBlock.from_bytes(data)


def load_or_repair(info: ShardInfo, cache_options: dict, repair: Callable[[ShardInfo], None]) -> RowBlock:
    """Load a shard; if it is missing or damaged, have ``repair`` rebuild it
    (featurising is deterministic, so the rebuilt bytes match the manifest)."""
    try:
        return load_shard(info, cache_options)
    except (ShardError, FileNotFoundError):
        repair(info)
        return load_shard(info, cache_options)


