#!/usr/bin/env python
"""The floor: how long small data takes, end to end, in this process and on a LocalCluster.

Run it from the repository root, with the project's venv (scikit-learn for the last rows):

    .venv/bin/python benchmarks/small_data.py                 # 3 repeats, median
    .venv/bin/python benchmarks/small_data.py --repeat 5

Each measurement is a fresh subprocess (process start to exit, imports included):

1. ``lancetnic-flow train`` on a 1,000-row ``make-data`` corpus with the
   defaults (``--run-on auto``: featurised in this process; the charts drawn
   after the command ends), with ``--wait-for-plots``, with ``--no-plots`` and
   with ``--run-on cluster``; the wall time of the whole command and the run's
   own stage seconds from ``metrics.json``.
2. ``TextClassifier().fit`` + ``predict`` on 5,000 in-memory rows (a pandas
   Series), timed inside the script (after the imports) and as a whole.
3. ``cross_val_score(cv=5)`` and ``GridSearchCV(n_jobs=2)`` (2 candidates × 2
   folds) on 1,500 rows.

Writes ``benchmarks/out/small_data-<date>.json`` and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


def _timed(cmd: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    t = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return time.monotonic() - t, p


ESTIMATOR = textwrap.dedent("""
    import json, sys, time
    t0 = time.monotonic()
    import pandas as pd
    from lancetnic_flow import TextClassifier
    frame = pd.read_csv(sys.argv[1])
    t1 = time.monotonic()
    clf = TextClassifier(progress=False).fit(frame["text"][:5000], frame["label"][:5000])
    pred = clf.predict(frame["text"][5000:6000])
    t2 = time.monotonic()
    print(json.dumps({"imports": t1 - t0, "fit_predict": t2 - t1, "rows": len(pred)}))
""")

SEARCH = textwrap.dedent("""
    import json, sys, time
    import pandas as pd
    from sklearn.model_selection import GridSearchCV, cross_val_score
    from lancetnic_flow import TextClassifier
    frame = pd.read_csv(sys.argv[1])[:1500]
    X, y = frame["text"].to_numpy(), frame["label"].to_numpy()
    t = time.monotonic()
    scores = cross_val_score(TextClassifier(progress=False), X, y, cv=5, error_score="raise")
    t1 = time.monotonic()
    gs = GridSearchCV(TextClassifier(progress=False), {"epochs": [5, 10]}, cv=2, n_jobs=2,
                      error_score="raise").fit(X, y)
    t2 = time.monotonic()
    print(json.dumps({"cross_val_score_5": t1 - t, "cv_mean": float(scores.mean()),
                      "grid_search_n_jobs_2": t2 - t1, "best_score": float(gs.best_score_)}))
""")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out"))
    args = ap.parse_args()
    cli = [sys.executable, "-m", "lancetnic_flow"]
    results: dict = {"date": datetime.now().isoformat(timespec="minutes"), "machine": os.uname().nodename,
                     "cpus": os.cpu_count(), "repeat": args.repeat}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        _timed([*cli, "make-data", str(d / "k1.csv"), "--rows", "1000", "--classes", "4"], d)
        _timed([*cli, "make-data", str(d / "k6.csv"), "--rows", "6000", "--classes", "4"], d)
        for name, extra in (("train 1,000 rows (auto: this process)", []),
                            ("train 1,000 rows, --wait-for-plots", ["--wait-for-plots"]),
                            ("train 1,000 rows, --no-plots", ["--no-plots"]),
                            ("train 1,000 rows (--run-on cluster)", ["--run-on", "cluster"])):
            walls, stages = [], []
            for i in range(args.repeat):
                tag = f"{'-'.join(e.strip('-') for e in extra) or 'auto'}-{i}"
                wall, _ = _timed([*cli, "train", str(d / "k1.csv"), "--out", str(d / "runs"), "--name",
                                  tag, "--cache", str(d / f"cache-{tag}"), *extra], d)
                walls.append(wall)
                time.sleep(2)   # the charts drawn after the command: not in the next run's time
                m = json.loads((d / "runs" / tag / "metrics.json").read_text())
                stages.append(m.get("stage_seconds", {}))
            results[name] = {"wall_s": statistics.median(walls), "walls": walls,
                             "stage_seconds": stages[len(stages) // 2]}
        (d / "est.py").write_text(ESTIMATOR)
        runs = [json.loads(_timed([sys.executable, str(d / "est.py"), str(d / "k6.csv")], d)[1].stdout)
                | {"wall_s": 0.0} for _ in range(args.repeat)]
        walls = [_timed([sys.executable, str(d / "est.py"), str(d / "k6.csv")], d)[0] for _ in range(args.repeat)]
        results["TextClassifier fit+predict, 5,000 rows"] = {
            "fit_predict_s": statistics.median(r["fit_predict"] for r in runs),
            "imports_s": statistics.median(r["imports"] for r in runs), "wall_s": statistics.median(walls)}
        (d / "search.py").write_text(SEARCH)
        try:
            results["search, 1,500 rows"] = json.loads(
                _timed([sys.executable, str(d / "search.py"), str(d / "k6.csv")], d)[1].stdout)
        except SystemExit as e:  # scikit-learn missing: the rest stands
            results["search, 1,500 rows"] = {"error": str(e)[:300]}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"small_data-{results['date'].replace(':', '')}.json"
    path.write_text(json.dumps(results, indent=2))
    print(f"| measurement | seconds |\n|---|---|")
    for k, v in results.items():
        if isinstance(v, dict):
            print(f"| {k} | " + ", ".join(f"{a} {b:.2f}" for a, b in v.items() if isinstance(b, float)) + " |")
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
