#!/usr/bin/env python
"""LinearSVM's --ddp ranks replayed in one process: test accuracy by ranks,
partitions and sync cadence, without a cluster.

    .venv/bin/python benchmarks/debian_corpus.py
    .venv/bin/python benchmarks/linear_ranks_replay.py --ranks 1,8,16 --partitions 8,64 --sync epoch,default

Real ranks (``benchmarks/linear_ranks.py``) cost minutes each on two cores
and more ranks than cores only share them; this replays what N ranks do
with the same per-example hinge step (``models/margin.py``): the training
file cut into P partitions of consecutive rows, dealt to the ranks each
epoch as ``--ddp`` deals them (seeded order, to the rank with the fewest
rows), each rank shuffling its share and stepping batches of
``512 / N`` rows at N × the rate on its own replica, the replicas replaced
by their mean every K steps and at each epoch's end. Features are the
defaults' (hashed words and bigrams, fitted by a one-epoch CLI run); it
trains on the whole training file (no validation split) and scores the
test file. Needs about N × the weights' bytes of memory (16 ranks: 2 GB).
Writes ``benchmarks/out/linear-ranks-replay-<time>.json``.
"""
from __future__ import annotations

import argparse
import glob
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow.csv as pcsv

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from lancetnic_flow.features.vectorize import FittedFeatures  # noqa: E402
from lancetnic_flow.models.margin import hinge_pass  # noqa: E402
from lancetnic_flow.training.ddp.cadence import cadence  # noqa: E402
from lancetnic_flow.training.step import lr_schedule  # noqa: E402

BATCH, RATE, EPOCHS = 512, 0.3, 10   # the defaults' batch, --sparse-lr and epochs


def rows(block, idx: np.ndarray):
    """Rows ``idx`` of a CSR block, as the kernel takes them."""
    off = block.offsets
    lens = off[idx + 1] - off[idx]
    new = np.zeros(len(idx) + 1, np.int64)
    np.cumsum(lens, out=new[1:])
    take = np.concatenate([np.arange(off[i], off[i + 1]) for i in idx]) if len(idx) else np.zeros(0, np.int64)
    return block.indices[take], new, block.values[take], block.labels[idx]


def deal(parts: list[np.ndarray], world: int, epoch: int) -> list[list[int]]:
    """Partitions to ranks: a seeded order, each to the rank with the fewest rows (as ``--ddp``)."""
    load, mine = [0] * world, [[] for _ in range(world)]
    for p in np.random.default_rng(epoch).permutation(len(parts)):
        r = min(range(world), key=lambda j: (load[j], j))
        mine[r].append(int(p))
        load[r] += len(parts[p])
    return mine


def replay(train, test, classes: int, dim: int, world: int, partitions: int, sync: str) -> float:
    n = len(train)
    cut = -(-n // partitions)
    parts = [np.arange(s, min(n, s + cut)) for s in range(0, n, cut)]
    batch = max(1, BATCH // world)
    weights = [np.zeros((dim, classes), np.float32) for _ in range(world)]
    bias = [np.zeros(classes, np.float32) for _ in range(world)]
    shares = [deal(parts, world, e) for e in range(EPOCHS)]
    steps = [max(-(-sum(len(parts[p]) for p in m) // batch) for m in share) for share in shares]
    schedule = lr_schedule("linear", RATE * world, sum(steps))

    def average():
        if world > 1:
            w, b = sum(weights) / world, sum(bias) / world
            for i in range(world):
                weights[i][:], bias[i][:] = w, b

    step = 0
    for epoch in range(EPOCHS):
        every = (cadence(world, steps[epoch], None).every if sync == "default"
                 else 0 if sync == "epoch" else int(sync))
        orders = [np.random.default_rng(1000 * epoch + r).permutation(
            np.concatenate([parts[p] for p in m]) if m else np.zeros(0, np.int64))
            for r, m in enumerate(shares[epoch])]
        for k in range(steps[epoch]):
            lr = np.float32(schedule(step))
            for r in range(world):
                b = orders[r][k * batch:(k + 1) * batch]
                if len(b):
                    ind, off, val, lab = rows(train, b)
                    hinge_pass(ind, off, val, lab, weights[r], bias[r], lr, np.empty((len(b), classes), np.float32))
            step += 1
            if every and (k + 1) % every == 0:
                average()
        average()
    scores = np.add.reduceat(weights[0][test.indices] * test.values[:, None], test.offsets[:-1], axis=0) + bias[0]
    return float((scores.argmax(1) == test.labels).mean())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="debian")
    ap.add_argument("--ranks", default="1,8")
    ap.add_argument("--partitions", default="8,64", help="partitions the training file is cut into")
    ap.add_argument("--sync", default="epoch,default", help="epoch, default (the ranks' own cadence) or N steps")
    a = ap.parse_args(argv)
    train_csv, test_csv = HERE / "out" / "data" / f"{a.corpus}-train.csv", HERE / "out" / "data" / f"{a.corpus}-test.csv"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "lancetnic_flow", "train", str(train_csv), "--out", tmp, "--epochs", "1",
                        "--no-plots", "--quiet", "--no-learn-val"], check=True, capture_output=True)
        features = FittedFeatures.from_json(Path(glob.glob(f"{tmp}/*/features.json")[0]).read_text())
    train, test = (features.transform(pcsv.read_csv(p)) for p in (train_csv, test_csv))
    results = []
    for world in (int(x) for x in a.ranks.split(",")):
        for partitions in (int(x) for x in a.partitions.split(",")):
            for sync in (["epoch"] if world == 1 else a.sync.split(",")):
                t = time.monotonic()
                acc = replay(train, test, len(features.labels), features.dim, world, partitions, sync)
                results.append({"ranks": world, "partitions": partitions, "sync": sync, "test_accuracy": acc,
                                "seconds": round(time.monotonic() - t, 1)})
                print(f"| {world} | {partitions} | {sync} | {acc:.4f} |", flush=True)
    out = HERE / "out" / f"linear-ranks-replay-{datetime.now():%Y-%m-%dT%H%M%S}.json"
    out.write_text(json.dumps({"argv": argv or sys.argv[1:], "results": results}, indent=1))
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
