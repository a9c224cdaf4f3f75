"""The training data as shards, epoch by epoch: featurised live on the
workers the first time, read from the cache after.

Live, the partitions go to the workers through an :class:`OrderedWindow`
(at most ``in_flight`` tasks ahead of the trainer) in the epoch's seeded
order, then the validation partitions; once every result is in, the
manifest is written and the entry is complete. A later epoch — or a later
run with the same data and feature options — reads the manifest's shards,
and a shard found missing or damaged is rebuilt from its partition.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator

from ..config import FeatureConfig
from ..data.sources import Columns, SourcePlan
from ..events import Events
from ..features.rows import RowBlock
from ..features.split import Holdout
from ..features.vectorize import FittedFeatures
from ..reconnect import retrying, share
from ..storage import join
from .entry_lock import EntryLock
from .manifest import Manifest, features_digest, read_manifest, write_manifest
from .shards import PartitionResult, ShardInfo, count_partition, featurize_partition, load_or_repair
from .stream import cached_blocks, epoch_order, live_blocks, prefetch
from .window import OrderedWindow


@dataclasses.dataclass
class FeedSpec:
    """What featurising the training data needs: where the data and the cache entry are, and how to cut it."""

    key: str                      # the cache entry's key
    entry: str                    # its URL
    train: SourcePlan
    val: SourcePlan | None
    columns: Columns
    features: FittedFeatures
    feature_config: dict          # the options the features were fitted with (kept in the manifest)
    storage_options: dict         # open the data
    cache_options: dict           # open the cache
    chunk_bytes: int
    val_fraction: float | Holdout   # rows held out by hash (0 with a separate validation source)
    in_flight: int
    seed: int


class ShardFeed:
    """Row blocks of each epoch, and the validation blocks, for one cache entry."""

    def __init__(self, client: Any, spec: FeedSpec, events: Events, lock: EntryLock | None = None):
        self.client, self.spec, self.events = client, spec, events
        self.manifest: Manifest | None = read_manifest(spec.entry, spec.key, spec.cache_options)
        self._features: Any = None
        # The entry's writer lock (dataflow/entry_lock.py), held until the manifest is written.
        self.lock = lock
        # Finished shards kept between epochs (:meth:`keep`): none until the trainer's plan allows it.
        self.kept: dict[str, RowBlock] = {}
        self.kept_bytes, self.keep_limit = 0, 0

    def release(self) -> None:
        """Let the next writer of this entry in (the entry is complete, or this run stops)."""
        if self.lock is not None:
            self.lock.release()

    @property
    def complete(self) -> bool:
        """Every shard is in the cache (a finished live epoch, or an earlier run)."""
        return self.manifest is not None

    def results(self) -> list[PartitionResult]:
        """Every partition's row accounting (the manifest's)."""
        return self.manifest.results

    def total_rows(self) -> int:
        """Training rows per epoch: the manifest's count, else the fit pass's."""
        return sum(r.train_rows for r in self.manifest.results) if self.manifest else self.spec.features.docs

    # ---- live featurisation
    def _task_kwargs(self) -> dict:
        s = self.spec
        if self._features is None:   # the fitted features go to the cluster once, not with every task
            self._features = share(self.client, s.features)
        return dict(columns=s.columns, features=self._features, shard_dir=join(s.entry, "shards"),
                    storage_options=s.storage_options, cache_options=s.cache_options, chunk_bytes=s.chunk_bytes,
                    val_fraction=s.val_fraction)

    def _renewed_kwargs(self) -> dict:
        """After a reconnect, or once every worker holding the shared features
        died: the scattered features are gone, they are shared again."""
        self._features = None
        return self._task_kwargs()

    def _jobs(self, epoch: int | None) -> list[tuple]:
        s = self.spec
        parts = s.train.partitions
        order = range(len(parts)) if epoch is None else epoch_order(len(parts), s.seed, epoch)
        return [(parts[i], None) for i in order] + [(p, "val") for p in (s.val.partitions if s.val else [])]

    def featurize(self, epoch: int | None = None) -> Iterator[PartitionResult]:
        """Featurise every partition (in ``epoch``'s seeded order, or the files'
        order); the manifest is written after the last result."""
        jobs = self._jobs(epoch)
        results: list[PartitionResult] = []
        for r in OrderedWindow(self.client, featurize_partition, jobs, self.spec.in_flight,
                               renew=self._renewed_kwargs, **self._task_kwargs()):
            results.append(r)
            self.events.emit("featurized", done=len(results), total=len(jobs), rows=r.rows_read,
                             train_rows=r.train_rows, tokens=r.tokens, bytes_read=r.bytes_read, seconds=r.seconds)
            yield r
        self.finish_entry(results)

    def finish_entry(self, results: list[PartitionResult]) -> None:
        """Every partition's shards are written: the manifest makes the entry whole."""
        s = self.spec
        # The partitions the shards came from go along: a damaged shard is rebuilt from the same bytes.
        parts = {"train": [dataclasses.asdict(p) for p in s.train.partitions],
                 "val": [dataclasses.asdict(p) for p in (s.val.partitions if s.val else [])]}
        self.manifest = Manifest(s.key, s.train.fingerprint(), {"features": s.feature_config},
                                 sorted(results, key=lambda r: r.partition), partitions=parts,
                                 features_digest=features_digest(s.features.to_json().encode()))
        write_manifest(s.entry, self.manifest, s.cache_options)
        self._features = None
        self.release()

    # ---- epochs
    def train_blocks(self, epoch: int) -> tuple[Callable[[], Iterator[RowBlock]], str]:
        """A function giving ``epoch``'s training blocks, and where they come from ("live" or "cache")."""
        if self.manifest is None:
            return (lambda: live_blocks(self.featurize(epoch), "train", self.spec.cache_options)), "live"
        shards = self.manifest.shards("train")
        return (lambda: cached_blocks(shards, self.spec.seed, epoch, self.load)), "cache"

    def val_blocks(self) -> Iterator[RowBlock]:
        """The validation blocks, in order, read ahead by a thread."""
        return prefetch(self.load(s) for s in self.manifest.shards("val"))

    def has_val(self) -> bool:
        return bool(self.manifest.shards("val"))

    # ---- the cache
    def keep(self, limit: int) -> None:
        """Keep finished shards in memory from here on, up to ``limit`` bytes of
        rows: an epoch then reads, decodes and weighs only the shards that did
        not fit (the first come are kept; none is let go before the run ends).
        The rows are the same either way."""
        self.keep_limit = max(0, int(limit))

    def kept_shards(self) -> dict:
        """What :meth:`keep` holds: shards, their bytes, and the limit (metrics.json)."""
        return {"shards": len(self.kept), "bytes": self.kept_bytes, "limit": self.keep_limit}

    def load(self, info: ShardInfo) -> RowBlock:
        """A shard as model rows (a raw shard of the counting fit pass is finished here)."""
        kept = self.kept.get(info.url)
        if kept is not None:
            return kept
        block = load_or_repair(info, self.spec.cache_options, self._repair)
        block = self.spec.features.finish(block) if info.raw else block
        if self.kept_bytes + block.nbytes <= self.keep_limit:
            # Shared by every epoch from now on, so nothing may change it in place; not made read-only,
            # which torch warns about when a network takes the rows (tests/integration/test_in_process.py
            # trains each kind of model with and without kept shards to the same weights).
            self.kept[info.url] = block
            self.kept_bytes += block.nbytes
        return block

    def _repair(self, info: ShardInfo) -> None:
        """Re-featurise the partition a missing or damaged shard came from."""
        self.events.emit("warning", message=f"shard {info.url} is missing or damaged; rebuilding it")
        m, s = self.manifest, self.spec
        split = "val" if (m.partitions.get("val") and info.split == "val") else None
        part = m.partition(split or "train", info.partition)
        kwargs = dict(columns=s.columns, shard_dir=join(s.entry, "shards"), storage_options=s.storage_options,
                      cache_options=s.cache_options, chunk_bytes=s.chunk_bytes, val_fraction=s.val_fraction)
        if info.raw:
            task, kwargs["fcfg"] = count_partition, FeatureConfig(**s.feature_config)
        else:
            task, kwargs["features"] = featurize_partition, s.features
        retrying(self.client, lambda: self.client.submit(task, part, split, **kwargs, pure=False).result())
