"""The training data without a shard cache (``--cache none``): every epoch,
and every validation pass, featurised afresh on the workers.

For data read once, or that no disk can hold. The partitions go through the
same :class:`~.window.OrderedWindow` as a live epoch (at most ``in_flight``
tasks ahead of the trainer), and each task returns the packed bytes of the
shards a cached run would have written, of the split that pass needs: the
trainer decodes the same bytes in the same order, so a run without a cache
trains the same weights as one with it (tests/integration/test_nocache.py).

The order is the cached run's: partitions that have training rows (known
from the fit pass) in each epoch's seeded order; with fitted vocabularies
the first epoch is live in a cached run too, over every partition.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..config import FeatureConfig
from ..data.sources import Columns, Partition
from ..events import Events
from ..features.fit import fit_partition
from ..features.rows import RowBlock
from ..features.split import Holdout, fraction_of
from ..features.vocab import FitStats
from ..reconnect import share
from .feed import FeedSpec
from .shards import PartitionResult, ShardInfo, count_once, featurize_partition, load_shard, recount_partition
from .stream import epoch_order, prefetch
from .window import OrderedWindow

def fit_partition_counted(part: Partition, columns: Columns, fcfg: FeatureConfig, storage_options: dict,
                          chunk_bytes: int, val_fraction: float | Holdout) -> FitStats:
    """The vocabulary modes' fit task, which also says how many training rows
    the partition has: an epoch without a cache visits the partitions that
    have some in the order a cached run reads their shards."""
    out = fit_partition(part, columns, fcfg, storage_options, chunk_bytes, val_fraction)
    out.results = [PartitionResult(partition=part.index, train_rows=out.docs)]
    return out


@dataclass
class FreshPiece:
    """A partition that a ``--ddp`` rank (or the trainer task on the cluster)
    featurises itself each time it reads it, without a cache: what a cached
    shard is to a rank with one (``share`` deals both by partition and rows)."""

    part: Partition
    split: str | None     # the source's split: "val" for a separate validation source, else None (by hash)
    keep: str             # the rows it gives: "train" or "val"
    rows: int = 0         # its training rows (the fit pass counted them): the deal balances on them
    chunk: int = 0

    @property
    def partition(self) -> int:
        return self.part.index


@dataclass
class FreshReader:
    """How a rank featurises a :class:`FreshPiece`: the same task a fresh epoch
    submits (:func:`featurize_partition`, or :func:`recount_partition` for
    hashed features), run in the rank's own thread, its shards' bytes decoded
    as a cached run decodes them, so the rank trains the cached run's rows."""

    raw: bool
    columns: Columns
    feature_config: dict
    storage_options: dict
    chunk_bytes: int
    val_fraction: float | Holdout

    def task(self, keep: str, features: Any = None) -> tuple[Callable, dict]:
        """The task that featurises a partition afresh, and its arguments, for
        the rows ``keep`` ("train" or "val"): term counts need the feature
        options only; otherwise ``features`` (the fitted ones, or their shared
        future on the cluster)."""
        common = dict(columns=self.columns, storage_options=self.storage_options, chunk_bytes=self.chunk_bytes,
                      val_fraction=self.val_fraction, keep=(keep,))
        if self.raw:
            return recount_partition, dict(common, fcfg=FeatureConfig(**self.feature_config))
        return featurize_partition, dict(common, features=features, shard_dir=None, cache_options={})

    @staticmethod
    def rows(info: ShardInfo, features: Any) -> RowBlock:
        """A shard carried in a result as model rows (a raw shard is finished here, as a cached run does)."""
        block = load_shard(info, {})
        return features.finish(block) if info.raw else block

    def blocks(self, piece: FreshPiece, features: Any, counted: dict | None = None) -> Iterator[RowBlock]:
        """The piece's rows; ``counted`` keeps the first row accounting of each
        partition, by (source, partition), as a pass of :class:`FreshFeed` does."""
        task, kwargs = self.task(piece.keep, features)
        res = task(piece.part, piece.split, **kwargs)
        shards, res.shards = res.shards, []
        if counted is not None:
            count_once(counted, ("val" if piece.split == "val" else "train", piece.partition), res)
        for info in shards:
            yield self.rows(info, features)


class FreshFeed:
    """The shard feed's questions (:class:`~.feed.ShardFeed`), answered without a cache.

    ``trained``: the training partitions' fit results (their ``train_rows``).
    ``results``: the row accounting of the fit pass when it read every row
    (hashing features), else None: then the first passes over the data make it."""

    complete = True           # nothing to finish: no manifest, no entry to lock
    manifest = None

    def __init__(self, client: Any, spec: FeedSpec, events: Events, trained: list[PartitionResult],
                 results: list[PartitionResult] | None):
        self.client, self.spec, self.events = client, spec, events
        self.raw = spec.features.mode == "hashing"    # a cached run's shards are the counting pass's
        self._features: Any = None
        self.reader = FreshReader(self.raw, spec.columns, spec.feature_config, spec.storage_options,
                                  spec.chunk_bytes, spec.val_fraction)
        by_index = {p.index: p for p in spec.train.partitions}
        self.with_rows = [by_index[r.partition] for r in sorted(trained, key=lambda r: r.partition)
                          if r.train_rows and r.partition in by_index]
        self.train_rows = {r.partition: r.train_rows for r in trained}
        # The fit pass's accounting when it read every row, else what the passes learn, by (source, partition).
        self._counted = list(results) if results is not None else None
        self._results: dict[tuple[str, int], PartitionResult] = {}

    def release(self) -> None:
        """No entry lock to let go of."""

    def total_rows(self) -> int:
        counted = [r.train_rows for r in self.results()]
        return sum(counted) if counted else self.spec.features.docs

    def results(self) -> list[PartitionResult]:
        """Every partition's row accounting, as a cached run's manifest holds it."""
        return self._counted if self._counted is not None else list(self._results.values())

    # ---- the passes
    def _task(self, keep: str) -> tuple[Callable, dict]:
        if not self.raw and self._features is None:   # the fitted features go to the cluster once, not with every task
            self._features = share(self.client, self.spec.features)
        return self.reader.task(keep, self._features)

    def _pass(self, jobs: list[tuple], keep: str, kind: str) -> Iterator[RowBlock]:
        """``keep``'s blocks of ``jobs``, in order, through the window; the row
        accounting of a pass over every partition of ``kind`` is kept."""
        task, kwargs = self._task(keep)

        def renew() -> dict:
            self._features = None
            return self._task(keep)[1]

        done = 0
        for r in OrderedWindow(self.client, task, jobs, self.spec.in_flight, renew=renew, **kwargs):
            done += 1
            self.events.emit("featurized", done=done, total=len(jobs), rows=r.rows_read, train_rows=r.train_rows,
                             tokens=r.tokens, bytes_read=r.bytes_read, seconds=r.seconds)
            # The accounting keeps the counts; the shards' bytes go with their blocks.
            shards, r.shards = r.shards, []
            if self._counted is None:
                count_once(self._results, (kind, r.partition), r)
            for s in shards:
                yield self.load(s)

    def _epoch_jobs(self, epoch: int) -> list[tuple]:
        parts = self.spec.train.partitions
        if not self.raw and epoch == 0:
            # A cached run featurises its first epoch live, over every partition in this order.
            return [(parts[i], None) for i in epoch_order(len(parts), self.spec.seed, epoch)]
        return [(self.with_rows[i], None) for i in epoch_order(len(self.with_rows), self.spec.seed, epoch)]

    def _val_jobs(self) -> list[tuple]:
        s = self.spec
        if s.val is not None:
            return [(p, "val") for p in sorted(s.val.partitions, key=lambda p: p.index)]
        return [(p, None) for p in sorted(s.train.partitions, key=lambda p: p.index)]

    def train_blocks(self, epoch: int) -> tuple[Callable[[], Iterator[RowBlock]], str]:
        """A function giving ``epoch``'s training blocks, and where they come from ("fresh")."""
        return (lambda: self._pass(self._epoch_jobs(epoch), "train", "train")), "fresh"

    def val_blocks(self) -> Iterator[RowBlock]:
        """The validation blocks in partition order, featurised again, read ahead by a thread."""
        return prefetch(self._pass(self._val_jobs(), "val", "val" if self.spec.val is not None else "train"))

    def has_val(self) -> bool:
        """Whether a cached run would have validation shards: validation rows
        were counted (a raw shard keeps rows of unknown labels until read)."""
        if self.spec.val is not None and self._counted is None and not any(k == "val" for k, _ in self._results):
            return bool(self.spec.val.partitions)   # a separate source not read yet
        return any(r.val_rows or (self.raw and r.skipped.get("unknown_label")) for r in self.results())

    def pieces(self) -> tuple[list[FreshPiece], list[FreshPiece], FreshReader]:
        """What ranks on the workers featurise themselves, epoch after epoch: the
        training partitions that have rows, the validation pieces (none when a
        cached run would have no validation shards), and how to read them."""
        s = self.spec
        train = [FreshPiece(p, None, "train", self.train_rows[p.index]) for p in self.with_rows]
        # A fitted vocabulary's fit pass counts training rows only: whether there are validation rows is
        # learnt by reading them, so every piece that may hold some is read (the ranks' counts come back:
        # counted_by_ranks).
        maybe = self.has_val() if self._counted is not None else bool(s.val is not None or fraction_of(s.val_fraction) > 0)
        val = [FreshPiece(p, split, "val") for p, split in self._val_jobs()] if maybe else []
        return train, val, self.reader

    def counted_by_ranks(self, counted: dict) -> None:
        """The row accounting the ranks made reading their pieces (when the fit
        pass did not count every row), as this feed's own passes keep it."""
        if self._counted is None:
            for key, res in counted.items():
                count_once(self._results, key, res)

    def load(self, info: ShardInfo) -> RowBlock:
        """A shard carried in a result as model rows (a raw shard is finished here, as a cached run does)."""
        return self.reader.rows(info, self.spec.features)
