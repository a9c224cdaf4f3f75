"""`lancetnic-flow tune` against the defaults and against fastText's autotune,
with the same time budget, on a real corpus (docs/benchmarks.md).

    .venv/bin/python benchmarks/debian_corpus.py        # once: benchmarks/out/data/debian-*.csv
    .venv/bin/python benchmarks/tune_vs_autotune.py --corpus debian --budget 120

Both searches see the same rows: lancetnic-flow holds out 10 % of the
training file by its text hash, and fastText trains on the other 90 % and
autotunes on exactly those 10 % (the same hash, `features/split.py`). The
test file is scored only afterwards. Runs one after the other, so each has
the machine's cores to itself; writes benchmarks/out/tune-vs-autotune-*.json.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
CLI = [sys.executable, "-m", "lancetnic_flow"]


def lancetnic(command: str, train: str, test: str, work: Path, *extra: str) -> dict:
    """``lancetnic-flow train|tune`` then ``evaluate`` on the test file: its scores and wall time."""
    t0 = time.monotonic()
    subprocess.run([*CLI, command, train, "--out", str(work / "runs"), "--name", command, "--quiet", *extra],
                   check=True, cwd=work)
    wall = time.monotonic() - t0
    run = work / "runs" / command
    ev = subprocess.run([*CLI, "evaluate", str(run), test, "--json", "--quiet"], check=True, cwd=work,
                        capture_output=True, text=True)
    out = json.loads(ev.stdout)
    metrics = json.loads((run / "metrics.json").read_text())
    res = {"test_accuracy": out["accuracy"], "test_macro_f1": out["macro_f1"], "wall_seconds": wall,
           "val_accuracy": metrics.get("val_accuracy")}
    if command == "tune":
        doc = json.loads((run / "tune.json").read_text())
        done = [t for t in doc["trials"] if t["state"] == "complete"]
        res.update(trials=len(doc["trials"]), complete=len(done), best_params=doc["best_params"],
                   defaults_val=doc["defaults_value"], best_val=doc["best_value"],
                   search_seconds=doc["search_seconds"], final_seconds=doc["final"]["seconds"])
    return res


def fasttext_autotune(train: str, test: str, work: Path, budget: int) -> dict:
    """fastText's autotune on the same 90/10 split, then the test file."""
    import fasttext
    import pyarrow.csv as pacsv

    from lancetnic_flow.features.split import validation_mask
    from side_by_side import read_csv, scores, tokens

    texts, labels = read_csv(train)
    val = validation_mask(pacsv.read_csv(train).select(["text"]), 0.1)
    files = {"train": open(work / "ft-train.txt", "w", encoding="utf-8"),
             "val": open(work / "ft-val.txt", "w", encoding="utf-8")}
    for t, lab, v in zip(texts, labels, val):
        files["val" if v else "train"].write(f"__label__{lab.replace(' ', '_')} {tokens(t)}\n")
    for f in files.values():
        f.close()
    t0 = time.monotonic()
    model = fasttext.train_supervised(input=str(work / "ft-train.txt"), autotuneValidationFile=str(work / "ft-val.txt"),
                                      autotuneDuration=budget, thread=2, verbose=0)
    wall = time.monotonic() - t0
    tt, tl = read_csv(test)
    pred = [p[0].removeprefix("__label__") for p in model.predict([tokens(t) for t in tt])[0]]
    a = model.f.getArgs()
    chosen = {k: getattr(a, k) for k in ("lr", "dim", "epoch", "wordNgrams", "minCount", "bucket", "dsub", "loss")
              if hasattr(a, k)}
    chosen["loss"] = str(chosen.get("loss"))
    return {**scores([x.replace(" ", "_") for x in tl], pred), "wall_seconds": wall, "best_args": chosen}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="debian", help="debian or docstrings (benchmarks/out/data/CORPUS-*.csv)")
    ap.add_argument("--budget", type=int, default=120, help="seconds for each search (default 120)")
    ap.add_argument("--skip", default="", help="comma list of defaults,tune,autotune to leave out")
    a = ap.parse_args()
    data = HERE / "out" / "data"
    train, test = str(data / f"{a.corpus}-train.csv"), str(data / f"{a.corpus}-test.csv")
    skip = set(a.skip.split(","))
    out = {"corpus": a.corpus, "budget_seconds": a.budget, "date": dt.datetime.now().isoformat(timespec="minutes"),
           "command": " ".join(sys.argv)}
    with tempfile.TemporaryDirectory(prefix="tune-bench-") as tmp:
        work = Path(tmp)
        if "defaults" not in skip:
            out["defaults"] = lancetnic("train", train, test, work)
            print("defaults", json.dumps(out["defaults"]), flush=True)
        if "tune" not in skip:
            out["tune"] = lancetnic("tune", train, test, work, "--time-budget", f"{a.budget}s")
            print("tune", json.dumps(out["tune"]), flush=True)
        if "autotune" not in skip:
            out["autotune"] = fasttext_autotune(train, test, work, a.budget)
            print("autotune", json.dumps(out["autotune"]), flush=True)
    dest = HERE / "out" / f"tune-vs-autotune-{a.corpus}-{dt.datetime.now():%Y-%m-%dT%H%M%S}.json"
    dest.write_text(json.dumps(out, indent=2))
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()
