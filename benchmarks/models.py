#!/usr/bin/env python
"""Every lancetnic-flow classifier next to fastText, scikit-learn TF-IDF +
LinearSVC and lancetnic 4.1.0, on the same train/test split.

Run it from the repository root, with the project's venv, on a quiet machine:

    .venv/bin/python benchmarks/models.py                          # everything (~35-45 min on 2 busy cores)
    .venv/bin/python benchmarks/models.py --corpora make-data      # the generated corpus only
    .venv/bin/python benchmarks/models.py --systems ScalpelMC,fasttext,linearsvc
    .venv/bin/python benchmarks/models.py --lancetnic-python /tmp/lancetnic-venv/bin/python
    .venv/bin/python benchmarks/models.py --systems ScalpelMC,linearsvc \
        --variant "sublinear=--sublinear-tf" --variant "bigrams=--ngrams 2"   # ScalpelMC with other options

lancetnic 4.1.0 runs in its own venv, so it cannot disturb this one:

    python3 -m venv /tmp/lancetnic-venv
    /tmp/lancetnic-venv/bin/pip install lancetnic==4.1.0     # pins torch 2.5.1, sklearn 1.6.1, pandas 2.2.3

Corpora (see benchmarks/README.md):

* ``make-data``: ONE ``lancetnic-flow make-data --rows 30000 --classes 4
  --seed 0`` corpus, first 25,000 rows → train, last 5,000 → test (another
  seed is another vocabulary). Also used for the ScalpelReg regression
  (``--target target``).
* ``docstrings``: real English text, built offline by
  ``benchmarks/real_corpus.py``: docstrings of 8 installed libraries labelled
  by library (~26k train / ~6.5k test, texts deduplicated across the split).

Every system runs as its own subprocess, one at a time, under the psutil
process-tree RSS sampler of ``benchmarks/scaling.py``. Writes
``OUT/models-<date>T<time>.json`` and prints Markdown tables and the target
checks.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EPOCHS = 3
ALL_SYSTEMS = ["ScalpelMC", "FastTextBag", "LancetMCA", "fasttext", "linearsvc", "lancetnic", "ScalpelReg"]


# --------------------------------------------------------------------------- worker side (own subprocess;
# the lancetnic worker runs under lancetnic's venv, so nothing here may import psutil or lancetnic_flow)

def _read_csv(path: str):
    import pandas as pd

    return pd.read_csv(path, dtype={"text": str, "label": str}, keep_default_na=False)


def _macro_f1(y_true, y_pred) -> float:
    labels = sorted(set(y_true) | set(y_pred))
    f1s = []
    for c in labels:
        tp = sum(1 for t, p in zip(y_true, y_pred) if t == c and p == c)
        fp = sum(1 for t, p in zip(y_true, y_pred) if t != c and p == c)
        fn = sum(1 for t, p in zip(y_true, y_pred) if t == c and p != c)
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(f1s) / len(f1s)


def _scores(y_true, y_pred) -> dict:
    y_true, y_pred = list(y_true), list(y_pred)
    acc = sum(1 for t, p in zip(y_true, y_pred) if t == p) / len(y_true)
    return {"test_rows": len(y_true), "test_accuracy": acc, "test_macro_f1": _macro_f1(y_true, y_pred)}


def worker_linearsvc(train: str, test: str) -> dict:
    import sklearn
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.svm import LinearSVC

    t0 = time.monotonic()
    tr, te = _read_csv(train), _read_csv(test)
    read_s = time.monotonic() - t0
    t1 = time.monotonic()
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
    x = vec.fit_transform(tr["text"])
    clf = LinearSVC(C=1.0).fit(x, tr["label"])
    train_s = time.monotonic() - t1
    t2 = time.monotonic()
    pred = clf.predict(vec.transform(te["text"]))
    return {"system": "sklearn TF-IDF(1-2gram, sublinear)+LinearSVC", "library_version": sklearn.__version__,
            "params": {"ngram_range": [1, 2], "sublinear_tf": True, "min_df": 1, "C": 1.0,
                       "features": x.shape[1]},
            "rows_trained": len(tr), "epochs": 1, "read_seconds": read_s, "train_seconds": train_s,
            "rows_per_s_train": len(tr) / train_s, "rows_per_s_note": "rows / (TF-IDF fit_transform + LinearSVC fit)",
            "test_seconds": time.monotonic() - t2, **_scores(te["label"], pred)}


def _ft_line(text: str) -> str:
    import re

    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def worker_fasttext(train: str, test: str, work: str) -> dict:
    import importlib.metadata as md

    import fasttext

    t0 = time.monotonic()
    tr, te = _read_csv(train), _read_csv(test)
    ft_train = os.path.join(work, Path(train).stem + ".ft.txt")
    with open(ft_train, "w", encoding="utf-8") as f:
        for t, lab in zip(tr["text"], tr["label"]):
            f.write(f"__label__{lab.replace(' ', '_')} {_ft_line(t)}\n")
    conv_s = time.monotonic() - t0
    t1 = time.monotonic()
    model = fasttext.train_supervised(input=ft_train, wordNgrams=2, thread=2, verbose=0)
    train_s = time.monotonic() - t1
    t2 = time.monotonic()
    # model.predict on a list goes through multilinePredict (no numpy: works with numpy 2)
    labels, _ = model.predict([_ft_line(t) for t in te["text"]])
    pred = [ls[0][len("__label__"):] if ls else "" for ls in labels]
    truth = [lab.replace(" ", "_") for lab in te["label"]]
    epochs = model.epoch
    return {"system": "fastText supervised", "library_version": md.version("fasttext-wheel"),
            "params": {"wordNgrams": 2, "thread": 2, "epoch": epochs, "lr": model.lr, "dim": model.dim,
                       "bucket": model.bucket, "text": "lowercased, runs of non [a-z0-9] → one space"},
            "rows_trained": len(tr), "epochs": epochs, "conversion_seconds": conv_s, "train_seconds": train_s,
            "rows_per_s_train": len(tr) * epochs / train_s, "rows_per_s_note": "rows × epochs / train_supervised",
            "test_seconds": time.monotonic() - t2, **_scores(truth, pred)}


def worker_lancetnic(train: str, test: str, work: str) -> dict:
    """lancetnic 4.1.0 (run under its own venv): ``Classification(text_column="text",
    label_column="label", max_features=None).train(ScalpelMC, train, val_path=TEST, 3 epochs,
    device_name="cpu")`` with its other defaults (hidden 256, 1 layer, batch 128, Adam lr 1e-3,
    dropout 0). It trains on all training rows and validates on the val file after every epoch, so
    the test file is passed as its val file; test accuracy / macro-F1 are computed here from the
    last epoch's validation predictions (the model after 3 epochs, no selection on the test set).
    Its run folder (``runs/train_N``, plots, .pt files) goes under ``work``."""
    import importlib.metadata as md

    os.chdir(work)  # lancetnic writes runs/ under the working directory
    from lancetnic import Classification
    from lancetnic.engine import trainers
    from lancetnic.models import ScalpelMC

    epoch_s: list[float] = []
    orig_epoch = trainers.ClassificationTrainer.train_epoch

    def timed_epoch(self, *a, **k):  # the training loop only (no validation, no saving)
        t = time.monotonic()
        r = orig_epoch(self, *a, **k)
        epoch_s.append(time.monotonic() - t)
        return r

    trainers.ClassificationTrainer.train_epoch = timed_epoch
    captured: dict = {}
    clf = Classification(text_column="text", label_column="label", max_features=None)
    orig_vis = clf.visualize_metrics

    def capture(metrics):
        captured.update(metrics)
        return orig_vis(metrics)

    clf.visualize_metrics = capture
    t0 = time.monotonic()
    clf.train(model_name=ScalpelMC, train_path=train, val_path=test, num_epochs=EPOCHS, device_name="cpu")
    total_s = time.monotonic() - t0
    if not captured:
        raise RuntimeError("lancetnic's train() returned without metrics (it prints and returns on errors)")
    names = list(clf.label_encoder.classes_)
    truth = [names[i] for i in captured["all_labels"][-1]]
    pred = [names[i] for i in captured["all_preds"][-1]]
    n = clf.X_train.shape[0]
    return {"system": "lancetnic 4.1.0 ScalpelMC", "library_version": md.version("lancetnic"),
            "torch": md.version("torch"),
            "params": {"max_features": None, "features": clf.input_size, "hidden_size": 256, "num_layers": 1,
                       "batch_size": 128, "learning_rate": 0.001, "dropout": 0, "optim": "Adam",
                       "val_path": "the test file"},
            "rows_trained": n, "epochs": len(epoch_s), "train_seconds": sum(epoch_s), "epoch_seconds": epoch_s,
            "rows_per_s_train": n * len(epoch_s) / sum(epoch_s),
            "rows_per_s_note": "rows × epochs / Σ train_epoch seconds (its training loop only)",
            "train_call_seconds": total_s, "val_acc_per_epoch": captured["val_acc"],
            "run_dir": clf.new_folder_path, **_scores(truth, pred)}


WORKERS = {"linearsvc": worker_linearsvc, "fasttext": worker_fasttext, "lancetnic": worker_lancetnic}


def worker_main(kind: str, train: str, test: str, work: str, result: str) -> int:
    fn = WORKERS[kind]
    out = fn(train, test) if kind == "linearsvc" else fn(train, test, work)
    Path(result).write_text(json.dumps(out, indent=1))
    return 0


# --------------------------------------------------------------------------- parent side

def _sc():
    sys.path.insert(0, str(HERE))
    import scaling  # the sampler, the subprocess runner, machine info

    return scaling


def prepare_make_data(out: Path, logs: Path) -> dict:
    import pandas as pd

    sc = _sc()
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    train, test = data / "md-train-25000-s0.csv", data / "md-test-5000-s0.csv"
    if not (train.exists() and test.exists()):
        pool = data / "md-pool-30000-s0.csv"
        r = sc.run_sampled(sc.cli_cmd() + ["make-data", str(pool), "--rows", "30000", "--classes", "4",
                                           "--seed", "0", "--force"], logs / "make-data.log")
        sc.check_rc(r, "make-data")
        df = pd.read_csv(pool, dtype={"text": str, "label": str}, keep_default_na=False)
        df.iloc[:25000].to_csv(train, index=False)
        df.iloc[25000:].to_csv(test, index=False)
        pool.unlink()
    tr = pd.read_csv(train, dtype={"text": str, "label": str}, keep_default_na=False)
    te = pd.read_csv(test, dtype={"text": str, "label": str}, keep_default_na=False)
    mean = float(tr["target"].mean())
    return {"name": "make-data", "train": str(train), "test": str(test), "train_rows": len(tr), "test_rows": len(te),
            "source": "lancetnic-flow make-data POOL --rows 30000 --classes 4 --seed 0; rows 0-24999 train, "
                      "25000-29999 test",
            "classes": dict(sorted(tr["label"].value_counts().items())),
            "test_classes": dict(sorted(te["label"].value_counts().items())),
            "texts_in_both": len(set(tr["text"]) & set(te["text"])),
            "target_train_mean": mean,
            "test_rmse_of_train_mean": float(((te["target"] - mean) ** 2).mean() ** 0.5)}


def prepare_docstrings(out: Path, logs: Path) -> dict:
    import pandas as pd

    data = out / "data"
    train, test, meta = data / "docstrings-train.csv", data / "docstrings-test.csv", data / "docstrings-meta.json"
    if not (train.exists() and test.exists() and meta.exists()):
        subprocess.run([sys.executable, str(HERE / "real_corpus.py"), "--out", str(data)], check=True,
                       stdout=subprocess.DEVNULL)
    m = json.loads(meta.read_text())
    tr = pd.read_csv(train, dtype=str, keep_default_na=False)
    te = pd.read_csv(test, dtype=str, keep_default_na=False)
    return {"name": "docstrings", "train": str(train), "test": str(test), "train_rows": len(tr),
            "test_rows": len(te), "source": "benchmarks/real_corpus.py", "meta": m,
            "classes": m["train_classes"], "test_classes": m["test_classes"],
            "texts_in_both": len(set(tr["text"]) & set(te["text"]))}


def head_rows(src: str, dst: Path, n: int) -> str:
    import pandas as pd

    if not dst.exists():
        pd.read_csv(src, dtype={"text": str, "label": str}, keep_default_na=False).iloc[:n].to_csv(dst, index=False)
    return str(dst)


FLOW_ARGS = {
    "ScalpelMC": [],
    "FastTextBag": ["--model", "FastTextBag", "--hidden", "100"],
    "LancetMCA": ["--model", "LancetMCA", "--max-len", "128", "--embed", "64", "--hidden", "64"],
    "ScalpelReg": ["--model", "ScalpelReg", "--target", "target"],
}


def parse_variant(text: str) -> tuple[str, list[str]]:
    """``NAME=ARGS`` → (``ScalpelMC.NAME``, the extra ``train`` arguments). The key names the
    run folder, so NAME is held to what a run name may hold."""
    import re

    name, sep, extra = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z0-9._-]+", name.strip()):
        raise SystemExit(f"--variant {text!r}: expected NAME=ARGS, NAME of letters, digits, '.', '-', '_'; "
                         "e.g. --variant 'bigrams=--ngrams 2'")
    return f"ScalpelMC.{name.strip()}", shlex.split(extra)


def run_flow(args, system: str, corpus: dict, work: Path, extra: list[str] | None = None) -> dict:
    """``system`` is a key of FLOW_ARGS, or ``ScalpelMC.NAME`` (a --variant) whose ``extra``
    arguments follow ScalpelMC's: argparse keeps the last value, so a variant may override
    --epochs too."""
    sc = _sc()
    name = f"{corpus['name']}-{system}"
    base = system.split(".", 1)[0]
    flow_args = FLOW_ARGS[base] + list(extra or [])
    cache = work / f"cache-{name}"
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(work / name, ignore_errors=True)
    train = corpus["train"]
    epochs = EPOCHS
    if system == "LancetMCA" and args.seq_rows and args.seq_rows < corpus["train_rows"]:
        train = head_rows(train, Path(train).with_name(Path(train).stem + f"-head{args.seq_rows}.csv"),
                          args.seq_rows)
    cmd = sc.cli_cmd() + ["train", train, "--epochs", str(epochs), "--val-fraction", "0.05", "--out", str(work),
                          "--name", name, "--cache", str(cache)] + flow_args
    print(f"  {name}: train …", flush=True)
    res = sc.run_sampled(cmd, work / f"{name}.train.log", timeout=args.timeout)
    sc.check_rc(res, f"{name} train")
    m = json.loads((work / name / "metrics.json").read_text())
    eps = m.get("epochs") or []
    ep_rows = sum(e.get("rows") or 0 for e in eps)
    ep_s = sum(e.get("seconds") or 0 for e in eps)
    trained = (m.get("rows") or {}).get("trained")
    mem = m.get("memory") or {}
    out = {"system": f"lancetnic-flow {shlex.join([base] + flow_args[len(FLOW_ARGS[base]):])}", "args": flow_args,
           "cmd": res["cmd"],
           "rows_trained": trained, "epochs": len(eps), "best_epoch": m.get("best_epoch"),
           "wall_seconds": res["wall_seconds"], "cpu_seconds": res["cpu_seconds"],
           "train_seconds": ep_s, "rows_per_s_train": ep_rows / ep_s if ep_s else None,
           "rows_per_s_note": "Σ epoch rows / Σ epoch seconds (metrics.json epochs; training loop incl. live "
                              "featurisation in epoch 1, excl. fit pass, validation, cluster start, save)",
           "epoch_seconds": [e.get("seconds") for e in eps], "stage_seconds": m.get("stage_seconds"),
           "run_seconds": m.get("seconds"), "peak_total_rss_bytes": res["peak_total_rss_bytes"],
           "peak_trainer_rss_bytes": res["peak_trainer_rss_bytes"],
           "peak_workers_rss_bytes": res["peak_children_rss_bytes"], "vocabulary": m.get("vocabulary"),
           # lancetnic-flow's own peaks (sampled inside the run while it fits and trains)
           "reported_trainer_peak_rss_bytes": mem.get("trainer_peak_rss_bytes"),
           "reported_workers_peak_bytes": mem.get("workers_peak_bytes"),
           "val_accuracy": m.get("val_accuracy"), "val_macro_f1": m.get("val_macro_f1"),
           "val_rmse": m.get("val_rmse"), "val_baseline_rmse": m.get("val_baseline_rmse"),
           "leftover_processes": res["leftover_processes"]}
    shutil.rmtree(cache, ignore_errors=True)
    print(f"  {name}: evaluate …", flush=True)
    ev_out = work / f"{name}.evaluate.json"
    ev = sc.run_sampled(sc.cli_cmd() + ["evaluate", str(work / name), corpus["test"], "--json"],
                        work / f"{name}.evaluate.log", stdout_path=ev_out, timeout=args.timeout)
    sc.check_rc(ev, f"{name} evaluate")
    em = sc.last_json_line(ev_out.read_text())
    out.update({"test_rows": (em.get("rows") or {}).get("evaluated"), "test_accuracy": em.get("accuracy"),
                "test_macro_f1": em.get("macro_f1"), "test_rmse": em.get("rmse"), "test_mae": em.get("mae"),
                "test_r2": em.get("r2"), "evaluate_wall_seconds": ev["wall_seconds"]})
    return out


def run_worker(args, kind: str, corpus: dict, work: Path) -> dict:
    sc = _sc()
    name = f"{corpus['name']}-{kind}"
    result = work / f"{name}.result.json"
    result.unlink(missing_ok=True)
    py = args.lancetnic_python if kind == "lancetnic" else sys.executable
    wdir = work / name
    wdir.mkdir(parents=True, exist_ok=True)
    print(f"  {name} …", flush=True)
    res = sc.run_sampled([py, str(Path(__file__).resolve()), "--_worker", kind, "--_train", corpus["train"],
                          "--_test", corpus["test"], "--_work", str(wdir), "--_result", str(result)],
                         work / f"{name}.log", timeout=args.timeout)
    if res["timed_out"]:
        return {"system": kind, "error": f"timed out after {res['wall_seconds']:.0f} s (--timeout)",
                "wall_seconds": res["wall_seconds"], "partial": _partial_lancetnic(Path(res["log"])),
                "peak_total_rss_bytes": res["peak_total_rss_bytes"]}
    sc.check_rc(res, name)
    inner = json.loads(result.read_text())
    return {**inner, "wall_seconds": res["wall_seconds"], "cpu_seconds": res["cpu_seconds"],
            "peak_total_rss_bytes": res["peak_total_rss_bytes"],
            "peak_trainer_rss_bytes": res["peak_trainer_rss_bytes"],
            "peak_workers_rss_bytes": res["peak_children_rss_bytes"],
            "leftover_processes": res["leftover_processes"]}


def _partial_lancetnic(log: Path) -> dict:
    """What a killed lancetnic run had reached: its per-epoch 'Val Acc' lines (val = the test file)."""
    import re

    try:
        text = log.read_text(errors="replace")
    except OSError:
        return {}
    accs = [float(x) / 100 for x in re.findall(r"Val Acc: ([0-9.]+)%", text)]
    return {"epochs_finished": len(accs), "test_accuracy_per_finished_epoch": accs}


def _f(x, fmt=".4f"):
    return "—" if x is None else format(x, fmt)


def summarise(doc: dict) -> str:
    lines = []
    for cname, recs in doc["results"].items():
        c = doc["corpora"][cname]
        lines += [f"### {cname}: {c['train_rows']:,} train / {c['test_rows']:,} test rows, "
                  f"{len(c['classes'])} classes", "",
                  "| system | train rows | epochs | test acc | test macro-F1 | wall s | train s | train rows/s | "
                  "peak RSS MiB |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for key, r in recs.items():
            if key == "ScalpelReg":
                continue
            if "error" in r:
                part = r.get("partial") or {}
                extra = (f"; test acc after {part['epochs_finished']} epoch(s): "
                         f"{part['test_accuracy_per_finished_epoch'][-1]:.4f}") if part.get("epochs_finished") else ""
                lines.append(f"| {key} | — | — | failed: {r['error'][:80]}{extra} | | "
                             f"{_f(r.get('wall_seconds'), '.1f')} | | | |")
                continue
            lines.append(f"| {r['system']} | {r.get('rows_trained') or 0:,} | {r.get('epochs')} | "
                         f"{_f(r.get('test_accuracy'))} | {_f(r.get('test_macro_f1'))} | "
                         f"{_f(r.get('wall_seconds'), '.1f')} | {_f(r.get('train_seconds'), '.1f')} | "
                         f"{_f(r.get('rows_per_s_train'), ',.0f')} | "
                         f"{_f((r.get('peak_total_rss_bytes') or 0) / 2**20, ',.0f')} |")
        lines.append("")
        variants = {k: r for k, r in recs.items() if k.startswith("ScalpelMC") and "error" not in r}
        if len(variants) > 1:
            lines += ["ScalpelMC variants (peaks: lancetnic-flow's own metrics.json figures):", "",
                      "| `train` arguments | test acc | test macro-F1 | val acc | best epoch | vocabulary | "
                      "train rows/s | wall s | trainer peak MiB | workers peak MiB |",
                      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for key, r in variants.items():
                args = " ".join(r.get("args") or []) or "(defaults)"
                lines.append(f"| `{args}` | {_f(r.get('test_accuracy'))} | {_f(r.get('test_macro_f1'))} | "
                             f"{_f(r.get('val_accuracy'))} | {r.get('best_epoch')} | {r.get('vocabulary') or 0:,} | "
                             f"{_f(r.get('rows_per_s_train'), ',.0f')} | {_f(r.get('wall_seconds'), '.1f')} | "
                             f"{_f((r.get('reported_trainer_peak_rss_bytes') or 0) / 2**20, ',.0f')} | "
                             f"{_f((r.get('reported_workers_peak_bytes') or 0) / 2**20, ',.0f')} |")
            lines.append("")
        reg = recs.get("ScalpelReg")
        if reg and "error" not in reg:
            lines += ["Regression (ScalpelReg, `--target target`):", "",
                      "| test RMSE | RMSE of the training mean (test) | val RMSE | val_baseline_rmse | test R² | "
                      "wall s |", "|---:|---:|---:|---:|---:|---:|",
                      f"| {_f(reg.get('test_rmse'))} | {_f(c.get('test_rmse_of_train_mean'))} | "
                      f"{_f(reg.get('val_rmse'))} | {_f(reg.get('val_baseline_rmse'))} | {_f(reg.get('test_r2'))} | "
                      f"{_f(reg.get('wall_seconds'), '.1f')} |", ""]
    lines += ["### Target checks", ""]
    for name, chk in doc["checks"].items():
        lines.append(f"- `{name}`: {'PASS' if chk.get('pass') else 'FAIL' if chk.get('pass') is False else 'n/a'}"
                     f" — {chk.get('detail', '')}")
    return "\n".join(lines)


def checks(doc: dict) -> dict:
    out = {}
    for cname, recs in doc["results"].items():
        smc = recs.get("ScalpelMC", {})
        acc = smc.get("test_accuracy")
        for key, label in (("fasttext", "fastText"), ("linearsvc", "LinearSVC")):
            o = recs.get(key, {})
            if acc is None or o.get("test_accuracy") is None:
                out[f"{cname}: ScalpelMC within 1 point of {label}"] = {"pass": None, "detail": "missing result"}
                continue
            d = 100 * (acc - o["test_accuracy"])
            out[f"{cname}: ScalpelMC within 1 point of {label}"] = {
                "pass": d >= -1.0, "diff_points": d,
                "detail": f"{100 * acc:.2f} vs {100 * o['test_accuracy']:.2f} ({d:+.2f} points)"}
        lt = recs.get("lancetnic", {})
        if acc is not None and lt.get("test_accuracy") is not None:
            ratio = smc["wall_seconds"] / lt["wall_seconds"]
            out[f"{cname}: ahead of lancetnic 4.1.0 in < 1/5 of its wall time"] = {
                "pass": acc > lt["test_accuracy"] and ratio < 0.2, "wall_ratio": ratio,
                "detail": f"acc {100 * acc:.2f} vs {100 * lt['test_accuracy']:.2f}; wall {smc['wall_seconds']:.1f}s "
                          f"vs {lt['wall_seconds']:.1f}s (ratio {ratio:.2f})"}
        else:
            part = lt.get("partial") or {}
            ok = None
            detail = lt.get("error", "missing result")[:200]
            if part.get("epochs_finished") and acc is not None:
                best = max(part["test_accuracy_per_finished_epoch"])
                ratio = smc["wall_seconds"] / lt["wall_seconds"]  # lancetnic's is a lower bound: ratio an upper one
                ok = acc > best and ratio < 0.2
                detail += (f"; after {part['epochs_finished']} epoch(s) its test acc was {100 * best:.2f} vs "
                           f"{100 * acc:.2f}; wall {smc['wall_seconds']:.1f}s vs > {lt['wall_seconds']:.0f}s "
                           f"(ratio < {ratio:.2f})")
            out[f"{cname}: ahead of lancetnic 4.1.0 in < 1/5 of its wall time"] = {"pass": ok, "detail": detail}
        reg = recs.get("ScalpelReg")
        if reg and reg.get("test_rmse") is not None:
            base = doc["corpora"][cname]["test_rmse_of_train_mean"]
            out[f"{cname}: ScalpelReg beats the training mean"] = {
                "pass": reg["test_rmse"] < base, "detail": f"test RMSE {reg['test_rmse']:.4f} vs {base:.4f}"}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="lancetnic-flow models vs fastText, LinearSVC and lancetnic 4.1.0")
    ap.add_argument("--out", default=str(HERE / "out"))
    ap.add_argument("--corpora", default="make-data,docstrings")
    ap.add_argument("--systems", default=",".join(ALL_SYSTEMS))
    ap.add_argument("--seq-rows", type=int, default=10000, help="LancetMCA trains on the first N rows (0 = all)")
    ap.add_argument("--lancetnic-python", default="/tmp/lancetnic-venv/bin/python")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                    help="also run ScalpelMC with extra train arguments, e.g. 'bigrams=--ngrams 2' (repeatable; "
                         "recorded as ScalpelMC.NAME)")
    ap.add_argument("--_worker")
    ap.add_argument("--_train")
    ap.add_argument("--_test")
    ap.add_argument("--_work")
    ap.add_argument("--_result")
    a = ap.parse_args(argv)
    if a._worker:
        return worker_main(a._worker, a._train, a._test, a._work, a._result)
    variants = dict(parse_variant(v) for v in a.variant)   # bad ones stop here, before anything runs
    sc = _sc()
    out = Path(a.out)
    stamp = _dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    work = out / "runs" / f"models-{stamp}"
    work.mkdir(parents=True, exist_ok=True)
    doc = {"command": " ".join(sys.argv), "complete": False, "machine": sc.machine_info(),
           "config": {"epochs": EPOCHS, "val": "lancetnic-flow: 5% hash split of the training file "
                      "(--val-fraction 0.05); test = the test file", "seq_rows": a.seq_rows,
                      "variants": variants},
           "corpora": {}, "results": {}, "errors": []}
    path = out / f"models-{stamp}.json"

    def save():
        path.write_text(json.dumps(doc, indent=1, default=str))

    systems = [s for s in a.systems.split(",") if s] + list(variants)
    t0 = time.monotonic()
    for cname in [c for c in a.corpora.split(",") if c]:
        print(f"corpus {cname}", flush=True)
        corpus = (prepare_make_data if cname == "make-data" else prepare_docstrings)(out, work)
        doc["corpora"][cname] = corpus
        recs = doc["results"].setdefault(cname, {})
        for s in systems:
            if s == "ScalpelReg" and cname != "make-data":
                continue
            try:
                recs[s] = (run_flow(a, s, corpus, work, variants.get(s)) if s in FLOW_ARGS or s in variants
                           else run_worker(a, s, corpus, work))
                r = recs[s]
                print(f"    acc {r.get('test_accuracy')} rmse {r.get('test_rmse')} wall {r['wall_seconds']:.1f}s",
                      flush=True)
            except Exception as exc:  # one failure must not lose the rest
                recs[s] = {"system": s, "error": str(exc)}
                doc["errors"].append({"corpus": cname, "system": s, "error": str(exc)})
                print(f"    FAILED: {str(exc)[:2000]}", file=sys.stderr, flush=True)
            save()
    doc["checks"] = checks(doc)
    doc["markdown"] = summarise(doc)
    doc["benchmark_seconds"] = time.monotonic() - t0
    doc["machine"]["load_average_at_end"] = list(os.getloadavg())
    doc["complete"] = True
    save()
    print(doc["markdown"])
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
