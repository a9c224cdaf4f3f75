"""A complete cache entry of a small real CSV, made in this process with the
package's own fit and featurisation functions (what the workers run), no cluster."""
from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from lancetnic_flow.config import FeatureConfig
from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.dataflow.feed import FeedSpec, ShardFeed
from lancetnic_flow.dataflow.shards import featurize_partition
from lancetnic_flow.events import NULL_EVENTS
from lancetnic_flow.features.fit import finish_fit, fit_partition
from lancetnic_flow.features.vocab import merge_stats
from lancetnic_flow.storage import join

COLUMNS = Columns(text=("text",), label="label")
WORDS = {"sport": ["match", "goal", "team", "score"], "food": ["bread", "soup", "salt", "cook"],
         "tech": ["code", "chip", "disk", "cloud"]}
VAL_FRACTION = 0.25
BLOCKSIZE = 1_500   # bytes: the file is cut into several partitions


def write_rows(path: Path, n: int = 240) -> Path:
    labels = sorted(WORDS)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        for i in range(n):
            label = labels[i % 3]
            words = WORDS[label]
            w.writerow([f"{words[i % 4]} {words[(i // 3) % 4]} row{i} plain text", label])
    return path


@dataclasses.dataclass
class Entry:
    spec: FeedSpec
    results: list
    table: pa.Table     # the whole file, as read


def make_entry(tmp_path: Path, *, key: str = "entry-key", finish: bool = True,
               fcfg: FeatureConfig | None = None) -> Entry:
    data = write_rows(tmp_path / "train.csv")
    plan = plan_source([str(data)], blocksize=BLOCKSIZE)
    fcfg = fcfg or FeatureConfig(mode="tfidf", ngrams=1, analyzer="word")
    features = finish_fit(merge_stats([fit_partition(p, COLUMNS, fcfg, {}, BLOCKSIZE, VAL_FRACTION)
                                       for p in plan.partitions]), fcfg, COLUMNS)
    entry = str(tmp_path / "cache" / key)
    results = [featurize_partition(p, None, columns=COLUMNS, features=features, shard_dir=join(entry, "shards"),
                                   storage_options={}, cache_options={}, chunk_bytes=BLOCKSIZE,
                                   val_fraction=VAL_FRACTION) for p in plan.partitions]
    spec = FeedSpec(key=key, entry=entry, train=plan, val=None, columns=COLUMNS, features=features,
                    feature_config=dataclasses.asdict(fcfg), storage_options={}, cache_options={},
                    chunk_bytes=BLOCKSIZE, val_fraction=VAL_FRACTION, in_flight=2, seed=0)
    if finish:
        ShardFeed(None, spec, NULL_EVENTS).finish_entry(results)
    return Entry(spec, results, pacsv.read_csv(data))


@pytest.fixture
def entry(tmp_path) -> Entry:
    return make_entry(tmp_path)
