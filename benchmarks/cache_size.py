#!/usr/bin/env python
"""Bytes of shard cache per byte of text, and the epoch rate reading it.

    .venv/bin/python benchmarks/debian_corpus.py                       # and --language de, fr
    .venv/bin/python benchmarks/cache_size.py                           # Debian en/de/fr, defaults
    .venv/bin/python benchmarks/cache_size.py --args "--features tfidf" # a fitted vocabulary's weights
    .venv/bin/python benchmarks/cache_size.py --corpora benchmarks/out/data/debian-ru-train.csv --args "--model LancetMC --epochs 1"

For each training file: ``lancetnic-flow train FILE --out TMP --no-plots``
(plus ``--args``) with a fresh cache, then the cache entry's bytes (shards,
manifest and the fitted features), the file's bytes, and the median epoch
rows/s from ``metrics.json`` (the first epoch reads the fit pass's shards,
the others the cache). The same shards are also decoded in this process
packed and as plain ``.npz`` (the cache before packing) for their size and
read rate side by side. Writes ``benchmarks/out/cache-size-<time>.json``
and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "out" / "data"
DEFAULT = [DATA / "debian-train.csv", DATA / "debian-de-train.csv", DATA / "debian-fr-train.csv"]


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def measure(corpus: Path, args: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "lancetnic_flow", "train", str(corpus), "--out", tmp, "--name", "r",
                            "--no-plots", "--quiet", *args], capture_output=True, text=True)
        wall = time.monotonic() - t0
        if p.returncode:
            raise SystemExit(f"train failed on {corpus}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        metrics = json.loads((Path(tmp) / "r" / "metrics.json").read_text())
        cache = folder_bytes(Path(tmp) / ".cache")
        shards = sum(folder_bytes(d) for d in (Path(tmp) / ".cache").glob("*/shards"))
        reading = read_rates(sorted((Path(tmp) / ".cache").glob("*/shards/*")))
    rates = [e["rows_per_s"] for e in metrics["epochs"] if e.get("rows_per_s")]
    text = corpus.stat().st_size
    return {"corpus": corpus.name, "text_bytes": text, "cache_bytes": cache, "shard_bytes": shards,
            "cache_per_text_byte": cache / text, "epoch_rows_per_s": statistics.median(rates) if rates else None,
            "epochs": len(rates), "rows": metrics["rows"]["trained"], "wall_seconds": wall,
            "val_accuracy": metrics.get("val_accuracy"), "model": metrics.get("model"), **reading}


def read_rates(files: list[Path], rounds: int = 3) -> dict:
    """The same shards packed (as the cache holds them) and as plain ``.npz``
    (the cache before packing): bytes, and rows/s decoding each in this
    process (best of ``rounds``, the two read in turn so both see the same
    machine)."""
    import io

    import numpy as np

    from lancetnic_flow.features.rows import RowBlock

    packed = [f.read_bytes() for f in files]
    blocks = [RowBlock.from_bytes(d) for d in packed]
    plain = []
    for b in blocks:
        buf = io.BytesIO()
        np.savez(buf, **b._arrays())
        plain.append(buf.getvalue())
    rows = sum(len(b) for b in blocks)
    best = {"packed": float("inf"), "plain": float("inf")}
    for _ in range(rounds):
        for name, datas in (("packed", packed), ("plain", plain)):
            t0 = time.perf_counter()
            for d in datas:
                RowBlock.from_bytes(d)
            best[name] = min(best[name], time.perf_counter() - t0)
    return {"plain_shard_bytes": sum(map(len, plain)), "read_rows_per_s_packed": rows / best["packed"],
            "read_rows_per_s_plain": rows / best["plain"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpora", default=",".join(map(str, DEFAULT)), help="training files, comma-separated")
    p.add_argument("--args", default="", help="more options for lancetnic-flow train")
    p.add_argument("--out", default=str(HERE / "out"))
    a = p.parse_args(argv)
    from scaling import write_record

    rows = [measure(Path(c), shlex.split(a.args)) for c in a.corpora.split(",")]
    out = write_record(a.out, "cache-size", argv, rows)
    print("| corpus | text MB | cache MB (shards) | cache bytes per text byte | shards as plain .npz MB | "
          "shard reads rows/s packed / plain | median epoch rows/s | val accuracy |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['corpus']} | {r['text_bytes'] / 1e6:.1f} | {r['cache_bytes'] / 1e6:.1f} "
              f"({r['shard_bytes'] / 1e6:.1f}) | {r['cache_per_text_byte']:.3f} | {r['plain_shard_bytes'] / 1e6:.1f} | "
              f"{r['read_rows_per_s_packed']:,.0f} / {r['read_rows_per_s_plain']:,.0f} | "
              f"{r['epoch_rows_per_s'] or 0:,.0f} | {r['val_accuracy'] or 0:.4f} |")
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    raise SystemExit(main())
