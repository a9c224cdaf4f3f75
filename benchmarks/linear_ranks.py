#!/usr/bin/env python
"""The default model (LinearSVM) trained data-parallel: test accuracy, rate
and bytes sent by ranks.

    .venv/bin/python benchmarks/debian_corpus.py
    .venv/bin/python benchmarks/linear_ranks.py [--ranks 1,2,4] [--sync epoch,8] [--sync-rows touched,all]
                                                [--corpus debian]

Every configuration trains the same corpus through the CLI with the
defaults and one shared shard cache (the first run featurises it): ranks 1
is the single process, with and without the twin that learns the
validation rows (``--ddp`` runs go without it); ranks N is ``--ddp N
--workers N``, weights averaged as the run decides (``--sync default``:
at each epoch's end up to 4 ranks, more often with more), or every
``--sync-every`` steps as well (``--sync N``), over the rows some rank touched since
the last sync or over every row (``--sync-rows``). On a 2-core machine
more ranks than cores measure accuracy and weights, not speed. Each run is
then scored with ``evaluate --json`` on the corpus's test file. Writes
``benchmarks/out/linear-ranks-<time>.json`` and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling import run_cli as cli, write_record  # noqa: E402

from lancetnic_flow.data.checks import RANK_FLOOR, RANK_PARTITIONS  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA = HERE / "out" / "data"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="debian")
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--sync", default="default,8", help="cadences for ranks > 1: 'default' (the run's own: each "
                    "epoch's end up to 4 ranks, more often with more) and/or N (--sync-every N steps)")
    ap.add_argument("--sync-rows", default="touched,all", help="rows a sync averages for ranks > 1: touched, all")
    ap.add_argument("--args", default="", help="more options for every train")
    ap.add_argument("--out", default=str(HERE / "out"))
    a = ap.parse_args(argv)

    train, test = DATA / f"{a.corpus}-train.csv", DATA / f"{a.corpus}-test.csv"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = str(Path(tmp) / "cache")
        # The cache is keyed by the data, not its partitioning: cut it as a run with the most ranks would
        # (data/checks.py: RANK_PARTITIONS a rank), or every --ddp run would reuse the coarser cut.
        most = max(int(x) for x in a.ranks.split(","))
        cut = ["--blocksize", str(max(RANK_FLOOR, -(-train.stat().st_size // (RANK_PARTITIONS * most))))] \
            if most > 1 else []
        cli("train", str(train), "--out", tmp, "--name", "warm", "--cache", cache, "--epochs", "1", "--no-plots",
            "--quiet", *cut)
        configs = []
        for n in (int(x) for x in a.ranks.split(",")):
            if n == 1:
                configs += [("1 (twin)", []), ("1", ["--no-learn-val"])]
            else:
                for sync in a.sync.split(","):
                    every = [] if sync in ("default", "epoch") else ["--sync-every", sync]
                    for which in a.sync_rows.split(","):
                        configs.append((f"{n}, sync {'by default' if not every else f'every {sync} steps'}, "
                                        f"{which} rows", ["--ddp", str(n), "--workers", str(n), *every,
                                                          "--sync-rows", which]))
        for name, extra in configs:
            run = Path(tmp) / f"r{len(rows)}"
            cli("train", str(train), "--out", tmp, "--name", run.name, "--cache", cache, "--no-plots", "--quiet",
                "--model", "LinearSVM", *extra, *a.args.split())
            m = json.loads((run / "metrics.json").read_text())
            ev = json.loads(cli("evaluate", str(run), str(test), "--json"))
            ddp = m.get("ddp") or {}
            epochs = len(m["epochs"])
            rows.append({"ranks": name, "epochs": epochs, "val_accuracy": m.get("val_accuracy"),
                         "test_accuracy": ev.get("accuracy"), "test_macro_f1": ev.get("macro_f1"),
                         "train_seconds": m["stage_seconds"].get("train"),
                         "rows_per_s": m["rows"]["trained"] * epochs / max(m["stage_seconds"].get("train") or 1, 1e-9),
                         "sent_bytes_per_rank_epoch": (max(ddp["rank_sent_bytes"]) / epochs
                                                       if ddp.get("rank_sent_bytes") else 0),
                         "exchange_seconds": max((c.get("exchange", 0.0) for c in ddp.get("rank_seconds") or []),
                                                 default=None),
                         "replicas_equal": len(set(ddp.get("replica_digests") or [0])) == 1,
                         "sync": ddp.get("sync")})
    out = write_record(a.out, "linear-ranks", argv, rows)
    print("| ranks | syncs an epoch | epochs | val accuracy | test accuracy | test macro-F1 | train s | rows/s "
          "| MB sent per rank per epoch | exchange s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['ranks']} | {(r['sync'] or {}).get('per_epoch', '')} | {r['epochs']} | {r['val_accuracy']:.4f} | {r['test_accuracy']:.4f} | "
              f"{r['test_macro_f1']:.4f} | {r['train_seconds']:.1f} | {r['rows_per_s']:,.0f} | "
              f"{r['sent_bytes_per_rank_epoch'] / 1e6:.1f} | "
              f"{'' if r['exchange_seconds'] is None else format(r['exchange_seconds'], '.1f')} |")
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    raise SystemExit(main())
