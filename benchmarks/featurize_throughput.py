"""Featurisation throughput, in MB/s of input, on three cluster shapes.

    .venv/bin/python benchmarks/featurize_throughput.py [--mb 100 | --rows N] [--repeats 3]

Configurations, each on the same generated CSV cut into the same partitions
(by default the ones ``train`` cuts for 2 workers × 1 thread):

* ``local-1``: a LocalCluster with 1 worker process × 1 thread;
* ``local-2``: a LocalCluster with 2 worker processes × 1 thread;
* ``scheduler-2``: a real ``dask scheduler`` and two ``dask worker --nthreads 1
  --memory-limit L`` processes on loopback, reached by address as ``--scheduler`` does.

Both LocalClusters come from :func:`lancetnic_flow.dataflow.cluster.open_cluster`, the
trainer's own, so they carry its worker environment and memory thresholds; the
external workers get the same environment variables.

What is timed is the featurisation stage alone, the same calls ``train``
makes, without the torch training:

* ``--features hashing`` (the default features): one pass,
  :func:`lancetnic_flow.features.fit.fit_features` with
  :func:`lancetnic_flow.dataflow.shards.count_partition` — every partition's
  statistics, tree-reduced, and its term counts written as shards: the corpus
  is tokenised once;
* ``--features tfidf`` (a fitted vocabulary): two passes, ``fit`` (statistics,
  pruned in the client) then ``featurise``: the fitted features broadcast to
  the workers and :func:`lancetnic_flow.dataflow.shards.featurize_partition`
  for every partition through the trainer's
  :class:`~lancetnic_flow.dataflow.window.OrderedWindow` (2 × worker threads
  in flight), writing shards to a fresh local cache.

``in-process`` runs the same task functions in this process, one partition
after another, with no Dask: the cost of the code itself, on one core.
``--corpus PATH`` measures a file of your own (a text,label CSV) instead of
a generated one. ``--python-tokenizer`` featurises with a registered per-text
tokenizer written in Python (:func:`python_words`, ``--tokenizer``'s path): the
reader's empty_text check and the features both read its tokens.

Cluster start-up is measured apart and not counted. Before the first repeat
the workers import the task modules once (untimed), so repeat 1 does not pay
for imports. Each configuration runs ``--repeats`` times; the table shows the
median. MB = 10^6 bytes of input file.

Writes ``OUT/featurize-<YYYY-MM-DD>T<HHMMSS>.json`` (all repeats, medians,
machine, load average before and after) and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent
CLASSES, SEED, VAL_FRACTION = 4, 0, 0.1
CONFIGS = ("in-process", "local-1", "local-2", "scheduler-2")
TASK_MODULES = ("lancetnic_flow.features.fit", "lancetnic_flow.dataflow.shards")


def _scaling():
    """benchmarks/scaling.py: machine info and size parsing, shared by the benchmarks."""
    sys.path.insert(0, str(HERE))
    import scaling

    return scaling


# --------------------------------------------------------------------------- corpus

def rows_for_mb(mb: float) -> int:
    """Rows of make-data CSV that come to about ``mb`` × 10^6 bytes, in whole
    10,000-row blocks (measured on the first block, so the estimate is exact
    in its mean row length for this seed)."""
    from lancetnic_flow.data.synth import BLOCK_ROWS, write_corpus

    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.csv"
        write_corpus(str(probe), BLOCK_ROWS, classes=CLASSES, seed=SEED)
        per_row = probe.stat().st_size / BLOCK_ROWS
    return max(BLOCK_ROWS, round(mb * 1e6 / per_row / BLOCK_ROWS) * BLOCK_ROWS)


def ensure_corpus(out: Path, rows: int) -> dict:
    """The corpus for ``rows``: reused if already there (make-data is deterministic)."""
    from lancetnic_flow.data.synth import write_corpus

    path = out / "data" / f"corpus-{rows}-c{CLASSES}-s{SEED}.csv"
    info: dict[str, Any] = {"path": str(path), "rows": rows, "seed": SEED, "classes": CLASSES, "reused": path.exists()}
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        write_corpus(str(path), rows, classes=CLASSES, seed=SEED)
        info["generate_seconds"] = time.monotonic() - t0
    info["bytes"] = path.stat().st_size
    return info


# --------------------------------------------------------------------------- clusters

def default_blocksize(nbytes: int) -> int:
    """The partition size ``train`` gives an uncompressed CSV on 2 workers × 1
    thread (``trainer.split_blocksize`` with 4 partitions per thread, within
    the plan's 1 MiB floor and ``MAX_PARTITION``), used for every
    configuration so that all of them cut the input alike."""
    from lancetnic_flow.dataflow.plan import MAX_PARTITION

    return max(2**20, min(MAX_PARTITION, -(-nbytes // 8)))


def _plan(workers: int, limit: int, blocksize: int):
    from lancetnic_flow.dataflow.plan import MemoryPlan

    return MemoryPlan(budget=0, reserve=0, trainer=0, workers=workers, threads=1, worker_limit=limit,
                      partition=blocksize, in_flight=max(2, 2 * workers))


class LoopbackCluster:
    """``dask scheduler`` + N ``dask worker`` subprocesses on 127.0.0.1."""

    def __init__(self, workers: int, memory_limit: int, work: Path):
        self.workers, self.memory_limit, self.work = workers, memory_limit, work
        self.procs: list[subprocess.Popen] = []
        self.address = ""

    def __enter__(self) -> "LoopbackCluster":
        from distributed import Client

        from lancetnic_flow.dataflow.plan import WORKER_ENV

        self.work.mkdir(parents=True, exist_ok=True)
        sched_file = self.work / "scheduler.json"
        sched_file.unlink(missing_ok=True)
        env = {**os.environ, **WORKER_ENV}
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env, "cwd": self.work}
        self.procs.append(subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                            "--no-dashboard", "--scheduler-file", str(sched_file)], **quiet))
        try:
            deadline = time.monotonic() + 120
            while not sched_file.exists():
                if time.monotonic() > deadline or self.procs[0].poll() is not None:
                    raise RuntimeError("dask scheduler did not start")
                time.sleep(0.2)
            self.address = json.loads(sched_file.read_text())["address"]
            for i in range(self.workers):
                self.procs.append(subprocess.Popen(
                    [str(BIN / "dask"), "worker", self.address, "--nworkers", "1", "--nthreads", "1",
                     "--memory-limit", str(self.memory_limit), "--no-dashboard", "--name", f"bench-{i}",
                     "--local-directory", str(self.work / f"w{i}")], **quiet))
            with Client(self.address, timeout="60s") as c:
                c.wait_for_workers(self.workers, timeout=120)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()


def open_config(name: str, limit: int, blocksize: int, work: Path):
    if name == "in-process":
        import contextlib

        from lancetnic_flow.features import fit as fitpass
        from lancetnic_flow.features import kernels, tokenize

        kernels.word_table()   # untimed, as the workers' imports are
        tokenize.text_buffers  # noqa: B018
        return contextlib.nullcontext((InProcess(), _plan(1, limit, blocksize)))
    """A context manager yielding ``(client, plan)`` for configuration ``name``."""
    import contextlib

    from lancetnic_flow.dataflow.cluster import open_cluster

    @contextlib.contextmanager
    def cm() -> Iterator[tuple[Any, Any]]:
        plan = _plan(int(name.rsplit("-", 1)[1]), limit, blocksize)
        if name.startswith("local-"):
            with open_cluster(plan) as client:
                yield client, plan
        else:
            with LoopbackCluster(plan.workers, limit, work / "loopback") as lc, \
                    open_cluster(plan, scheduler=lc.address) as client:
                yield client, plan

    return cm()


# --------------------------------------------------------------------------- one measurement

class InProcess:
    """No cluster: the pass's tasks run here, one partition after another."""


WORDS = re.compile(r"\w\w+")


def python_words(text: str) -> list[str]:
    """A pure-Python per-text tokenizer: runs of two or more word characters."""
    return WORDS.findall(text)


def python_tokenizer() -> str:
    """Register :func:`python_words`; its name for ``FeatureConfig(tokenizer=...)``."""
    from lancetnic_flow.features import register_tokenizer

    return register_tokenizer("python_words", python_words)


def featurize_once(client: Any, plan: Any, partitions: list, shard_dir: str, mode: str,
                   tokenizer: str | None = None) -> dict:
    """Fit and featurise every partition once; seconds per stage and what came out."""
    from lancetnic_flow.config import FeatureConfig
    from lancetnic_flow.data.sources import Columns
    from lancetnic_flow.data.usable import text_rule
    from lancetnic_flow.dataflow.shards import count_partition, featurize_partition
    from lancetnic_flow.dataflow.window import OrderedWindow
    from lancetnic_flow.features import fit as fitpass

    fcfg = FeatureConfig(mode=mode, tokenizer=tokenizer)
    columns = Columns(text=("text",), label="label", text_rule=text_rule(fcfg))
    opts = dict(storage_options={}, chunk_bytes=plan.partition, val_fraction=VAL_FRACTION)
    t0 = time.perf_counter()
    if isinstance(client, InProcess):
        from lancetnic_flow.features.vocab import merge_stats

        task = count_partition if mode == "hashing" else fitpass.fit_partition
        extra = dict(shard_dir=shard_dir, cache_options={}) if mode == "hashing" else {}
        parts = [task(p, None, columns=columns, fcfg=fcfg, **opts, **extra) if mode == "hashing"
                 else task(p, columns, fcfg, opts["storage_options"], opts["chunk_bytes"], VAL_FRACTION)
                 for p in partitions]
        stats = merge_stats(parts)
        features = fitpass.finish_fit(stats, fcfg, columns)
        t1 = time.perf_counter()
        results = stats.results if mode == "hashing" else [
            featurize_partition(p, None, columns=columns, features=features, shard_dir=shard_dir, cache_options={},
                                **opts) for p in partitions]
        t2 = time.perf_counter()
    elif mode == "hashing":   # one pass: statistics and shards
        features, stats = fitpass.fit_features(client, partitions, columns, fcfg, task=count_partition,
                                               splits=[None] * len(partitions), shard_dir=shard_dir,
                                               cache_options={}, **opts)
        results = stats.results
        t1 = t2 = time.perf_counter()
    else:
        features, stats = fitpass.fit_features(client, partitions, columns, fcfg, **opts)
        t1 = time.perf_counter()
        scattered = client.scatter(features, broadcast=True)
        window = OrderedWindow(client, featurize_partition, [(p, None) for p in partitions], plan.in_flight,
                               columns=columns, features=scattered, shard_dir=shard_dir, cache_options={}, **opts)
        results = list(window)
        t2 = time.perf_counter()
    return {"fit_seconds": t1 - t0, "featurize_seconds": t2 - t1, "seconds": t2 - t0,
            "rows_read": sum(r.rows_read for r in results), "train_rows": sum(r.train_rows for r in results),
            "val_rows": sum(r.val_rows for r in results), "tokens": sum(r.tokens for r in results),
            "shard_bytes": sum(s.bytes for r in results for s in r.shards), "vocabulary": features.dim,
            "fit_docs": stats.docs}


def run_config(name: str, partitions: list, corpus: dict, a: argparse.Namespace, work: Path) -> dict:
    """Start the configuration's cluster, warm its workers, measure ``repeats`` times."""
    t0 = time.perf_counter()
    with open_config(name, a.memory_limit, a.blocksize, work) as (client, plan):
        start = time.perf_counter() - t0
        if name != "in-process":
            for mod in TASK_MODULES:  # untimed: workers import the task code once
                client.run(importlib.import_module, mod)
        reps = []
        for i in range(a.repeats):
            shard_dir = work / "shards" / f"{name}-{i}"
            try:
                r = featurize_once(client, plan, partitions, str(shard_dir), a.features,
                                   python_tokenizer() if a.python_tokenizer else None)
            finally:
                shutil.rmtree(shard_dir, ignore_errors=True)
            if r["rows_read"] != corpus["rows"]:
                raise RuntimeError(f"{name}: read {r['rows_read']} rows of {corpus['rows']}")
            reps.append(r)
            print(f"  {name} run {i + 1}/{a.repeats}: fit {r['fit_seconds']:.2f} s + featurise "
                  f"{r['featurize_seconds']:.2f} s = {r['seconds']:.2f} s "
                  f"({corpus['bytes'] / 1e6 / r['seconds']:.1f} MB/s)", flush=True)
    med = {k: statistics.median(r[k] for r in reps) for k in ("fit_seconds", "featurize_seconds", "seconds")}
    return {"configuration": name, "workers": plan.workers, "threads_per_worker": plan.threads,
            "memory_limit_bytes": a.memory_limit, "cluster_start_seconds": start, "repeats": reps,
            "median": med, "mb": corpus["bytes"] / 1e6, "mb_per_s": corpus["bytes"] / 1e6 / med["seconds"],
            "vocabulary": reps[0]["vocabulary"], "shard_bytes": reps[0]["shard_bytes"]}


# --------------------------------------------------------------------------- report

def summarise(runs: dict[str, dict]) -> tuple[str, dict]:
    """The Markdown table and the two ratios."""
    def mbs(name: str) -> float | None:
        return runs[name]["mb_per_s"] if name in runs else None

    ratios: dict[str, float | None] = {"scaling_2_vs_1_worker": None, "scheduler_overhead_vs_local_2": None}
    if mbs("local-1") and mbs("local-2"):
        ratios["scaling_2_vs_1_worker"] = mbs("local-2") / mbs("local-1")
    if "scheduler-2" in runs and "local-2" in runs:
        ratios["scheduler_overhead_vs_local_2"] = (runs["scheduler-2"]["median"]["seconds"]
                                                   / runs["local-2"]["median"]["seconds"] - 1)
    lines = ["| configuration | MB | fit s | featurise s | seconds | MB/s | vs 1 worker | vs LocalCluster 2 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in runs.items():
        m = r["median"]
        vs1 = f"× {r['mb_per_s'] / mbs('local-1'):.2f}" if mbs("local-1") and name != "local-1" else "–"
        vs2 = (f"{m['seconds'] / runs['local-2']['median']['seconds'] - 1:+.1%}"
               if name == "scheduler-2" and "local-2" in runs else "–")
        lines.append(f"| {name} | {r['mb']:.1f} | {m['fit_seconds']:.2f} | {m['featurize_seconds']:.2f} "
                     f"| {m['seconds']:.2f} | {r['mb_per_s']:.1f} | {vs1} | {vs2} |")
    text = "\n".join(lines)
    if ratios["scaling_2_vs_1_worker"] is not None:
        text += f"\n\nscaling, 2 vs 1 worker (MB/s ratio): {ratios['scaling_2_vs_1_worker']:.2f}"
    if ratios["scheduler_overhead_vs_local_2"] is not None:
        text += (f"\noverhead of the real scheduler vs LocalCluster 2 workers (seconds): "
                 f"{ratios['scheduler_overhead_vs_local_2']:+.1%}")
    return text, ratios


# --------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    sc = _scaling()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--mb", type=float, default=100.0, help="corpus size in MB (10^6 bytes; default 100)")
    size.add_argument("--rows", type=sc.parse_count, help="corpus size in rows instead (25k, 2.5M work)")
    p.add_argument("--repeats", type=int, default=3, help="runs per configuration; the median is reported (3)")
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"which, comma-separated (default {','.join(CONFIGS)})")
    p.add_argument("--blocksize", type=sc.parse_size, default=None,
                   help="partition size, the same for every configuration (default: what train picks for "
                   "2 workers × 1 thread: about 8 partitions, 1–4 MiB each)")
    p.add_argument("--memory-limit", type=sc.parse_size, default=2 * 2**30, help="per worker (default 2GiB)")
    p.add_argument("--out", default=str(HERE / "out"), help="corpus and results (default benchmarks/out)")
    p.add_argument("--features", default="hashing", choices=("hashing", "tfidf"),
                   help="hashing: the default features, one pass; tfidf: a fitted vocabulary, two passes")
    p.add_argument("--corpus", help="a text,label CSV of your own instead of a generated one (e.g. "
                   "benchmarks/out/data/debian-train.csv)")
    p.add_argument("--python-tokenizer", action="store_true",
                   help="featurise with a registered per-text tokenizer written in Python (python_words)")
    a = p.parse_args(argv)
    a.configs = [c.strip() for c in a.configs.split(",") if c.strip()]
    bad = [c for c in a.configs if c not in CONFIGS]
    if bad:
        p.error(f"unknown configuration(s) {', '.join(bad)}; choose from {', '.join(CONFIGS)}")
    if a.repeats < 1:
        p.error("--repeats must be ≥ 1")
    return a


def main(argv: list[str] | None = None) -> int:
    from lancetnic_flow.data.sources import plan_source

    a = parse_args(argv)
    out = Path(a.out).resolve()
    stamp = _dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    work = out / "featurize" / stamp
    work.mkdir(parents=True, exist_ok=True)
    result_path = out / f"featurize-{stamp}.json"
    if a.corpus:
        import pyarrow.csv as pacsv

        rows = pacsv.read_csv(a.corpus).num_rows
        corpus = {"path": str(Path(a.corpus).resolve()), "rows": rows, "bytes": Path(a.corpus).stat().st_size}
    else:
        rows = a.rows or rows_for_mb(a.mb)
        corpus = ensure_corpus(out, rows)
    a.blocksize = a.blocksize or default_blocksize(corpus["bytes"])
    partitions = plan_source([corpus["path"]], blocksize=a.blocksize).partitions
    doc: dict[str, Any] = {
        "benchmark": "featurize_throughput", "complete": False,
        "command": shlex.join([Path(sys.executable).name, os.path.relpath(__file__, ROOT)]
                              + (sys.argv[1:] if argv is None else list(argv))),
        "config": {"configs": a.configs, "repeats": a.repeats, "blocksize": a.blocksize, "partitions": len(partitions),
                   "memory_limit_bytes": a.memory_limit, "features": a.features,
                   "val_fraction": VAL_FRACTION, "python_tokenizer": a.python_tokenizer},
        "machine": _scaling().machine_info(), "corpus": corpus, "runs": {},
    }
    print(f"featurisation throughput → {result_path}\n  corpus {corpus['path']}: {rows:,} rows, "
          f"{corpus['bytes'] / 1e6:.1f} MB, {len(partitions)} partitions of ≤ {a.blocksize / 2**20:.2f} MiB",
          flush=True)
    try:
        for name in a.configs:
            print(f"{name}", flush=True)
            doc["runs"][name] = run_config(name, partitions, corpus, a, work)
        doc["complete"] = True
    finally:
        doc["machine"]["load_average_at_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
        if doc["runs"]:
            doc["markdown"], doc["ratios"] = summarise(doc["runs"])
            print("\n" + doc["markdown"])
        result_path.write_text(json.dumps(doc, indent=1))
        shutil.rmtree(work, ignore_errors=True)  # shards and the loopback workers' folders
        print(f"\nresults: {result_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
