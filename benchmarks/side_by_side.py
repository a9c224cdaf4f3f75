#!/usr/bin/env python
"""lancetnic-flow with its defaults next to fastText, Vowpal Wabbit and two
scikit-learn baselines, on one named corpus, in one run.

    .venv/bin/python -m pip install -c constraints.txt -e '.[bench]'     # fastText, VW, scikit-learn
    .venv/bin/python benchmarks/side_by_side.py --corpus debian          # Debian descriptions (benchmarks/debian_corpus.py)
    .venv/bin/python benchmarks/side_by_side.py --corpus docstrings      # library docstrings (benchmarks/real_corpus.py)
    .venv/bin/python benchmarks/side_by_side.py --corpus make-data:200000
    .venv/bin/python benchmarks/side_by_side.py --corpus TRAIN.csv,TEST.csv --repeat 10   # any text,label CSV pair;
                                                                                           # --repeat: the training file
                                                                                           # N times, a copy tag per copy

Every system runs in its own subprocess under a sampler that reads the RSS
of the process and all its descendants every 0.2 s (``scaling.py``'s), on
the same training file in its stored order and the same test file:

* ``lancetnic-flow``: ``lancetnic-flow train TRAIN`` with no option but the
  output folder, then ``lancetnic-flow evaluate RUN TEST --json``. Its time
  is the whole ``train`` command: start-up, cluster, fit, every epoch,
  validation, saving.
* ``fasttext``: ``train_supervised(lr=0.5, epoch=25, wordNgrams=2,
  thread=2)`` on the file converted to ``__label__`` lines (the conversion
  is timed apart), then ``predict`` on the test texts.
* ``vw``: Vowpal Wabbit ``--oaa K --ngram 2 --passes 3 -b 24 --holdout_off``
  (with its cache file; its default 18 bits collide word pairs into 0.60
  accuracy on the Debian corpus, 24 bits give 0.76), then ``-t`` on the test file.
* ``linearsvc``: scikit-learn ``TfidfVectorizer(ngram_range=(1, 2),
  sublinear_tf=True)`` + ``LinearSVC()`` (defaults otherwise), all in memory.
* ``sgd``: ``HashingVectorizer(ngram_range=(1, 2), n_features=2**20,
  alternate_sign=False)`` + ``SGDClassifier(alpha=1e-5)`` by ``partial_fit``
  over 10,000-row chunks, 5 passes: scikit-learn's out-of-core recipe.

"rows/s (training)" is lancetnic-flow's median epoch (``metrics.json``: the
first epoch reads the fit pass's raw count shards, later ones the finished
cache); for the others, rows × passes ÷ their training seconds.

Text is lower-cased and split the same way for the baselines that take
pre-tokenised input (fastText, VW): runs of word characters, as
lancetnic-flow's tokenizer. Writes ``OUT/side-by-side-<corpus>-<time>.json``
and prints a Markdown table with the ratios to lancetnic-flow.
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

SYSTEMS = ["lancetnic-flow", "fasttext", "vw", "linearsvc", "sgd"]
TOKEN = re.compile(r"[^\W_]{2,}|\w{2,}", re.UNICODE)
csv.field_size_limit(2**31 - 1)


# --------------------------------------------------------------------------- corpora

def corpus_files(name: str, out: Path, repeat: int) -> dict:
    """(train, test) CSV paths of a named corpus, built if missing."""
    data = HERE / "out" / "data"
    if name == "debian":
        train, test = data / "debian-train.csv", data / "debian-test.csv"
        if not train.exists():
            _run([sys.executable, str(HERE / "debian_corpus.py")])
    elif name == "docstrings":
        train, test = data / "docstrings-train.csv", data / "docstrings-test.csv"
        if not train.exists():
            _run([sys.executable, str(HERE / "real_corpus.py")])
    elif name.startswith("make-data"):
        rows = int(name.split(":", 1)[1]) if ":" in name else 100_000
        train, test = data / f"make-data-{rows}-train.csv", data / f"make-data-{rows}-test.csv"
        if not train.exists():
            from lancetnic_flow.data.synth import write_corpus

            data.mkdir(parents=True, exist_ok=True)
            write_corpus(str(test), rows + 20_000, classes=4, seed=0)   # the rows after the training rows
            _split_head(test, train, rows)
    else:
        train, test = (Path(p) for p in name.split(","))
    if repeat > 1:
        train = _repeated(train, out, repeat)
    return {"name": name, "train": str(train), "test": str(test), "repeat": repeat,
            "train_rows": _count_rows(train), "test_rows": _count_rows(test),
            "train_bytes": train.stat().st_size}


def _run(cmd: list[str]) -> None:
    import subprocess

    subprocess.run(cmd, check=True)


def _split_head(src: Path, head: Path, n: int) -> None:
    """The first ``n`` rows of ``src`` into ``head``; ``src`` keeps the rest."""
    with open(src, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    with open(head, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows[:n + 1])
    with open(src, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows[:1] + rows[n + 1:])


def _repeated(train: Path, out: Path, repeat: int) -> Path:
    """The training file ``repeat`` times, each copy's texts tagged (``copy7``) so they are not duplicates."""
    dst = out / f"{train.stem}-x{repeat}.csv"
    if dst.exists():
        return dst
    dst.parent.mkdir(parents=True, exist_ok=True)
    with open(train, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    with open(dst, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(rows[0])
        for k in range(repeat):
            w.writerows([[f"{r[0]} copy{k}", *r[1:]] for r in rows[1:]])
    return dst


def _count_rows(path: Path) -> int:
    with open(path, newline="", encoding="utf-8") as f:
        return sum(1 for _ in csv.reader(f)) - 1


def read_csv(path: str) -> tuple[list[str], list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        r = csv.reader(f)
        head = next(r)
        ti, li = head.index("text"), head.index("label")
        texts, labels = [], []
        for row in r:
            texts.append(row[ti])
            labels.append(row[li])
    return texts, labels


def tokens(text: str) -> str:
    return " ".join(TOKEN.findall(text.lower()))


def scores(y_true: list[str], y_pred: list[str]) -> dict:
    from collections import Counter

    n = len(y_true)
    acc = sum(a == b for a, b in zip(y_true, y_pred)) / max(1, n)
    tp, pred, true = Counter(), Counter(y_pred), Counter(y_true)
    for a, b in zip(y_true, y_pred):
        if a == b:
            tp[a] += 1
    f1 = []
    for c in true:
        p = tp[c] / pred[c] if pred[c] else 0.0
        r = tp[c] / true[c]
        f1.append(2 * p * r / (p + r) if p + r else 0.0)
    return {"test_accuracy": acc, "test_macro_f1": sum(f1) / max(1, len(f1)), "test_rows": n}


# --------------------------------------------------------------------------- workers (one subprocess each)

def worker_fasttext(train: str, test: str, work: str) -> dict:
    import fasttext

    t0 = time.monotonic()
    texts, labels = read_csv(train)
    ft_file = Path(work) / "train.ft"
    with open(ft_file, "w", encoding="utf-8") as f:
        for t, lab in zip(texts, labels):
            f.write(f"__label__{lab.replace(' ', '_')} {tokens(t)}\n")
    convert = time.monotonic() - t0
    t1 = time.monotonic()
    model = fasttext.train_supervised(str(ft_file), lr=0.5, epoch=25, wordNgrams=2, thread=2, verbose=0)
    train_s = time.monotonic() - t1
    tt, tl = read_csv(test)
    pred = [p[0].removeprefix("__label__") for p in model.predict([tokens(t) for t in tt])[0]]
    return {"convert_seconds": convert, "train_seconds": train_s, "epochs": 25, "rows": len(texts),
            **scores([x.replace(" ", "_") for x in tl], pred)}


def worker_vw(train: str, test: str, work: str) -> dict:
    from vowpalwabbit import Workspace

    t0 = time.monotonic()
    texts, labels = read_csv(train)
    classes = sorted(set(labels))
    ids = {c: i + 1 for i, c in enumerate(classes)}
    vw_file = Path(work) / "train.vw"
    with open(vw_file, "w", encoding="utf-8") as f:
        for t, lab in zip(texts, labels):
            f.write(f"{ids[lab]} | {tokens(t).replace(':', ' ').replace('|', ' ')}\n")
    convert = time.monotonic() - t0
    t1 = time.monotonic()
    model = Path(work) / "model.vw"
    ws = Workspace(f"--oaa {len(classes)} --ngram 2 --passes 3 -b 24 --holdout_off -d {vw_file} -c -k "
                   f"--cache_file {Path(work) / 'cache.vw'} -f {model} --quiet")
    ws.finish()
    train_s = time.monotonic() - t1
    pred_ws = Workspace(f"-i {model} -t --quiet")
    tt, tl = read_csv(test)
    pred = [classes[int(pred_ws.predict(f"| {tokens(t).replace(':', ' ').replace('|', ' ')}")) - 1] for t in tt]
    pred_ws.finish()
    return {"convert_seconds": convert, "train_seconds": train_s, "epochs": 3, "rows": len(texts), **scores(tl, pred)}


def worker_linearsvc(train: str, test: str, work: str) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.svm import LinearSVC

    texts, labels = read_csv(train)
    t1 = time.monotonic()
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    x = vec.fit_transform(texts)
    clf = LinearSVC().fit(x, labels)
    train_s = time.monotonic() - t1
    tt, tl = read_csv(test)
    return {"train_seconds": train_s, "epochs": None, "rows": len(texts), "features": x.shape[1],
            **scores(tl, list(clf.predict(vec.transform(tt))))}


def worker_sgd(train: str, test: str, work: str) -> dict:
    from sklearn.feature_extraction.text import HashingVectorizer
    from sklearn.linear_model import SGDClassifier

    t1 = time.monotonic()
    vec = HashingVectorizer(ngram_range=(1, 2), n_features=2**20, alternate_sign=False)
    clf = SGDClassifier(loss="hinge", alpha=1e-5, random_state=0)
    classes = None
    rows = 0
    for epoch in range(5):
        with open(train, newline="", encoding="utf-8") as f:
            r = csv.reader(f)
            head = next(r)
            ti, li = head.index("text"), head.index("label")
            chunk: list = []
            for row in r:
                chunk.append(row)
                if len(chunk) == 10_000:
                    classes = _sgd_chunk(clf, vec, chunk, ti, li, classes, train)
                    rows += len(chunk) if epoch == 0 else 0
                    chunk = []
            if chunk:
                classes = _sgd_chunk(clf, vec, chunk, ti, li, classes, train)
                rows += len(chunk) if epoch == 0 else 0
    train_s = time.monotonic() - t1
    tt, tl = read_csv(test)
    pred = list(clf.predict(vec.transform(tt)))
    return {"train_seconds": train_s, "epochs": 5, "rows": rows, **scores(tl, pred)}


def _sgd_chunk(clf, vec, chunk, ti, li, classes, train):
    if classes is None:   # partial_fit needs every class up front: one label-only read
        classes = sorted(set(read_csv(train)[1]))
    clf.partial_fit(vec.transform([r[ti] for r in chunk]), [r[li] for r in chunk], classes=classes)
    return classes


WORKERS = {"fasttext": worker_fasttext, "vw": worker_vw, "linearsvc": worker_linearsvc, "sgd": worker_sgd}


# --------------------------------------------------------------------------- the driver

def wait_for_charts(log: Path, limit: float = 120.0) -> float:
    """The charts a run draws after it ends (a detached copy of it, whose pid
    its summary names): waited for, so that drawing them takes no CPU from
    the next system's timed run. Returns the seconds waited."""
    found = re.search(r"drawing in the background, pid (\d+)", log.read_text(errors="replace"))
    t0 = time.monotonic()
    while found and Path(f"/proc/{found.group(1)}").exists() and time.monotonic() - t0 < limit:
        time.sleep(0.05)
    return time.monotonic() - t0


def run_system(system: str, corpus: dict, work: Path, timeout: float) -> dict:
    from scaling import check_rc, cli_cmd, last_json_line, run_sampled

    work.mkdir(parents=True, exist_ok=True)
    if system == "lancetnic-flow":
        res = run_sampled([*cli_cmd(), "train", corpus["train"], "--out", str(work / "runs"), "--name", "run",
                           "--quiet"], work / "train.log", timeout=timeout)
        check_rc(res, "lancetnic-flow train")
        charts = wait_for_charts(work / "train.log")
        metrics = json.loads((work / "runs" / "run" / "metrics.json").read_text())
        ev = run_sampled([*cli_cmd(), "evaluate", str(work / "runs" / "run"), corpus["test"], "--json", "--quiet"],
                         work / "evaluate.log", stdout_path=work / "evaluate.json", timeout=timeout)
        check_rc(ev, "lancetnic-flow evaluate")
        out = last_json_line((work / "evaluate.json").read_text())
        epochs = metrics.get("epochs") or []
        return {**_peaks(res), "wall_seconds": res["wall_seconds"], "evaluate_seconds": ev["wall_seconds"],
                "charts_after_seconds": charts,
                "epochs": len(epochs), "rows": metrics["rows"]["trained"],
                # the median epoch: the first reads raw count shards, later ones the finished cache
                "epoch_rows_per_s": statistics.median(e.get("rows_per_s") or 0 for e in epochs) if epochs else None,
                "epoch_rows_per_s_each": [e.get("rows_per_s") for e in epochs],
                "stage_seconds": metrics.get("stage_seconds"), "val_accuracy": metrics.get("val_accuracy"),
                "test_accuracy": out.get("accuracy"), "test_macro_f1": out.get("macro_f1"),
                "test_rows": out.get("rows", {}).get("evaluated"), "best_epoch": metrics.get("best_epoch")}
    result = work / "result.json"
    res = run_sampled([sys.executable, __file__, "--worker", system, "--train", corpus["train"], "--test",
                       corpus["test"], "--work", str(work), "--result", str(result)], work / "worker.log",
                      timeout=timeout)
    check_rc(res, system)
    out = json.loads(result.read_text())
    epochs = out.get("epochs") or 1
    return {**_peaks(res), "wall_seconds": res["wall_seconds"], **out,
            "epoch_rows_per_s": out["rows"] * epochs / out["train_seconds"] if out.get("train_seconds") else None}


def _peaks(res: dict) -> dict:
    return {"peak_total_rss_bytes": res["peak_total_rss_bytes"], "cpu_seconds": res["cpu_seconds"]}


def markdown(doc: dict) -> str:
    rows = doc["results"]
    ref = rows.get("lancetnic-flow") or {}
    head = ("| system | wall s | train s | epochs | rows/s (training) | peak RSS MiB | test accuracy | macro-F1 | "
            "wall × lancetnic-flow | accuracy − lancetnic-flow |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for name, r in rows.items():
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error'][:80]} ||||||||")
            continue
        train_s = r.get("train_seconds") or (r.get("stage_seconds") or {}).get("train")
        wall_ratio = r["wall_seconds"] / ref["wall_seconds"] if ref.get("wall_seconds") else None
        acc_diff = (r["test_accuracy"] - ref["test_accuracy"]) * 100 if ref.get("test_accuracy") else None
        lines.append(f"| {name} | {r['wall_seconds']:.1f} | {train_s or 0:.1f} | {r.get('epochs') or 1} | "
                     f"{r.get('epoch_rows_per_s') or 0:,.0f} | "
                     f"{r['peak_total_rss_bytes'] / 2**20:,.0f} | {r['test_accuracy']:.4f} | "
                     f"{r.get('test_macro_f1') or 0:.4f} | {wall_ratio or 0:.2f} | "
                     f"{'' if acc_diff is None else f'{acc_diff:+.2f} pt'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default="debian", help="debian | docstrings | make-data[:ROWS] | TRAIN.csv,TEST.csv")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--repeat", type=int, default=1, help="the training file N times (copies tagged)")
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

    out = Path(a.out)
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    corpus = corpus_files(a.corpus, out / "data", a.repeat)
    label = re.sub(r"[^A-Za-z0-9:.-]+", "_", a.corpus.replace(",", "+"))[:40] + (f"-x{a.repeat}" if a.repeat > 1 else "")
    doc = {"benchmark": "side_by_side", "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
           "date": stamp, "machine": machine_info(), "corpus": corpus, "results": {}}
    path = out / f"side-by-side-{label}-{stamp}.json"
    print(f"corpus {a.corpus}: {corpus['train_rows']:,} training rows ({corpus['train_bytes'] / 1e6:.1f} MB), "
          f"{corpus['test_rows']:,} test rows", flush=True)
    for system in a.systems.split(","):
        print(f"  {system} …", flush=True)
        try:
            doc["results"][system] = run_system(system, corpus, out / "work" / f"{label}-{stamp}" / system, a.timeout)
        except Exception as exc:  # one failing system does not lose the others
            doc["results"][system] = {"error": f"{type(exc).__name__}: {exc}"}
        path.write_text(json.dumps(doc, indent=1))
    doc["markdown"] = markdown(doc)
    path.write_text(json.dumps(doc, indent=1))
    print("\n" + doc["markdown"] + f"\n\nresults: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
