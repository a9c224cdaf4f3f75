"""Reading partitions: the CPU seconds one process spends reading a file's
partitions into rows (data/readers: cuts, parsing, row checks), no cluster.

    .venv/bin/python benchmarks/read_partitions.py                       # a generated CSV without quotes
    .venv/bin/python benchmarks/read_partitions.py benchmarks/out/data/debian-train.csv --blocksize 1MiB
    .venv/bin/python benchmarks/read_partitions.py --generate jsonl --rows 300000 --keep id,score   # as predict reads

Prints each pass's rows and CPU seconds (process time, so other load on the
machine does not count) and writes benchmarks/out/read_partitions.json.
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from lancetnic_flow.data.readers import read_partition
from lancetnic_flow.data.sources import Columns, plan_source
from lancetnic_flow.sizes import parse_size

OUT = Path(__file__).parent / "out"
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()


def generated(rows: int, fmt: str = "csv") -> Path:
    """A file of ``rows`` rows: a CSV whose fields hold no quote (as most exports do), or JSON
    Lines objects of an integer id, a text, a string label and a decimal score."""
    path = OUT / (f"unquoted-{rows}.csv" if fmt == "csv" else f"plain-{rows}.jsonl")
    if path.exists():
        return path
    OUT.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(0)
    with path.open("w") as f:
        if fmt == "csv":
            f.write("text,label\n")
        for i in range(rows):
            text, label = " ".join(rnd.choices(WORDS, k=20)), rnd.choice("abcd")
            f.write(f"{text},{label}\n" if fmt == "csv" else
                    json.dumps({"id": i, "text": text, "label": label, "score": rnd.random()}) + "\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", nargs="?", help="a CSV/TSV with text and label columns (default: generated)")
    ap.add_argument("--rows", type=int, default=600_000, help="rows of the generated file")
    ap.add_argument("--generate", choices=("csv", "jsonl"), default="csv", help="the generated file's format")
    ap.add_argument("--blocksize", default="1MiB")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--text", default="text")
    ap.add_argument("--label", default="label")
    ap.add_argument("--keep", help="columns to carry, comma-separated: every row read as prediction reads it")
    a = ap.parse_args()
    path = a.path or str(generated(a.rows, a.generate))
    src = plan_source([path], blocksize=parse_size(a.blocksize))
    keep = tuple(a.keep.split(",")) if a.keep else ()
    cols = Columns(text=(a.text,), label=a.label, keep=keep, all_rows=bool(keep))
    passes = []
    for _ in range(a.repeat):
        t, rows = time.process_time(), 0
        for p in src.partitions:
            rows += sum(c.table.num_rows for c in read_partition(p, cols))
        passes.append({"rows": rows, "cpu_s": round(time.process_time() - t, 3)})
        print(f"{path}: {len(src.partitions)} partitions, {rows:,} rows, {passes[-1]['cpu_s']} s CPU")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "read_partitions.json").write_text(json.dumps({"path": path, "blocksize": a.blocksize,
                                                          "partitions": len(src.partitions), "passes": passes}))


if __name__ == "__main__":
    main()
