"""A predicting worker's peak memory against what the plan counts for it.

    python benchmarks/predict_worker_peak.py RUN DATA [--threads 3] [--blocksize 1MiB]

Starts a LocalCluster of one worker process (4 GiB limit, the plan's worker
environment), runs `lancetnic-flow predict RUN --input DATA --scheduler ADDR`
against it and samples the worker's RSS every 20 ms. Prints the worker's
peak beside what the plan counts: the run's loaded size
(runs/weights_size.loaded_bytes) and a worker's minimum with it
(dataflow/plan.worker_minimum: its base and a task under Dask's pause line).
An existing cluster whose workers' limit is below that minimum is refused.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import threading
import time


OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def main() -> None:
    import psutil
    from dask.distributed import LocalCluster

    from lancetnic_flow.dataflow.plan import WORKER_ENV, worker_minimum
    from lancetnic_flow.runs.linear_scores import linear_shapes
    from lancetnic_flow.runs.loading import read_run_json
    from lancetnic_flow.runs.weights_size import loaded_bytes

    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("data")
    ap.add_argument("--threads", type=int, default=3)
    ap.add_argument("--blocksize", default="1MiB")
    a = ap.parse_args()
    os.environ.update(WORKER_ENV)
    cluster = LocalCluster(n_workers=1, threads_per_worker=a.threads, memory_limit="4GiB", processes=True,
                           dashboard_address=None, silence_logs=logging.ERROR)
    kids = psutil.Process().children(recursive=True)
    peak: dict[int, int] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for p in kids:
                try:
                    peak[p.pid] = max(peak.get(p.pid, 0), p.memory_info().rss)
                except psutil.Error:
                    pass
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    out = os.path.join(os.path.dirname(os.path.abspath(a.data)), "predict_worker_peak.jsonl")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "lancetnic_flow", "predict", a.run, "--input", a.data, "--output", out,
                        "--force", "--scheduler", cluster.scheduler_address, "--blocksize", a.blocksize, "--quiet"],
                       capture_output=True, text=True)
    seconds = time.monotonic() - t0
    done.set()
    watcher.join()
    cluster.close()
    os.remove(out) if os.path.exists(out) else None
    torch_network = linear_shapes(read_run_json(a.run)[0]) is None
    loaded = loaded_bytes(a.run, {}, torch_network=torch_network)
    record = {"command": sys.argv, "commit": _commit(), "machine": platform.processor() or platform.machine(),
              "exit": p.returncode, "seconds": round(seconds, 1), "threads": a.threads, "blocksize": a.blocksize,
              "worker_peak_mib": round(max(peak.values()) / 2**20), "loaded_mib": round(loaded / 2**20),
              "worker_minimum_mib": round(worker_minimum(loaded) / 2**20)}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, f"predict_worker_peak-{int(time.time())}.json"), "w") as f:
        json.dump(record, f, indent=1)
    print(f"exit {p.returncode} in {seconds:.1f} s: {p.stdout.strip()[-200:]}{p.stderr.strip()[-400:]}")
    print("| threads | --blocksize | worker peak RSS | the run loaded, as planned | a worker's minimum with it |")
    print("|---:|---|---:|---:|---:|")
    print(f"| {a.threads} | {a.blocksize} | {record['worker_peak_mib']} MiB | {record['loaded_mib']} MiB | "
          f"{record['worker_minimum_mib']} MiB |")


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        return ""


if __name__ == "__main__":
    main()
