"""Shards: featurised partitions in the cache, and the manifest that lists them.

The worker that featurises a partition writes its rows straight to the cache
(a local folder or any fsspec URL) and returns only addresses and counts,
so no feature array crosses the scheduler. A cache entry is keyed by the
source fingerprint (files, sizes, change tokens) and the feature config, so
a changed input or option gets a fresh entry and an unchanged one is reused.
Each shard's CRC-32 is in the manifest: a damaged shard is detected on read.
"""
from __future__ import annotations

import hashlib
import json
import time
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import fsspec
import numpy as np
import pyarrow as pa

from .features.vectorize import FittedFeatures
from .fit import validation_mask
from .monitor import trim_allocator
from .rows import RowBlock
from .readers import read_partition
from .sources import Columns, FileInfo, Partition

MANIFEST = "manifest.json"
FEATURES = "features.json"
CACHE_VERSION = 2


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


@dataclass
class PartitionResult:
    partition: int
    shards: list[ShardInfo] = field(default_factory=list)
    rows_read: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    train_rows: int = 0
    val_rows: int = 0
    tokens: int = 0
    bytes_read: int = 0
    seconds: float = 0.0


def cache_key(*parts: Any) -> str:
    """A short stable hash of JSON-able parts."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def join(base: str, *names: str) -> str:
    return "/".join([base.rstrip("/")] + [n.strip("/") for n in names])


def write_bytes(url: str, data: bytes, storage_options: dict) -> None:
    """Write atomically where the filesystem allows (temp name + rename), so a
    killed writer never leaves a half shard under the real name."""
    fs, path = fsspec.core.url_to_fs(url, **storage_options)
    parent = path.rsplit("/", 1)[0]
    fs.makedirs(parent, exist_ok=True)
    tmp = f"{path}.tmp-{time.monotonic_ns()}"
    with fs.open(tmp, "wb") as f:
        f.write(data)
    fs.mv(tmp, path)


def read_bytes(url: str, storage_options: dict) -> bytes:
    fs, path = fsspec.core.url_to_fs(url, **storage_options)
    return fs.cat_file(path)


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
        for name, rows in parts.items():
            if not len(rows):
                continue
            data = rows.to_bytes()
            url = join(shard_dir, f"part-{part.index:06d}-{ci:04d}.{name}.npz")
            write_bytes(url, data, cache_options)
            res.shards.append(ShardInfo(url, name, part.index, ci, len(rows), int(rows.offsets[-1]),
                                        len(data), zlib.crc32(data)))
            if name == "train":
                res.train_rows += len(rows)
            else:
                res.val_rows += len(rows)
    res.bytes_read = part.length if part.length > 0 else part.file.size
    res.seconds = time.monotonic() - t0
    trim_allocator()   # this task's tables are freed: hand their heap back before the next one
    return res


class ShardError(Exception):
    """A shard in the cache is missing or damaged."""


def load_shard(info: ShardInfo, cache_options: dict) -> RowBlock:
    data = read_bytes(info.url, cache_options)
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


@dataclass
class Manifest:
    key: str
    fingerprint: str
    config: dict
    results: list[PartitionResult]
    version: int = CACHE_VERSION
    # The partitions the shards were cut from ({"train": [...], "val": [...]}),
    # so a damaged shard is rebuilt from the same bytes whatever today's plan.
    partitions: dict[str, list[dict]] = field(default_factory=dict)

    def partition(self, split: str, index: int) -> Partition:
        d = dict(self.partitions[split][index])
        return Partition(**{**d, "file": FileInfo(**d["file"])})

    def shards(self, split: str) -> list[ShardInfo]:
        return [s for r in self.results for s in r.shards if s.split == split]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Manifest":
        d = json.loads(text)
        d["results"] = [PartitionResult(**{**r, "shards": [ShardInfo(**s) for s in r["shards"]]})
                        for r in d["results"]]
        return cls(**d)


def read_manifest(entry: str, key: str, cache_options: dict) -> Manifest | None:
    """The complete manifest of a cache entry, or None if absent or stale."""
    try:
        m = Manifest.from_json(read_bytes(join(entry, MANIFEST), cache_options).decode())
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    return m if m.key == key and m.version == CACHE_VERSION else None


def write_manifest(entry: str, manifest: Manifest, cache_options: dict) -> None:
    write_bytes(join(entry, MANIFEST), manifest.to_json().encode(), cache_options)


def read_features(entry: str, cache_options: dict) -> FittedFeatures | None:
    try:
        return FittedFeatures.from_json(read_bytes(join(entry, FEATURES), cache_options).decode())
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def write_features(entry: str, features: FittedFeatures, cache_options: dict) -> None:
    write_bytes(join(entry, FEATURES), features.to_json().encode(), cache_options)
