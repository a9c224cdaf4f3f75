#!/usr/bin/env python
"""The sequence models against the shortest plain-PyTorch loop, on the same rows.

Run it from the repository root, with the project's venv, on a quiet machine:

    .venv/bin/python benchmarks/sequence_speed.py                      # the three Lancet models, 2 epochs
    .venv/bin/python benchmarks/sequence_speed.py --models LancetMC --epochs 1
    .venv/bin/python benchmarks/sequence_speed.py --corpus FILE.csv --rows 0   # a whole file

For each model it

1. trains ``lancetnic-flow train SAMPLE --model M --epochs E --no-plots``
   (defaults otherwise) and reads its training rows/s per epoch and its
   validation accuracy from ``metrics.json``;
2. reads the token ids of the same run's training shards from its cache
   (``--features ids`` rows as the model received them) and trains the
   reference on them for the same epochs: ``nn.Embedding`` + ``nn.LSTM`` or
   ``nn.GRU`` (+ the same attention pooling) + ``nn.Linear``, Adam at the
   run's ``--lr`` and batch size, the same widths, torch threads as the run's
   trainer had (every core: the epochs read the cache). The reference is the
   tuned loop a PyTorch user would write: rows bucketed by length (sorted
   within a window of 50 batches, the batches then shuffled), each batch
   padded to its own longest row, no packing, the last state gathered at
   each row's length.

First, ``--warm-up`` (default 1) untimed one-epoch runs of the first model,
ours and the reference: on one host the first model measured ran 0.88 of
the reference where the same model measured second ran 1.23.

The sample: the first ``--rows`` rows of the corpus shuffled with seed 0
(default: 12,000 rows of ``benchmarks/out/data/debian-train.csv``, made by
``benchmarks/debian_corpus.py``). Writes ``benchmarks/out/sequence_speed-<date>.json``
and prints a Markdown table: each model's rows/s over the reference's
(target ≥ 0.9) and its validation accuracy.
"""
from __future__ import annotations

import os

# Tuned as lancetnic-flow's own trainer is: torch's OpenMP threads sleep
# while they wait (set before torch loads).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import scaling  # noqa: E402  (the CLI runner and the JSON record)

WINDOW = 50   # batches sorted by length together in the reference


def sample(corpus: Path, rows: int, out: Path) -> Path:
    import pandas as pd

    frame = pd.read_csv(corpus).sample(frac=1.0, random_state=0)
    if rows:
        frame = frame[:rows]
    frame.to_csv(out, index=False)
    return out


def cached_rows(run: Path) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray, int, int]:
    """The training shards of ``run``'s cache entry: per block (indices, offsets), the labels, vocabulary, classes."""
    from lancetnic_flow.dataflow.manifest import MANIFEST, Manifest
    from lancetnic_flow.dataflow.shards import load_shard

    config = json.loads((run / "config.json").read_text())
    cache = Path(config["output"].get("cache") or Path(config["output"]["out"]) / ".cache")
    entry = next(p for p in cache.iterdir() if (p / MANIFEST).exists())
    manifest = Manifest.from_json((entry / MANIFEST).read_text())
    idx, off, labels = [], [], []
    for info in manifest.shards("train"):
        block = load_shard(info, {})
        idx.append(block.indices.astype(np.int64))
        off.append(block.offsets.astype(np.int64))
        labels.append(block.labels.astype(np.int64))
    model = json.loads((run / "model.json").read_text())
    return idx, off, np.concatenate(labels), int(model["kwargs"]["dim"]), int(model["kwargs"]["classes"])


def reference(run: Path, cell: str, attention: bool, epochs: int, threads: int, device: str = "cpu") -> dict:
    """The plain loop on the run's cached rows; rows/s per epoch (training only)."""
    import torch
    from torch import nn

    torch.set_num_threads(threads)
    dev = torch.device(device)
    torch.manual_seed(0)
    config = json.loads((run / "config.json").read_text())
    tc, mc = config["training"], config["model"]
    idx, off, labels, dim, classes = cached_rows(run)
    rows = [ix[o[i]:o[i + 1]] for ix, o in zip(idx, off) for i in range(len(o) - 1)]
    labels_t = torch.from_numpy(labels).to(dev)
    embed, hidden, batch = mc.get("embed") or 128, mc.get("hidden") or 128, tc["batch_size"]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(dim, embed, padding_idx=0, sparse=True)
            self.rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(embed, hidden, batch_first=True)
            self.score = nn.Linear(hidden, 1) if attention else None
            self.out = nn.Linear(hidden, classes)

        def forward(self, ids, lengths):
            seq, _ = self.rnn(self.embed(ids))
            if self.score is not None:
                mask = torch.arange(ids.shape[1], device=ids.device)[None, :] < lengths[:, None]
                w = torch.softmax(self.score(torch.tanh(seq)).squeeze(-1).masked_fill(~mask, float("-inf")), 1)
                h = (w.unsqueeze(-1) * seq).sum(1)
            else:
                h = seq[torch.arange(len(lengths), device=ids.device), lengths - 1]
            return self.out(h)

    net = Net().to(dev)
    sparse = torch.optim.SparseAdam(list(net.embed.parameters()), lr=tc["lr"])
    dense = torch.optim.Adam([p for n, p in net.named_parameters() if not n.startswith("embed")], lr=tc["lr"])
    lengths = np.array([max(len(r), 1) for r in rows])
    rng = np.random.default_rng(0)
    out = []
    for _ in range(epochs):
        perm = rng.permutation(len(rows))
        batches = []
        for w in range(0, len(perm), batch * WINDOW):
            window = perm[w:w + batch * WINDOW]
            window = window[np.argsort(lengths[window], kind="stable")]
            batches += [window[i:i + batch] for i in range(0, len(window), batch)]
        t0 = time.perf_counter()
        for b in rng.permutation(len(batches)):
            members = batches[b]
            width = int(lengths[members].max())
            ids = np.zeros((len(members), width), np.int64)
            for j, r in enumerate(members):
                ids[j, :len(rows[r])] = rows[r]
            ids = torch.from_numpy(ids).to(dev, non_blocking=True)
            loss = nn.functional.cross_entropy(net(ids, torch.from_numpy(lengths[members]).to(dev)),
                                               labels_t[torch.from_numpy(members).to(dev)])
            sparse.zero_grad()
            dense.zero_grad()
            loss.backward()
            sparse.step()
            dense.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        out.append(len(rows) / (time.perf_counter() - t0))
    return {"rows": len(rows), "rows_per_s": out, "threads": threads, "device": device}


MODELS = {"LancetMC": ("lstm", False), "LancetMCA": ("lstm", True), "LancetMCA_gru": ("gru", True)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default=str(HERE / "out" / "data" / "debian-train.csv"))
    p.add_argument("--rows", type=int, default=12_000, help="rows of the shuffled corpus (0: all)")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--extra", default="", help="more train options for lancetnic-flow, e.g. '--lr 0.005'")
    p.add_argument("--warm-up", type=int, default=1, help="untimed one-epoch runs of the first model first")
    p.add_argument("--device", default="cpu", help="cpu or cuda: both sides train there (the GPU check, "
                                                   "benchmarks/gpu_check.sh)")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="seqspeed-"))
    data = sample(Path(args.corpus), args.rows, work / "sample.csv")
    threads = os.cpu_count() or 1
    record = {"corpus": args.corpus, "rows": args.rows, "epochs": args.epochs, "extra": args.extra,
              "device": args.device, "models": {}}
    names = args.models.split(",")
    # Untimed first: the first model measured ran 0.88 of the reference where, measured second, the
    # same model ran 1.23 (docs/benchmarks.md): what a first run pays is not the model's.
    plan = [(names[0], 1, True)] * args.warm_up + [(n, args.epochs, False) for n in names]
    for i, (name, epochs, warm_up) in enumerate(plan):
        cell, attention = MODELS[name]
        out = work / f"{name}-{i}"
        t0 = time.monotonic()
        # This checkout's code, whatever the venv's entry point was installed from.
        subprocess.run([sys.executable, "-m", "lancetnic_flow", "--quiet", "train", str(data), "--model", name,
                        "--epochs", str(epochs), "--no-plots", "--out", str(out),
                        "--cache", str(work / f"cache-{name}-{i}"), "--device", args.device, *args.extra.split()],
                       cwd=ROOT, check=True)
        wall = time.monotonic() - t0
        run = next(p for p in out.iterdir() if (p / "metrics.json").exists())
        metrics = json.loads((run / "metrics.json").read_text())
        ours = [e["rows_per_s"] for e in metrics["epochs"]]
        ref = reference(run, cell, attention, epochs, threads, args.device)
        if warm_up:
            print(f"warm-up {name}: ours {ours}, reference {ref['rows_per_s']} (not recorded)", flush=True)
            continue
        record["models"][name] = {
            "val_accuracy": metrics["accuracy"] if "accuracy" in metrics else metrics["epochs"][-1]["val_accuracy"],
            "epochs_val_accuracy": [e["val_accuracy"] for e in metrics["epochs"]],
            "lr": [e["lr"] for e in metrics["epochs"]],
            "rows_per_s": ours, "reference_rows_per_s": ref["rows_per_s"], "wall_s": wall,
            # the later epochs read the cache, as the reference does; the first also waits on featurisation
            "ratio": ours[-1] / ref["rows_per_s"][-1],
        }
        print(name, json.dumps(record["models"][name]), flush=True)
    path = scaling.write_record(HERE / "out", "sequence_speed", None, [record])
    print("\n| model | val accuracy | rows/s (last epoch) | reference rows/s | ratio |\n|---|---:|---:|---:|---:|")
    for name, r in record["models"].items():
        print(f"| {name} | {r['val_accuracy']:.4f} | {r['rows_per_s'][-1]:,.0f} | "
              f"{r['reference_rows_per_s'][-1]:,.0f} | {r['ratio']:.2f} |")
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
