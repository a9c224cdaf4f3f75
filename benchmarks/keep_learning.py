#!/usr/bin/env python
"""Keep learning: train on half A, continue on half B (``--init-from``), against training on A ∪ B at once.

Run it from the repository root, with the project's venv, on a corpus of
``text,label`` rows (``debian_corpus.py`` builds the Debian one):

    .venv/bin/python benchmarks/keep_learning.py                               # benchmarks/out/data/debian-*.csv
    .venv/bin/python benchmarks/keep_learning.py --data /elsewhere/data --repeat 3
    .venv/bin/python benchmarks/keep_learning.py --train T.csv --test S.csv     # your own

The training file is split in two halves by a hash of each row's text
(BLAKE2b, so the split is the same on every machine and in every order):
A and B. Five runs, each a fresh ``lancetnic-flow train`` subprocess with
the defaults and a cache of its own (every run featurises its data once, as
a first run does):

1. ``train A``;
2. ``train B --init-from A``: the continued run;
3. ``train A∪B`` (the whole training file): the target's reference;
4. ``train B``: the time the continued run is held to;
5. ``train A∪B --init-from A``: continued on data that repeats A's rows,
   whose validation must not include the rows A's model learned.

Each run is then evaluated on the test file (``evaluate --json``). The
targets: the continued run's test accuracy within 0.5 point of A∪B's, in
about B's time (whole command, and the run's own seconds in metrics.json);
and every run's validation accuracy an honest estimate of its test
accuracy (the table's last column: validation − test, in points).
Writes ``benchmarks/out/keep_learning-<date>.json`` and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}
CLI = [sys.executable, "-m", "lancetnic_flow"]


def run(cmd: list[str], cwd: Path) -> tuple[float, str]:
    t = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return time.monotonic() - t, p.stdout


def half(text: str) -> str:
    """A or B, by the first byte of the text's BLAKE2b digest."""
    return "AB"[hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()[0] & 1]


def split(train: Path, into: Path) -> dict[str, int]:
    """``train`` → ``into/A.csv`` and ``into/B.csv`` (same header, rows in their order)."""
    csv.field_size_limit(2**31 - 1)
    counts = {"A": 0, "B": 0}
    with open(train, newline="", encoding="utf-8") as f, open(into / "A.csv", "w", newline="", encoding="utf-8") as a, \
            open(into / "B.csv", "w", newline="", encoding="utf-8") as b:
        reader = csv.reader(f)
        header = next(reader)
        text = header.index("text")
        out = {"A": csv.writer(a), "B": csv.writer(b)}
        for w in out.values():
            w.writerow(header)
        for row in reader:
            h = half(row[text])
            out[h].writerow(row)
            counts[h] += 1
    return counts


def train(name: str, data: Path, work: Path, *extra: str) -> dict:
    """One ``train`` (its own cache), timed, evaluated later; its metrics."""
    wall, _ = run([*CLI, "train", str(data), "--out", str(work / "runs"), "--name", name, "--cache",
                   str(work / f"cache-{name}"), "--no-plots", "--quiet", *extra], work)
    m = json.loads((work / "runs" / name / "metrics.json").read_text())
    return {"wall_s": round(wall, 2), "run_s": round(m["seconds"], 2), "val_accuracy": m.get("val_accuracy"),
            "rows": m["rows"]["trained"], "validated": m["rows"]["validated"],
            "learned_by_init": m["rows"].get("noted", {}).get("learned_by_init", 0), "labels": len(m["labels"]),
            "stage_seconds": m["stage_seconds"]}


def test_accuracy(name: str, test: Path, work: Path) -> float:
    _, out = run([*CLI, "evaluate", str(work / "runs" / name), str(test), "--json"], work)
    return json.loads(out.strip().splitlines()[-1])["accuracy"]


def once(train_file: Path, test_file: Path, work: Path) -> dict:
    counts = split(train_file, work)
    runs = {"A": train("A", work / "A.csv", work),
            "B --init-from A": train("AB-continued", work / "B.csv", work, "--init-from", str(work / "runs" / "A")),
            "A∪B": train("AuB", train_file, work),
            "B": train("B", work / "B.csv", work),
            "A∪B --init-from A": train("AuB-continued", train_file, work, "--init-from", str(work / "runs" / "A"))}
    for label, name in (("A", "A"), ("B --init-from A", "AB-continued"), ("A∪B", "AuB"), ("B", "B"),
                        ("A∪B --init-from A", "AuB-continued")):
        runs[label]["test_accuracy"] = round(test_accuracy(name, test_file, work), 4)
    return {"halves": counts, "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--data", default=str(ROOT / "benchmarks" / "out" / "data"),
                    help="folder of debian-train.csv and debian-test.csv (default benchmarks/out/data)")
    ap.add_argument("--train", help="training CSV (text,label); default DATA/debian-train.csv")
    ap.add_argument("--test", help="test CSV; default DATA/debian-test.csv")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out"))
    args = ap.parse_args()
    train_file = Path(args.train or Path(args.data) / "debian-train.csv").resolve()
    test_file = Path(args.test or Path(args.data) / "debian-test.csv").resolve()
    results: dict = {"date": datetime.now().isoformat(timespec="minutes"), "machine": os.uname().nodename,
                     "cpus": os.cpu_count(), "train": str(train_file), "test": str(test_file), "repeats": []}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="lancetnic-keep-") as tmp:
            results["repeats"].append(once(train_file, test_file, Path(tmp)))
    rows = list(results["repeats"][0]["runs"])
    def median(r: str, k: str) -> float | None:
        values = [rep["runs"][r][k] for rep in results["repeats"]]
        return None if None in values else statistics.median(values)

    med = {r: {k: median(r, k) for k in ("wall_s", "run_s", "test_accuracy", "val_accuracy", "validated")}
           for r in rows}
    results["median"] = med
    gap = (med["A∪B"]["test_accuracy"] - med["B --init-from A"]["test_accuracy"]) * 100
    results["gap_points"] = round(gap, 2)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"keep_learning-{results['date'].replace(':', '')}.json"
    path.write_text(json.dumps(results, indent=2))
    halves = results["repeats"][0]["halves"]
    print(f"halves: A {halves['A']:,} rows, B {halves['B']:,} rows; median of {args.repeat}\n")
    print("| run | test accuracy | whole command (s) | run's own seconds | validation rows | validation accuracy "
          "| validation − test (points) |\n|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        val = med[r]["val_accuracy"]
        shown = (f"{val:.4f} | {(val - med[r]['test_accuracy']) * 100:+.2f}" if val is not None else "— | —")
        print(f"| {r} | {med[r]['test_accuracy']:.4f} | {med[r]['wall_s']:.1f} | {med[r]['run_s']:.1f} | "
              f"{med[r]['validated']:,.0f} | {shown} |")
    print(f"\nA∪B − continued: {gap:+.2f} points (target ≤ 0.5); continued / B time: "
          f"{med['B --init-from A']['wall_s'] / med['B']['wall_s']:.2f}× whole command\nwrote {path}")


if __name__ == "__main__":
    main()
