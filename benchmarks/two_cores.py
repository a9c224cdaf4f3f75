#!/usr/bin/env python
"""What two cores of this machine give the linear model's step, with no
cluster and no exchange: the ceiling for two ``--ddp`` ranks against one.

    .venv/bin/python benchmarks/two_cores.py CORPUS RUN     # as benchmarks/two_ranks.sh calls it
    WEIGHTS=torch .venv/bin/python benchmarks/two_cores.py CORPUS RUN   # weights in torch's memory

CORPUS is a training file whose shard cache a finished ``--ddp 1`` run
(folder RUN) filled. The step over kept rows in place (``hinge_picks``, the
kernel a rank runs from its second epoch on) trains, from zero weights,
the epochs of RUN at its rates (``history.csv`` × ``--sparse-lr`` / ``--lr``):

* alone: one process over every training row, batches of ``--batch-size``;
* a pair: two processes at once, each over its rank's share of a 2-rank run
  (training/ddp/shares.py), batches of half the size at twice the rate, on
  its own weights — what two ranks compute, without their meets and syncs.

The weights live where a rank's do (numpy's memory, on transparent huge
pages: allocator.on_huge_pages); ``WEIGHTS=torch``: in torch's, on 4 KiB
pages where the machine's setting is "madvise" — what ranks had before.

Prints each epoch's rows/s and the ratio of the pair's epoch rate (the
slower process sets it, as at a sync) to the lone process's, over epochs 2
on. Nothing else runs meanwhile; the figures drift with the machine as the
ranks' do, so two_ranks.sh runs this beside each pair of runs.
"""
from __future__ import annotations

import csv
import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def cache_of(corpus: str, run: Path) -> Path:
    """The cache folder (holding manifest.json) whose shards came from ``corpus``."""
    conf = json.loads((run / "config.json").read_text())
    want = Path(corpus).resolve().as_uri()
    for manifest in glob.glob(str(Path(conf["output"]["cache"]) / "*" / "manifest.json")):
        parts = json.loads(Path(manifest).read_text())["partitions"]["train"]
        if parts and parts[0]["file"]["url"] == want:
            return Path(manifest).parent
    sys.exit(f"no shard cache of {corpus} under {conf['output']['cache']}: run {run}'s command first")


def train(cache: Path, run: Path, rank: int, world: int) -> list[float]:
    """Seconds of each epoch of this process's rows (its rank's share, or all)."""
    import numpy as np
    from numba.typed import List

    from lancetnic_flow.dataflow.kept import KeptEpoch
    from lancetnic_flow.dataflow.shards import ShardInfo, load_shard
    from lancetnic_flow.features.vectorize import FittedFeatures
    from lancetnic_flow.models.margin import hinge_picks
    from lancetnic_flow.training.ddp.shares import share

    conf = json.loads((run / "config.json").read_text())["training"]
    rates = [float(r["lr"]) * conf["sparse_lr"] / conf["lr"] * world
             for r in csv.DictReader(open(run / "history.csv"))]
    manifest = json.loads((cache / "manifest.json").read_text())
    shards = [ShardInfo(**s) for r in manifest["results"] for s in r["shards"] if s["split"] == "train"]
    features = FittedFeatures.from_json((cache / "features.json").read_text())
    mine = share(shards, rank, world, conf["seed"], 0, owned=True)
    blocks = [features.finish(load_shard(s, {})) for s in mine]
    classes = int(max(b.labels.max() for b in blocks)) + 1
    dim = json.loads((run / "model.json").read_text())["kwargs"]["dim"]
    if os.environ.get("WEIGHTS") == "torch":
        import torch

        weight = torch.zeros(dim, classes).numpy()
    else:
        weight = np.zeros((dim, classes), np.float32)
    bias = np.zeros(classes, np.float32)
    arrays = tuple(List([getattr(b, n) for b in blocks]) for n in ("indices", "offsets", "values", "labels"))
    seed = conf["seed"] if world == 1 else conf["seed"] * 1000 + rank
    seconds = []
    for epoch, rate in enumerate(rates):
        batches = list(KeptEpoch(blocks, batch_size=conf["batch_size"] // world,
                                 shuffle_buffer=conf["shuffle_buffer"], seed=seed, epoch=epoch))
        tick = time.perf_counter()
        for b in batches:
            scores = np.empty((len(b), classes), np.float32)
            hinge_picks(*arrays, b.which, b.rows, weight, bias, np.float32(rate), scores)
        seconds.append(time.perf_counter() - tick)
    return seconds


def main() -> None:
    if len(sys.argv) == 5:   # one process of a measurement: CORPUS RUN RANK WORLD
        corpus, run, rank, world = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
        print(json.dumps(train(cache_of(corpus, run), run, rank, world)))
        return
    corpus, run = sys.argv[1], Path(sys.argv[2])
    rows = sum(int(r["rows"]) for r in list(csv.DictReader(open(run / "history.csv")))[:1])

    def measure(world: int) -> list[list[float]]:
        procs = [subprocess.Popen([sys.executable, __file__, corpus, str(run), str(r), str(world)],
                                  stdout=subprocess.PIPE, text=True) for r in range(world)]
        return [json.loads(p.communicate()[0]) for p in procs]

    alone = measure(1)[0]
    pair = measure(2)
    epoch_pair = [max(s) for s in zip(*pair)]   # a sync waits for the slower process
    rate_alone = [rows / s for s in alone]
    rate_pair = [rows / s for s in epoch_pair]
    later = slice(1, None)
    ratio = (sum(rate_pair[later]) / len(rate_pair[later])) / (sum(rate_alone[later]) / len(rate_alone[later]))
    out = {"corpus": corpus, "run": str(run), "rows": rows, "weights": os.environ.get("WEIGHTS", "numpy"),
           "alone_s": alone, "pair_s": pair,
           "ratio_epochs_2_on": ratio}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / f"two-cores-{stamp}.json").write_text(json.dumps(out, indent=1))
    print(f"kernel alone: epoch rows/s {[round(r) for r in rate_alone]}; two at once: "
          f"{[round(r) for r in rate_pair]} (each process's seconds {[[round(x, 2) for x in p] for p in pair]}); "
          f"ceiling for two ranks, epochs 2 on: {ratio:.2f}x")


if __name__ == "__main__":
    main()
