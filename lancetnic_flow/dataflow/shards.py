"""Shards: featurised partitions, written to the cache by the workers.

The worker that featurises a partition writes its rows straight to the cache
(a local folder or any fsspec URL) and returns only addresses and counts,
so no feature array crosses the scheduler. Each shard's size and CRC-32 go
into the manifest (:mod:`.manifest`): a damaged shard is detected on read
and rebuilt from its partition.
"""
from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyarrow as pa

from ..allocator import trim_allocator
from ..data.readers import read_partition
from ..data.sources import Columns, Partition
from ..config import FeatureConfig
from ..features.fit import bucket_frequencies, table_stats
from ..features.rows import RowBlock
from ..features.split import validation_mask
from ..features.vectorize import FittedFeatures, text_options
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

    def drop_unknown(self, labels: list[str]) -> None:
        """Raw val shards, once the label set is known: their rows whose label no
        training row had are dropped when read, so count them as skipped."""
        known = set(labels)
        unknown = sum(n for name, n in self.val_labels.items() if name not in known)
        if unknown:
            self.val_rows -= unknown
            self.skipped["unknown_label"] = self.skipped.get("unknown_label", 0) + unknown
        self.val_labels = {}


def _write_split(parts: dict[str, RowBlock], shard_dir: str, part: Partition, chunk: int, cache_options: dict,
                 res: "PartitionResult", raw: bool) -> None:
    """Write a chunk's train and val rows as shards; count them in ``res``."""
    for name, rows in parts.items():
        if not len(rows):
            continue
        data = rows.to_bytes()
        url = join(shard_dir, f"part-{part.index:06d}-{chunk:04d}.{name}.npz")
        write_bytes(url, data, cache_options)
        res.shards.append(ShardInfo(url, name, part.index, chunk, len(rows), int(rows.offsets[-1]),
                                    len(data), zlib.crc32(data), raw))
        if name == "train":
            res.train_rows += len(rows)
        else:
            res.val_rows += len(rows)


def count_partition(part: Partition, split: str | None, *, columns: Columns, fcfg: FeatureConfig,
                    shard_dir: str, storage_options: dict, cache_options: dict, chunk_bytes: int,
                    val_fraction: float) -> FitStats:
    """Worker task of the hashing features' fit pass: one partition's fit
    statistics, with its term counts written as raw shards on the way — the
    corpus is tokenised once, and every epoch reads these shards.

    ``split`` forces every row into one split (a separate validation source);
    otherwise rows go to train or val by :func:`validation_mask`."""
    t0 = time.monotonic()
    counter = FittedFeatures(mode="hashing", **text_options(fcfg), buckets=fcfg.buckets)
    res = PartitionResult(partition=part.index)
    stats: list[FitStats] = []
    for ci, chunk in enumerate(read_partition(part, columns, storage_options=storage_options,
                                              chunk_bytes=chunk_bytes)):
        res.rows_read += chunk.rows_read
        for k, v in chunk.skipped.items():
            res.skipped[k] = res.skipped.get(k, 0) + v
        for k, v in chunk.noted.items():
            res.noted[k] = res.noted.get(k, 0) + v
        table = chunk.table
        is_val = np.full(table.num_rows, split == "val") if split is not None else \
            validation_mask(table, val_fraction)
        block = counter.raw(table)
        res.tokens += int(block.values.sum())
        s = table_stats(table, ~is_val, columns.numeric)
        s.buckets = bucket_frequencies(block, ~is_val, fcfg.buckets)
        stats.append(s)
        _write_split({"train": block.take(np.flatnonzero(~is_val)), "val": block.take(np.flatnonzero(is_val))},
                     shard_dir, part, ci, cache_options, res, raw=True)
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


def featurize_partition(part: Partition, split: str | None, *, columns: Columns, features: FittedFeatures,
                        shard_dir: str, storage_options: dict, cache_options: dict, chunk_bytes: int,
                        val_fraction: float) -> PartitionResult:
    """Worker task: read one partition, featurise it chunk by chunk, write shards.

    ``split`` forces every row into one split (a separate validation source);
    otherwise rows go to train or val by :func:`validation_mask`."""
    t0 = time.monotonic()
    res = PartitionResult(partition=part.index)
    for ci, chunk in enumerate(read_partition(part, columns, storage_options=storage_options,
                                              chunk_bytes=chunk_bytes)):
        res.rows_read += chunk.rows_read
        for k, v in chunk.skipped.items():
            res.skipped[k] = res.skipped.get(k, 0) + v
        for k, v in chunk.noted.items():
            res.noted[k] = res.noted.get(k, 0) + v
        table = chunk.table
        block = features.transform(table)
        res.tokens += int(block.offsets[-1])
        if block.labels is not None:
            unknown = block.labels < 0
            if unknown.any():
                # A label the fit never saw (only possible in validation data).
                n = int(unknown.sum())
                res.skipped["unknown_label"] = res.skipped.get("unknown_label", 0) + n
                keep = np.flatnonzero(~unknown)
                block, table = block.take(keep), table.take(pa.array(keep))
        if split is not None:
            parts = {split: block}
        else:
            is_val = validation_mask(table, val_fraction)
            parts = {"train": block.take(np.flatnonzero(~is_val)), "val": block.take(np.flatnonzero(is_val))}
        _write_split(parts, shard_dir, part, ci, cache_options, res, raw=False)
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


