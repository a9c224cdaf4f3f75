#!/usr/bin/env python
"""The saved model file's bytes, and what 8-bit weights cost in accuracy.

    .venv/bin/python benchmarks/debian_corpus.py          # and --language de, fr, ru, es
    .venv/bin/python benchmarks/model_size.py             # every Debian corpus found, defaults
    .venv/bin/python benchmarks/model_size.py --corpora debian --args "--model ScalpelMC"

For each corpus (``benchmarks/out/data/NAME-train.csv`` and ``-test.csv``):
``lancetnic-flow train`` with the defaults (plus ``--args``), the weights
file's bytes against the dense matrices' (every tensor at 4 bytes an
element, as runs stored them before), ``export --compact`` (8-bit weights)
and ``evaluate`` of both on the test file. Writes
``benchmarks/out/model-size-<time>.json`` and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling import run_cli as run, write_record  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA = HERE / "out" / "data"


def accuracy(run_dir: Path, test: Path) -> dict:
    doc = json.loads(run("evaluate", str(run_dir), str(test), "--json"))
    return {k: doc.get(k) for k in ("accuracy", "macro_f1")}


def dense_bytes(run_dir: Path) -> int:
    sys.path.insert(0, str(HERE.parent))
    from lancetnic_flow.runs.predict import Predictor

    return sum(t.numel() * 4 for t in Predictor(str(run_dir)).run.model.state_dict().values())


def measure(name: str, extra: list[str]) -> dict:
    train, test = DATA / f"{name}-train.csv", DATA / f"{name}-test.csv"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        run("train", str(train), "--out", tmp, "--name", "r", "--no-plots", "--quiet", *extra)
        r, c = out / "r", out / "r-int8"
        run("export", str(r), "--compact", str(c))
        meta = json.loads((r / "model.json").read_text())
        q = json.loads((c / "model.json").read_text())["quantised"]
        return {"corpus": name, "model": meta["model"], "classes": len(json.loads((r / "features.json").read_text())
                                                                        .get("labels") or []),
                "dense_bytes": dense_bytes(r), "file_bytes": (r / "model.safetensors").stat().st_size,
                "int8_bytes": (c / "model.safetensors").stat().st_size, "max_error": q["max_error"],
                "test": accuracy(r, test), "test_int8": accuracy(c, test)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    found = sorted(f.name[:-len("-train.csv")] for f in DATA.glob("debian*-train.csv") if "tags" not in f.name)
    p.add_argument("--corpora", default=",".join(found), help="corpus names, comma-separated")
    p.add_argument("--args", default="", help="more options for lancetnic-flow train")
    p.add_argument("--out", default=str(HERE / "out"))
    a = p.parse_args(argv)

    rows = [measure(n, shlex.split(a.args)) for n in a.corpora.split(",") if n]
    out = write_record(a.out, "model-size", argv, rows)
    print("| corpus | model, classes | dense MB | model file MB | 8-bit copy MB | test accuracy | 8-bit | "
          "macro-F1 | 8-bit |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['corpus']} | {r['model']}, {r['classes']} | {r['dense_bytes'] / 1e6:.1f} | "
              f"{r['file_bytes'] / 1e6:.2f} | {r['int8_bytes'] / 1e6:.2f} | {r['test']['accuracy']:.4f} | "
              f"{r['test_int8']['accuracy']:.4f} | {r['test']['macro_f1']:.4f} | {r['test_int8']['macro_f1']:.4f} |")
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    raise SystemExit(main())
