"""Regression side by side: lancetnic-flow with its defaults (``train TRAIN
--target COL``, then ``evaluate RUN TEST``) against a ridge regression over
scikit-learn's TF-IDF of words and word pairs (sublinear tf), held in memory,
on three corpora, each with a training and a test file:

    .venv/bin/python benchmarks/regression.py                       # every corpus
    .venv/bin/python benchmarks/regression.py --corpora templated --variant "--sparse-lr 2.5"

* ``templated``: short, templated rows, ``"value w<k> thing<j>"`` with the
  target k plus a uniform fraction: a few terms, each in a tenth of the rows
  or more (a ridge regression reaches R² 0.99);
* ``make-data``: 50,000 ``lancetnic-flow make-data`` rows, target column
  ``target``: the first 40,000 train, the rest test;
* ``debian-size``: Debian package descriptions (the text of
  ``benchmarks/debian_corpus.py``) and log10 of the package's installed size,
  read from the package lists apt already has (``apt-get update -o
  Acquire::Languages=en`` once); split by a hash of the text, a fifth to test.

``--variant "OPTIONS"`` (repeatable) adds a lancetnic-flow run with those
options, e.g. the input rows' rate before it was lowered for value heads
(``--sparse-lr 2.5``). Test R², RMSE and the RMSE of predicting the training
mean, wall seconds of train + evaluate. Writes
``OUT/regression-<time>.json`` and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import glob
import json
import math
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CORPORA = ("templated", "make-data", "debian-size")


def _write(path: Path, header: list[str], rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def templated(out: Path) -> tuple[Path, Path, str]:
    def rows(n: int, seed: int):
        rng = random.Random(seed)
        for i in range(n):
            v = rng.random() * 10
            yield f"value word{int(v)} thing{i % 7}", f"{v:.3f}"

    train, test = out / "templated-train.csv", out / "templated-test.csv"
    _write(train, ["text", "y"], rows(20_000, 0))
    _write(test, ["text", "y"], rows(5_000, 1))
    return train, test, "y"


def make_data(out: Path) -> tuple[Path, Path, str]:
    from lancetnic_flow.data.synth import write_corpus

    # One corpus (a seed picks the vocabulary and topics too): its first 40,000 rows train, the rest test.
    whole = out / "regress-make-data-50000.csv"
    write_corpus(str(whole), 50_000, classes=4, seed=0)
    with open(whole, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    train, test = out / "regress-make-data-train.csv", out / "regress-make-data-test.csv"
    _write(train, rows[0], rows[1:40_001])
    _write(test, rows[0], rows[40_001:])
    return train, test, "target"


def debian_size(out: Path) -> tuple[Path, Path, str]:
    import debian_corpus as dc

    described, _ = dc.long_descriptions()
    sizes: dict[str, float] = {}
    for path in sorted(glob.glob(f"{dc.LISTS}/*_binary-*_Packages*")):
        for st in dc.stanzas(dc.read_list(path)):
            if "Installed-Size" in st and "Description" in st:
                text = described.get(st.get("Description-md5", "")) or dc.clean(st["Description"])
                if len(text) >= 20:
                    sizes[text] = math.log10(int(st["Installed-Size"]) + 1)
    if not sizes:
        raise SystemExit("no package lists with descriptions: run apt-get update -o Acquire::Languages=en once")
    rows = sorted(sizes.items())
    train, test = out / "debian-size-train.csv", out / "debian-size-test.csv"
    _write(train, ["text", "size"], ((t, f"{s:.5f}") for t, s in rows if not dc.is_test(t, 0.2)))
    _write(test, ["text", "size"], ((t, f"{s:.5f}") for t, s in rows if dc.is_test(t, 0.2)))
    return train, test, "size"


def ridge(train: Path, test: Path, col: str) -> dict:
    import numpy as np
    import pandas as pd
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import Ridge

    t0 = time.perf_counter()
    tr, te = pd.read_csv(train, keep_default_na=False), pd.read_csv(test, keep_default_na=False)
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    model = Ridge(alpha=1.0).fit(vec.fit_transform(tr["text"]), tr[col])
    pred = model.predict(vec.transform(te["text"]))
    y = te[col].to_numpy(float)
    rmse = float(np.sqrt(np.mean((pred - y) ** 2)))
    base = float(np.sqrt(np.mean((tr[col].mean() - y) ** 2)))
    return {"r2": 1 - rmse ** 2 / float(np.var(y)), "rmse": rmse, "baseline_rmse": base,
            "seconds": time.perf_counter() - t0}


def ours(train: Path, test: Path, col: str, work: Path, options: list[str]) -> dict:
    from scaling import cli_cmd

    name = "run-" + ("-".join(o.lstrip("-") for o in options) or "defaults")
    t0 = time.perf_counter()
    trained = subprocess.run([*cli_cmd(), "train", str(train), "--target", col, *options, "--out", str(work),
                              "--name", name, "--quiet"], capture_output=True, text=True)
    if trained.returncode:   # e.g. "training diverged": a row of the table, not the end of the benchmark
        return {"r2": float("nan"), "rmse": float("nan"), "baseline_rmse": None,
                "seconds": time.perf_counter() - t0, "error": (trained.stdout + trained.stderr).strip()[-300:]}
    ev = subprocess.run([*cli_cmd(), "evaluate", str(work / name), str(test), "--json", "--quiet"], check=True,
                        capture_output=True, text=True)
    m = json.loads(ev.stdout)
    return {"r2": m["r2"], "rmse": m["rmse"], "baseline_rmse": m.get("baseline_rmse"),
            "seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    from scaling import machine_info

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpora", default=",".join(CORPORA), help=f"comma-separated, of {', '.join(CORPORA)}")
    p.add_argument("--variant", action="append", default=[], help='lancetnic-flow options to compare, e.g. '
                   '"--sparse-lr 2.5" (repeatable)')
    p.add_argument("--out", default=str(HERE / "out"))
    a = p.parse_args(argv)
    out = Path(a.out).resolve()
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    data, work = out / "data", out / "work" / f"regression-{stamp}"
    data.mkdir(parents=True, exist_ok=True)
    build = {"templated": templated, "make-data": make_data, "debian-size": debian_size}
    doc = {"benchmark": "regression", "date": stamp, "machine": machine_info(),
           "command": shlex.join(["python", "benchmarks/regression.py", *(sys.argv[1:] if argv is None else argv)]),
           "results": {}}
    lines = ["| corpus | system | test R² | RMSE | RMSE of the mean | seconds |", "|---|---|---:|---:|---:|---:|"]
    for corpus in [c.strip() for c in a.corpora.split(",") if c.strip()]:
        train, test, col = build[corpus](data)
        res = {"lancetnic-flow": ours(train, test, col, work / corpus, [])}
        for v in a.variant:
            res[f"lancetnic-flow {v}"] = ours(train, test, col, work / corpus, shlex.split(v))
        res["TF-IDF + ridge"] = ridge(train, test, col)
        doc["results"][corpus] = res
        for system, r in res.items():
            base = f"{r['baseline_rmse']:.4f}" if r.get("baseline_rmse") is not None else "–"
            lines.append(f"| {corpus} | {system} | {r['r2']:.4f} | {r['rmse']:.4f} | {base} | {r['seconds']:.1f} |")
            print(lines[-1], flush=True)
    path = out / f"regression-{stamp}.json"
    path.write_text(json.dumps(doc, indent=1))
    print("\n" + "\n".join(lines) + f"\n\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
