#!/usr/bin/env python
"""Text without spaces: lancetnic-flow's default (``--analyzer auto``) against
every word and character setting, its own and scikit-learn's, on one corpus.

    sudo apt-get update -o Acquire::Languages=en,ja,zh_CN
    .venv/bin/python benchmarks/debian_corpus.py --language ja        # → benchmarks/out/data/debian-ja-*.csv
    .venv/bin/python benchmarks/debian_corpus.py --language zh_CN
    .venv/bin/python -m pip install -c constraints.txt -e '.[bench]'   # scikit-learn
    .venv/bin/python benchmarks/analyzer_sweep.py --corpus debian-ja
    .venv/bin/python benchmarks/analyzer_sweep.py --corpus debian-zh_CN
    .venv/bin/python benchmarks/analyzer_sweep.py --corpus TRAIN.csv,TEST.csv

For each setting (``word 1,2``, ``char_wb`` 1,2 / 1,3 / 2,3 / 2,4 / 1,4,
``char`` 1,3 / 2,4), ``lancetnic-flow train`` with that ``--analyzer`` and
``--ngram-range`` and nothing else (validation accuracy from its own split,
the figure a default may be chosen by), then ``evaluate`` on the test file;
and scikit-learn's ``TfidfVectorizer(analyzer, ngram_range,
sublinear_tf=True)`` + ``LinearSVC()`` fitted on the training file, scored
on the test file. The first row is lancetnic-flow's default, with what it
decided. Writes ``benchmarks/out/analyzer-sweep-<corpus>-<time>.json`` and
prints a Markdown table.
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETTINGS = [("word", (1, 2)), ("char_wb", (1, 2)), ("char_wb", (1, 3)), ("char_wb", (2, 3)), ("char_wb", (2, 4)),
            ("char_wb", (1, 4)), ("char", (1, 3)), ("char", (2, 4))]
CLI = [sys.executable, "-m", "lancetnic_flow"]


def corpus_files(name: str) -> tuple[str, str]:
    if "," in name:
        train, test = name.split(",", 1)
        return train, test
    data = HERE / "out" / "data"
    return str(data / f"{name}-train.csv"), str(data / f"{name}-test.csv")


def ours(train: str, test: str, work: Path, setting: tuple | None) -> dict:
    name = "default" if setting is None else f"{setting[0]}-{setting[1][0]}-{setting[1][1]}"
    extra = [] if setting is None else ["--analyzer", setting[0], "--ngram-range", f"{setting[1][0]},{setting[1][1]}"]
    t = time.monotonic()
    p = subprocess.run([*CLI, "train", train, "--out", str(work), "--name", name, "--cache", str(work / f"c-{name}"),
                        "--quiet", *extra], capture_output=True, text=True)
    wall = time.monotonic() - t
    if p.returncode:
        raise SystemExit(f"train {name} failed:\n{p.stderr[-3000:]}")
    m = json.loads((work / name / "metrics.json").read_text())
    ev = subprocess.run([*CLI, "evaluate", str(work / name), test, "--json", "--quiet"], capture_output=True,
                        text=True, check=True)
    e = json.loads(ev.stdout.strip().splitlines()[-1])
    f = json.loads((work / name / "config.json").read_text())["features"]
    return {"system": "lancetnic-flow", "setting": f"{f['analyzer']} {f['ngram_min']},{f['ngrams']}",
            "default": setting is None, "decided": m.get("decided"), "val_accuracy": m.get("val_accuracy"),
            "test_accuracy": e.get("accuracy"), "test_macro_f1": e.get("macro_f1"), "wall_s": wall}


def sklearn_svc(train: str, test: str, setting: tuple) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics import accuracy_score, f1_score
    from sklearn.svm import LinearSVC

    def read(path):
        rows = list(csv.DictReader(open(path, encoding="utf-8", newline="")))
        return [r["text"] for r in rows], [r["label"] for r in rows]

    (x, y), (xt, yt) = read(train), read(test)
    t = time.monotonic()
    vec = TfidfVectorizer(analyzer=setting[0], ngram_range=setting[1], sublinear_tf=True)
    clf = LinearSVC().fit(vec.fit_transform(x), y)
    pred = clf.predict(vec.transform(xt))
    return {"system": "TF-IDF + LinearSVC", "setting": f"{setting[0]} {setting[1][0]},{setting[1][1]}",
            "test_accuracy": accuracy_score(yt, pred), "test_macro_f1": f1_score(yt, pred, average="macro"),
            "wall_s": time.monotonic() - t}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="debian-ja", help="debian-ja | debian-zh_CN | TRAIN.csv,TEST.csv")
    ap.add_argument("--out", default=str(HERE / "out"))
    a = ap.parse_args()
    train, test = corpus_files(a.corpus)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rows.append(ours(train, test, work, None))
        for s in SETTINGS:
            rows.append(ours(train, test, work, s))
    for s in SETTINGS:
        rows.append(sklearn_svc(train, test, s))
    stamp = datetime.now().isoformat(timespec="minutes")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    label = Path(train).name.replace("-train.csv", "")
    path = out / f"analyzer-sweep-{label}-{stamp.replace(':', '')}.json"
    path.write_text(json.dumps({"date": stamp, "train": train, "test": test, "rows": rows}, indent=1))
    print(f"| system | setting | val accuracy | test accuracy | test macro-F1 | wall s |\n|---|---|---|---|---|---|")
    for r in rows:
        name = r["system"] + (" (default)" if r.get("default") else "")
        val = f"{r['val_accuracy']:.4f}" if r.get("val_accuracy") is not None else ""
        print(f"| {name} | {r['setting']} | {val} | {r['test_accuracy']:.4f} | {r['test_macro_f1']:.4f} | "
              f"{r['wall_s']:.1f} |")
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
