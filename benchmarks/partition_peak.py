"""Peak memory of one transform task per input byte: the PEAK_PER_BYTE of the memory plan.

    python benchmarks/partition_peak.py [--mib 8,16,32] [--out benchmarks/out]

For each partition size and feature setting, a fresh Python process imports
the worker-side modules (and loads the compiled kernels), reads one
partition of a make-data CSV, runs what a worker runs on it, and reports
(peak RSS − RSS after imports) / partition bytes. The memory plan divides a
worker's usable memory by this figure to size partitions.

* ``hashing`` (the default features): the counting fit pass's one task,
  which tokenises, counts and writes the raw shards;
* ``tfidf-1``, ``tfidf-2``: a vocabulary's two tasks, the fit statistics and
  the transform, with unigrams or bigrams.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys, psutil
from lancetnic_flow.config import FeatureConfig
from lancetnic_flow.features.fit import fit_partition, finish_fit
from lancetnic_flow.dataflow.shards import count_partition, featurize_partition
from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.features import kernels
path, block, setting, shard_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
kernels.warm()
plan = plan_source([path], blocksize=block)
part = plan.partitions[0]
cols = Columns(text=("text",), label="label")
import gc; gc.collect()
base = psutil.Process().memory_info().rss
if setting == "hashing":
    fc = FeatureConfig()
    stats = count_partition(part, None, columns=cols, fcfg=fc, shard_dir=shard_dir, storage_options={},
                            cache_options={}, chunk_bytes=block, val_fraction=0.1)
    rows, dim = stats.rows_read, fc.buckets
else:
    fc = FeatureConfig(mode="tfidf", ngrams=int(setting[-1]), max_features=100_000)
    stats = fit_partition(part, cols, fc, {}, block, 0.1)
    features = finish_fit(stats, fc, cols)
    res = featurize_partition(part, None, columns=cols, features=features, shard_dir=shard_dir,
                              storage_options={}, cache_options={}, chunk_bytes=block, val_fraction=0.1)
    rows, dim = res.rows_read, features.dim
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"partition_bytes": part.length, "rows": rows, "base_rss": base, "peak_rss": peak,
                  "peak_per_byte": (peak - base) / part.length, "dim": dim}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", default="4,8,16,32")
    ap.add_argument("--features", default="hashing,tfidf-1,tfidf-2")
    ap.add_argument("--out", default="benchmarks/out")
    a = ap.parse_args()
    from lancetnic_flow.dataflow.plan import WORKER_ENV

    os.makedirs(a.out, exist_ok=True)
    sizes = [int(x) for x in a.mib.split(",")]
    corpus = os.path.join(a.out, "peak-corpus.csv")
    need_rows = max(sizes) * 2**20 // 280 + 10_000
    if not os.path.exists(corpus):
        from lancetnic_flow.data.synth import write_corpus

        write_corpus(corpus, need_rows, classes=4, seed=0)
    results = []
    for mib in sizes:
        for setting in a.features.split(","):
            env = {**os.environ, **WORKER_ENV}  # what a planned worker runs with
            out = subprocess.run([sys.executable, "-c", CHILD, corpus, str(mib * 2**20), setting,
                                  os.path.join(a.out, "peak-shards")], capture_output=True, text=True, check=True,
                                 env=env)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            r.update(mib=mib, features=setting)
            results.append(r)
            print(f"partition {mib:>4} MiB  {setting:<8}  rows {r['rows']:>8,}  "
                  f"peak − base {(r['peak_rss'] - r['base_rss']) / 2**20:7.1f} MiB  "
                  f"= {r['peak_per_byte']:.1f} × partition")
    with open(os.path.join(a.out, "partition_peak.json"), "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
