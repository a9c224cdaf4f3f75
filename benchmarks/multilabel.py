#!/usr/bin/env python
"""Multi-label text, side by side: lancetnic-flow's defaults against
one-vs-rest LinearSVC on TF-IDF and fastText's one-vs-all loss, on one
corpus, in one run.

    sudo apt-get update -o Acquire::Languages=en
    .venv/bin/python benchmarks/debian_corpus.py --tags        # debtags: 29k packages, 135 tags, ~3.3 a row
    .venv/bin/python benchmarks/multilabel.py                   # --corpus debian-tags, --budget 4GiB
    .venv/bin/python benchmarks/multilabel.py --flow-args "--model ScalpelMC" --systems lancetnic-flow
    .venv/bin/python benchmarks/multilabel.py --corpus TRAIN.csv,TEST.csv  # any text,label CSV pair, labels "a|b"

Every system runs in its own subprocess under ``scaling.py``'s sampler (RSS
of the process and its descendants, every 0.2 s), on the same training file
and the same test file; the same scoring code scores every system's
predicted label sets (scikit-learn's ``f1_score`` over the labels of the
training file, rows × labels):

* ``lancetnic-flow``: ``train TRAIN --task multilabel --label-sep "|"
  --memory-budget BUDGET`` (plus ``--flow-args``), its time the whole
  command, then ``predict RUN --input TEST`` (the labels a run predicts
  with its own thresholds).
* ``linearsvc``: ``TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)``
  + ``OneVsRestClassifier(LinearSVC())``, all in memory.
* ``fasttext``: ``train_supervised(loss="ova", lr=0.5, epoch=25,
  wordNgrams=2, thread=2)``, labels whose probability is ≥ 0.5.

Writes ``OUT/multilabel-<corpus>-<time>.json`` and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import shlex
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SYSTEMS = ["lancetnic-flow", "linearsvc", "fasttext"]
SEP = "|"
csv.field_size_limit(2**31 - 1)


def corpus_files(name: str) -> tuple[Path, Path]:
    data = HERE / "out" / "data"
    if name == "debian-tags":
        train, test = data / "debian-tags-train.csv", data / "debian-tags-test.csv"
        if not train.exists():
            import subprocess

            subprocess.run([sys.executable, str(HERE / "debian_corpus.py"), "--tags"], check=True)
        return train, test
    a, b = name.split(",")
    return Path(a), Path(b)


def read_sets(path: str) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="", encoding="utf-8") as f:
        r = csv.reader(f)
        head = next(r)
        ti, li = head.index("text"), head.index("label")
        texts, sets = [], []
        for row in r:
            texts.append(row[ti])
            sets.append([x for x in row[li].split(SEP) if x])
    return texts, sets


def scores(train_sets: list[list[str]], y_true: list[list[str]], y_pred: list[list[str]]) -> dict:
    """Micro/macro F1, precision and recall over the training file's labels (scikit-learn's)."""
    from sklearn.metrics import f1_score, precision_score, recall_score
    from sklearn.preprocessing import MultiLabelBinarizer

    labels = sorted({x for s in train_sets for x in s} | {x for s in y_true for x in s})
    mlb = MultiLabelBinarizer(classes=labels)
    t, p = mlb.fit_transform(y_true), mlb.transform([[x for x in s if x in set(labels)] for s in y_pred])
    out = {"test_rows": len(y_true), "labels": len(labels),
           "subset_accuracy": sum(set(a) == set(b) for a, b in zip(y_true, y_pred)) / max(1, len(y_true))}
    for avg in ("micro", "macro"):
        out[f"{avg}_f1"] = float(f1_score(t, p, average=avg, zero_division=0))
        out[f"{avg}_precision"] = float(precision_score(t, p, average=avg, zero_division=0))
        out[f"{avg}_recall"] = float(recall_score(t, p, average=avg, zero_division=0))
    return out


# --------------------------------------------------------------------------- workers (one subprocess each)

def worker_linearsvc(train: str, test: str, work: str) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.preprocessing import MultiLabelBinarizer
    from sklearn.svm import LinearSVC

    texts, sets = read_sets(train)
    t0 = time.monotonic()
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    x = vec.fit_transform(texts)
    mlb = MultiLabelBinarizer()
    clf = OneVsRestClassifier(LinearSVC()).fit(x, mlb.fit_transform(sets))
    train_s = time.monotonic() - t0
    tt, ts = read_sets(test)
    pred = [list(mlb.classes_[row.nonzero()[0]]) for row in clf.predict(vec.transform(tt))]
    return {"train_seconds": train_s, **scores(sets, ts, pred)}


def worker_fasttext(train: str, test: str, work: str) -> dict:
    import fasttext
    from side_by_side import tokens

    texts, sets = read_sets(train)
    t0 = time.monotonic()
    path = Path(work) / "train.ft"
    with open(path, "w", encoding="utf-8") as f:
        for t, s in zip(texts, sets):
            f.write(" ".join(f"__label__{x}" for x in s) + f" {tokens(t)}\n")
    model = fasttext.train_supervised(str(path), loss="ova", lr=0.5, epoch=25, wordNgrams=2, thread=2, verbose=0)
    train_s = time.monotonic() - t0
    tt, ts = read_sets(test)
    got = model.predict([tokens(t) for t in tt], k=-1, threshold=0.5)[0]
    pred = [[x.removeprefix("__label__") for x in row] for row in got]
    return {"train_seconds": train_s, **scores(sets, ts, pred)}


WORKERS = {"linearsvc": worker_linearsvc, "fasttext": worker_fasttext}


def run_flow(train: Path, test: Path, work: Path, budget: str, extra: list[str], timeout: float) -> dict:
    from scaling import check_rc, cli_cmd, run_sampled

    res = run_sampled([*cli_cmd(), "train", str(train), "--task", "multilabel", "--label-sep", SEP,
                       "--memory-budget", budget, "--out", str(work / "runs"), "--name", "run", "--quiet", *extra],
                      work / "train.log", timeout=timeout)
    check_rc(res, "lancetnic-flow train")
    metrics = json.loads((work / "runs" / "run" / "metrics.json").read_text())
    pred_path = work / "pred.jsonl"
    ev = run_sampled([*cli_cmd(), "predict", str(work / "runs" / "run"), "--input", str(test), "--output",
                      str(pred_path), "--force", "--quiet"], work / "predict.log", timeout=timeout)
    check_rc(ev, "lancetnic-flow predict")
    pred = [json.loads(line).get("predicted") or [] for line in pred_path.read_text().splitlines()]
    _, train_sets = read_sets(str(train))
    _, test_sets = read_sets(str(test))
    return {"peak_total_rss_bytes": res["peak_total_rss_bytes"], "wall_seconds": res["wall_seconds"],
            "predict_seconds": ev["wall_seconds"], "model": metrics.get("model"),
            "epochs": len(metrics.get("epochs") or []), "stage_seconds": metrics.get("stage_seconds"),
            "val_micro_f1": metrics.get("val_micro_f1"), "val_macro_f1": metrics.get("val_macro_f1"),
            **scores(train_sets, test_sets, pred)}


def run_system(system: str, train: Path, test: Path, work: Path, a) -> dict:
    from scaling import check_rc, run_sampled

    work.mkdir(parents=True, exist_ok=True)
    if system == "lancetnic-flow":
        return run_flow(train, test, work, a.budget, shlex.split(a.flow_args), a.timeout)
    result = work / "result.json"
    res = run_sampled([sys.executable, __file__, "--worker", system, "--train", str(train), "--test", str(test),
                       "--work", str(work), "--result", str(result)], work / "worker.log", timeout=a.timeout)
    check_rc(res, system)
    return {"peak_total_rss_bytes": res["peak_total_rss_bytes"], "wall_seconds": res["wall_seconds"],
            **json.loads(result.read_text())}


def markdown(results: dict) -> str:
    lines = ["| system | wall s | peak RSS MiB | micro-F1 | macro-F1 | micro P / R | subset acc. |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, r in results.items():
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error'][:80]} ||||||")
            continue
        lines.append(f"| {name} | {r['wall_seconds']:.1f} | {r['peak_total_rss_bytes'] / 2**20:,.0f} | "
                     f"{r['micro_f1']:.4f} | {r['macro_f1']:.4f} | {r['micro_precision']:.3f} / "
                     f"{r['micro_recall']:.3f} | {r['subset_accuracy']:.4f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default="debian-tags", help="debian-tags | TRAIN.csv,TEST.csv (labels joined with |)")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--budget", default="4GiB", help="lancetnic-flow's --memory-budget")
    p.add_argument("--flow-args", default="", help="more options for lancetnic-flow train")
    p.add_argument("--out", default=str(HERE / "out"))
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    p.add_argument("--train", help=argparse.SUPPRESS)
    p.add_argument("--test", help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        Path(a.result).write_text(json.dumps(WORKERS[a.worker](a.train, a.test, a.work)))
        return 0
    from scaling import machine_info

    train, test = corpus_files(a.corpus)
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    label = Path(a.corpus.split(",")[0]).stem if "," in a.corpus else a.corpus
    out = Path(a.out)
    path = out / f"multilabel-{label}-{stamp}.json"
    doc = {"benchmark": "multilabel", "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
           "date": stamp, "machine": machine_info(), "train": str(train), "test": str(test), "budget": a.budget,
           "flow_args": a.flow_args, "results": {}}
    for system in a.systems.split(","):
        print(f"  {system} …", flush=True)
        try:
            doc["results"][system] = run_system(system, train, test, out / "work" / f"ml-{label}-{stamp}" / system, a)
        except Exception as exc:  # one failing system does not lose the others
            doc["results"][system] = {"error": f"{type(exc).__name__}: {exc}"}
        path.write_text(json.dumps(doc, indent=1))
    doc["markdown"] = markdown(doc["results"])
    path.write_text(json.dumps(doc, indent=1))
    print("\n" + doc["markdown"] + f"\n\nresults: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
