#!/usr/bin/env python
"""Two commands for two runs sharing one worker: how often the worker loads a
run, and how long they take, against each run alone.

    .venv/bin/python benchmarks/two_runs_one_worker.py

Writes a 20,000-row ``make-data`` corpus (20 classes) and trains a ScalpelMC
run and a LinearSVM run (one epoch each) under ``benchmarks/out/two_runs``,
then starts a LocalCluster of one worker (2 threads, 6 GiB) and runs
``predict --input --run-on cluster --blocksize 64KiB --scheduler`` for A
alone, B alone, and both at once, counting the worker's ``load_run`` calls.
Prints one line per case and writes ``benchmarks/out/two_runs.json``.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "two_runs"
CLI = [sys.executable, "-m", "lancetnic_flow.cli.main"]


def count_loads() -> int:
    """On the worker: ``load_run`` wrapped to count its calls; the count so far."""
    import lancetnic_flow.runs.predict as predict

    if not hasattr(predict, "bench_loads"):
        predict.bench_loads = [0]
        real = predict.load_run

        def counted(*a, **k):
            predict.bench_loads[0] += 1
            return real(*a, **k)

        predict.load_run = counted
    return predict.bench_loads[0]


def prepare() -> dict[str, Path]:
    """The corpus and the two runs, made once."""
    OUT.mkdir(parents=True, exist_ok=True)
    data = OUT / "data.csv"
    if not data.exists():
        subprocess.run([*CLI, "make-data", str(data), "--rows", "20000", "--classes", "20", "--quiet"], check=True)
    runs = {}
    for name, model in (("A", "ScalpelMC"), ("B", "LinearSVM")):
        folder = OUT / f"run{name}"
        if not any(folder.glob("*/model.safetensors")):
            subprocess.run([*CLI, "train", str(data), "--model", model, "--epochs", "1", "--out", str(folder),
                            "--quiet"], check=True)
        runs[name] = next(folder.glob("*/model.safetensors")).parent
    return {"data": data, **runs}


def case(which: str, paths: dict[str, Path]) -> dict:
    """Loads and seconds of the predicts for the runs named in ``which``, at once, on one worker."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, memory_limit="6GiB",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.run(count_loads)
        start = time.perf_counter()
        procs = [subprocess.Popen([*CLI, "predict", str(paths[k]), "--input", str(paths["data"]),
                                   "--output", str(OUT / f"out{k}.csv"), "--force",
                                   "--scheduler", cluster.scheduler_address, "--blocksize", "64KiB", "--run-on", "cluster",
                                   "--quiet"],
                                  stdout=subprocess.DEVNULL) for k in which]
        codes = [p.wait() for p in procs]
        seconds = time.perf_counter() - start
        loads = next(iter(client.run(count_loads).values()))
    return {"runs": which, "exit": codes, "loads": loads, "seconds": round(seconds, 1)}


def main() -> None:
    paths = prepare()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    results = [case(which, paths) for which in ("A", "B", "AB")]
    for r in results:
        print(f"{r['runs']}: exit {r['exit']}, {r['loads']} loads, {r['seconds']} s")
    (HERE / "out" / "two_runs.json").write_text(json.dumps({"commit": commit, "results": results}, indent=1))


if __name__ == "__main__":
    main()
