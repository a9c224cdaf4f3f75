#!/usr/bin/env python
"""Scaling benchmark: lancetnic-flow at growing corpus sizes, against two baselines.

Run it from the repository root, with the project's venv, on a quiet machine:

    .venv/bin/python benchmarks/scaling.py                       # 25k, 250k, 2.5M rows; 4 GiB budget
    .venv/bin/python benchmarks/scaling.py --sizes 25000,250000,2500000 --budget 4GiB --out benchmarks/out
    .venv/bin/python benchmarks/scaling.py --sizes 5000,20000,50000          # a quick smoke run (~5 min)
    .venv/bin/python benchmarks/scaling.py --skip-baselines                  # lancetnic-flow only

What it does (see benchmarks/README.md for every field of the result):

1. ``lancetnic-flow make-data`` writes one CSV corpus per size (4 classes,
   seed 0) into ``--out/data``, plus a held-out test corpus of 20k rows: the
   seed-0 rows right after the largest corpus's rows (NOT another seed: the
   seed picks the vocabulary and topics, so a seed-1 corpus is another
   language and every model scores chance on it; ``--test-seed 1`` does
   that anyway). Files already there are reused.
2. For each size, ``lancetnic-flow train CORPUS --epochs 1 --memory-budget
   BUDGET --val-fraction 0.05`` runs as a subprocess with a fresh shard cache,
   while a sampler thread here reads, every 0.2 s with psutil, the RSS of the
   CLI process and of all its descendants (Dask nannies and workers). Then
   ``lancetnic-flow evaluate RUN TEST --json`` gives held-out accuracy.
3. Baselines on the middle size (or ``--baseline-size``), each in its own
   subprocess under the same sampler: scikit-learn HashingVectorizer(2**18) +
   SGDClassifier(log_loss) with partial_fit over 10k-row pandas chunks (one
   pass), and fastText supervised (wordNgrams=2, epoch=5, thread=2) on a
   fastText-format file converted from the CSV (conversion timed separately).
4. Writes ``OUT/scaling-<date>T<time>.json`` (rewritten after every step, so an
   interrupted run keeps what it measured) and prints a Markdown table and the
   target checks.

Ctrl-C (or SIGTERM) stops the running subprocess and every process under it
(SIGINT, then SIGTERM, then SIGKILL), writes the partial JSON, and exits 130.

The script only needs psutil (and pandas + scikit-learn / fasttext for the
baselines, imported in their subprocesses only). fastText: ``pip install
fasttext-wheel`` (or ``fasttext``, or ``fasttext-numpy2-wheel``).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata as md
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CLASSES = 4
TRAIN_SEED = 0
BLOCK_ROWS = 10_000  # make-data generates rows in fixed, independently seeded blocks of this many rows
SAMPLE_INTERVAL = 0.2
TIMELINE_POINTS = 400
GiB = 2**30
MiB = 2**20


# --------------------------------------------------------------------------- sizes and formatting

def parse_size(text: str) -> int:
    """'4GiB', '512MiB', '4G', '1e9' → bytes."""
    t = text.strip().replace(" ", "")
    units = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "kb": 10**3, "mb": 10**6, "gb": 10**9,
             "tb": 10**12, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "b": 1}
    low = t.lower()
    for u in sorted(units, key=len, reverse=True):
        if low.endswith(u):
            return int(float(low[: -len(u)]) * units[u])
    return int(float(low))


def parse_count(text: str) -> int:
    """'25000', '25k', '2.5M' → rows."""
    t = text.strip().lower().replace("_", "")
    mult = {"k": 10**3, "m": 10**6, "g": 10**9}
    if t and t[-1] in mult:
        return int(float(t[:-1]) * mult[t[-1]])
    return int(float(t))


def mib(n: int | float | None) -> str:
    return "–" if n is None else f"{n / MiB:,.0f}"


def num(x: float | None, fmt: str = ",.0f") -> str:
    return "–" if x is None else format(x, fmt)


def human_rows(n: int) -> str:
    if n >= 10**6 and n % 10**5 == 0:
        return f"{n / 10**6:g}M"
    if n >= 10**3 and n % 100 == 0:
        return f"{n / 10**3:g}k"
    return str(n)


# --------------------------------------------------------------------------- process-tree sampling and cleanup

class TreeSampler(threading.Thread):
    """Every ``interval`` s: RSS of the root process and the sum over all its
    descendants (recursive children), with peaks and a timeline.

    Every descendant ever seen is remembered (as a psutil.Process, which
    guards against pid reuse), so cleanup can reach orphans that were
    re-parented away from the tree."""

    def __init__(self, pid: int, interval: float = SAMPLE_INTERVAL):
        super().__init__(name=f"rss-sampler-{pid}", daemon=True)
        self.root = psutil.Process(pid)
        self.interval = interval
        self.stop_event = threading.Event()
        self.t0 = time.monotonic()
        self.seen: dict[int, psutil.Process] = {}
        self.samples = 0
        self.peak_root = self.peak_children = self.peak_total = 0
        self.peak_root_t = self.peak_children_t = self.peak_total_t = 0.0
        self.max_procs = 0
        self.timeline: list[tuple[float, int, int, int]] = []  # (t, root, children, n_children)

    def sample(self) -> bool:
        try:
            root = self.root.memory_info().rss
            kids = self.root.children(recursive=True)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            return False
        total_kids = 0
        for k in kids:
            self.seen.setdefault(k.pid, k)
            try:
                total_kids += k.memory_info().rss
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                pass
        t = time.monotonic() - self.t0
        self.samples += 1
        self.max_procs = max(self.max_procs, len(kids))
        if root > self.peak_root:
            self.peak_root, self.peak_root_t = root, t
        if total_kids > self.peak_children:
            self.peak_children, self.peak_children_t = total_kids, t
        if root + total_kids > self.peak_total:
            self.peak_total, self.peak_total_t = root + total_kids, t
        self.timeline.append((round(t, 2), root, total_kids, len(kids)))
        return True

    def run(self) -> None:
        while True:
            try:
                alive = self.sample()
            except Exception:  # never let the sampler kill the benchmark
                alive = True
            if not alive or self.stop_event.wait(self.interval):
                return

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=5)

    def result(self) -> dict:
        tl = self.timeline
        step = max(1, len(tl) // TIMELINE_POINTS)
        return {
            "interval_s": self.interval, "samples": self.samples,
            "peak_trainer_rss_bytes": self.peak_root, "peak_children_rss_bytes": self.peak_children,
            "peak_total_rss_bytes": self.peak_total,
            "peak_trainer_at_s": self.peak_root_t, "peak_children_at_s": self.peak_children_t,
            "peak_total_at_s": self.peak_total_t, "max_child_processes": self.max_procs,
            "timeline": {"columns": ["t_s", "trainer_rss", "children_rss", "n_children"],
                         "rows": [list(r) for r in tl[::step]]},
        }


_ACTIVE: list[tuple[subprocess.Popen, TreeSampler]] = []


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _kill_tree(proc: subprocess.Popen, sampler: TreeSampler | None, grace: float = 10.0) -> None:
    """SIGINT to the root (the CLI shuts its cluster down cleanly), then
    SIGTERM, then SIGKILL, to the process group and to every descendant
    ever seen."""
    def targets() -> list[psutil.Process]:
        ps = []
        try:
            root = psutil.Process(proc.pid)
            ps = root.children(recursive=True)
        except psutil.NoSuchProcess:
            pass
        if sampler is not None:
            ps += [p for p in sampler.seen.values() if p.is_running()]
        out, pids = [], set()
        for p in ps:
            if p.pid not in pids:
                pids.add(p.pid)
                out.append(p)
        return out

    for sig, wait in ((signal.SIGINT, grace), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        live = [p for p in targets() if _alive(p)]
        if not live and proc.poll() is not None:
            break
        if proc.poll() is None:
            try:
                live.append(psutil.Process(proc.pid))
            except psutil.NoSuchProcess:
                pass
        if sig == signal.SIGINT:
            # to the CLI only: it stops its cluster itself (a few seconds); interrupting the
            # workers at the same time only slows that down
            if proc.poll() is None:
                proc.send_signal(sig)
        else:
            try:
                os.killpg(proc.pid, sig)  # the child was started in its own session: pgid == pid
            except (ProcessLookupError, PermissionError):
                pass
            for p in live:
                try:
                    p.send_signal(sig)
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    pass
        # the root is reaped through Popen (psutil would reap it and lose its exit code)
        deadline = time.monotonic() + wait
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass
        psutil.wait_procs([p for p in live if p.pid != proc.pid], timeout=max(0.1, deadline - time.monotonic()))


def cleanup_all() -> None:
    while _ACTIVE:
        proc, sampler = _ACTIVE.pop()
        _kill_tree(proc, sampler)
        sampler.stop()


def leftovers(sampler: TreeSampler, grace: float = 3.0) -> list[dict]:
    """Descendants still alive ``grace`` s after the root exited (orphaned
    workers; multiprocessing's resource tracker exits on its own, a moment
    after the last process holding its pipe)."""
    psutil.wait_procs([p for p in sampler.seen.values() if _alive(p)], timeout=grace)
    out = []
    for p in sampler.seen.values():
        if _alive(p):
            try:
                out.append({"pid": p.pid, "cmdline": " ".join(p.cmdline())[:200]})
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
    return out


def run_sampled(cmd: list[str], log: Path, *, stdout_path: Path | None = None, timeout: float | None = None,
                env: dict | None = None) -> dict:
    """Run ``cmd`` in its own session with a TreeSampler on it; stderr (and
    stdout unless ``stdout_path``) go to ``log``. Returns wall time, exit code,
    CPU seconds of the whole tree (getrusage of reaped children) and the
    sampler's peaks."""
    log.parent.mkdir(parents=True, exist_ok=True)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "wb") as lf, open(stdout_path or os.devnull, "wb") as of:
        lf.write(("$ " + shlex.join(cmd) + "\n").encode())
        lf.flush()
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=of if stdout_path else lf, stderr=lf, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env, cwd=ROOT)
        sampler = TreeSampler(proc.pid)
        _ACTIVE.append((proc, sampler))
        sampler.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_tree(proc, sampler)
        wall = time.monotonic() - t0
        sampler.stop()
        _ACTIVE.remove((proc, sampler))
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    left = leftovers(sampler)
    if left:  # the tool should not leave processes behind; record it, then clean up
        _kill_tree(proc, sampler, grace=2.0)
    return {"cmd": shlex.join(cmd), "returncode": proc.returncode, "timed_out": timed_out,
            "wall_seconds": wall,
            "cpu_seconds": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
            "leftover_processes": left, "log": str(log), **sampler.result()}


def check_rc(res: dict, what: str) -> None:
    if res["returncode"] != 0:
        tail = ""
        try:
            tail = "".join(Path(res["log"]).read_text(errors="replace").splitlines(True)[-25:])
        except OSError:
            pass
        raise RuntimeError(f"{what} failed (exit {res['returncode']}); log {res['log']}:\n{tail}")


# --------------------------------------------------------------------------- machine info

def machine_info() -> dict:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for dist in ("lancetnic-flow", "lancetnic_flow", "torch", "dask", "distributed", "pandas", "pyarrow", "numpy",
                 "fsspec", "scikit-learn", "psutil", "fasttext-wheel", "fasttext", "fasttext-numpy2-wheel",
                 "fasttext-numpy2"):
        try:
            versions[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    git = {}
    try:
        git["commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                       timeout=10).stdout.strip()
        git["dirty"] = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                           capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    vm = psutil.virtual_memory()
    return {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "hostname": platform.node(), "platform": platform.platform(), "cpu_model": cpu,
        "logical_cores": psutil.cpu_count(logical=True), "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "ram_total_bytes": vm.total, "ram_available_bytes_at_start": vm.available,
        "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "python": sys.version.split()[0], "python_executable": sys.executable, "versions": versions, "git": git,
    }


# --------------------------------------------------------------------------- corpora

def run_cli(*args: str) -> str:
    """``lancetnic-flow ARGS`` in this interpreter; its stdout, or exit naming the command on failure."""
    p = subprocess.run([*cli_cmd(), *args], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"lancetnic-flow {' '.join(args[:3])} … failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def write_record(out: str | Path, name: str, argv: list[str] | None, results: list[dict]) -> Path:
    """A benchmark's JSON record (command, date, machine, results) as ``OUT/NAME-<time>.json``."""
    stamp = _dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    doc = {"benchmark": name.replace("-", "_"), "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
           "date": stamp, "machine": machine_info(), "results": results}
    path = Path(out) / f"{name}-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    return path


def cli_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "lancetnic-flow"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "lancetnic_flow"]


def corpus_path(out: Path, rows: int, seed: int) -> Path:
    return out / "data" / f"corpus-{rows}-c{CLASSES}-s{seed}.csv"


def make_data(path: Path, rows: int, seed: int, logs: Path) -> float:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".partial.csv")
    res = run_sampled(cli_cmd() + ["make-data", str(tmp), "--rows", str(rows), "--classes", str(CLASSES),
                                   "--seed", str(seed), "--force"], logs / f"make-data-{rows}-s{seed}.log")
    check_rc(res, f"make-data {rows} rows")
    os.replace(tmp, path)
    return res["wall_seconds"]


def ensure_corpus(out: Path, rows: int, seed: int, logs: Path) -> dict:
    path = corpus_path(out, rows, seed)
    info = {"path": str(path), "rows": rows, "classes": CLASSES, "seed": seed, "reused": path.exists(),
            "source": f"lancetnic-flow make-data --rows {rows} --classes {CLASSES} --seed {seed}"}
    if not path.exists():
        info["generate_seconds"] = make_data(path, rows, seed, logs)
    info["bytes"] = path.stat().st_size
    return info


def prepare_corpora(out: Path, sizes: list[int], test_rows: int, test_seed: int | None, logs: Path) -> dict:
    """The training corpora and the held-out test corpus.

    make-data's vocabulary and class topics are drawn from the seed, so a
    corpus with another seed is another language: a model trained on seed 0
    scores chance on it. The held-out set is therefore taken from the *same*
    seed-0 stream, right after the training rows: rows [R, R + test_rows)
    with R = the largest size rounded up to a whole block. Rows are generated
    in independently seeded blocks of BLOCK_ROWS, so one `make-data --rows
    R+test_rows` "pool" yields the test rows, and its first N rows are
    byte-identical to `make-data --rows N` for every N that is a whole
    number of blocks (those corpora are cut from the pool; the others are
    generated). Test rows never occur in a training corpus: they come from
    blocks no training corpus reaches. ``test_seed`` given: the test corpus
    is `make-data --rows test_rows --seed test_seed` instead."""
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    corpora: dict = {}
    if test_seed is not None:
        corpora["test"] = ensure_corpus(out, test_rows, test_seed, logs)
        corpora["test"]["held_out"] = f"a different seed ({test_seed}): a different vocabulary and topics"
        cut: list[int] = []
    else:
        start = -(-max(sizes) // BLOCK_ROWS) * BLOCK_ROWS
        test_path = data / f"heldout-{test_rows}-from-{start}-c{CLASSES}-s{TRAIN_SEED}.csv"
        cut = sorted(n for n in sizes if n % BLOCK_ROWS == 0 and not corpus_path(out, n, TRAIN_SEED).exists())
        test_info = {"path": str(test_path), "rows": test_rows, "classes": CLASSES, "seed": TRAIN_SEED,
                     "reused": test_path.exists(), "first_row": start,
                     "held_out": f"rows {start:,}..{start + test_rows - 1:,} of the seed-{TRAIN_SEED} stream, "
                                 "after every training corpus's rows"}
        if cut or not test_path.exists():
            pool_rows = start + test_rows
            pool = data / f"pool-{pool_rows}-c{CLASSES}-s{TRAIN_SEED}.csv"
            print(f"corpus pool {human_rows(pool_rows)} rows (seed {TRAIN_SEED}) …", flush=True)
            gen = make_data(pool, pool_rows, TRAIN_SEED, logs)
            t0 = time.monotonic()
            outs = {n: open(corpus_path(out, n, TRAIN_SEED).with_suffix(".partial"), "wb") for n in cut}
            tmp_test = test_path.with_suffix(".partial")
            written = 0
            with open(pool, "rb") as src, open(tmp_test, "wb") as tf:
                header = src.readline()
                for f in list(outs.values()) + [tf]:
                    f.write(header)
                for i, line in enumerate(src):  # make-data text has no newlines: one line = one row
                    for n, f in outs.items():
                        if i < n:
                            f.write(line)
                    if i >= start:
                        tf.write(line)
                        written += 1
            for n, f in outs.items():
                f.close()
                os.replace(f.name, corpus_path(out, n, TRAIN_SEED))
            if written != test_rows:
                raise RuntimeError(f"the pool {pool} gave {written} test rows, expected {test_rows}")
            os.replace(tmp_test, test_path)
            pool.unlink()
            test_info.update(generate_seconds=gen, split_seconds=time.monotonic() - t0,
                             source=f"rows {start:,}.. of lancetnic-flow make-data --rows {pool_rows} "
                                    f"--classes {CLASSES} --seed {TRAIN_SEED}")
        test_info["bytes"] = test_path.stat().st_size
        corpora["test"] = test_info
    for n in sizes:
        print(f"corpus {human_rows(n)} rows …", flush=True)
        info = ensure_corpus(out, n, TRAIN_SEED, logs)
        if n in cut:
            info["source"] = (f"first {n} rows of make-data --rows {start + test_rows} --seed {TRAIN_SEED}, "
                              f"byte-identical to make-data --rows {n} --seed {TRAIN_SEED} (whole blocks)")
            info["reused"] = False
        corpora[str(n)] = info
    return corpora


def dir_bytes(path: Path) -> int:
    total = 0
    for dp, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(dp, f))
            except OSError:
                pass
    return total


# --------------------------------------------------------------------------- lancetnic-flow runs

def last_json_line(text: str) -> dict:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON object in the output")


def run_lancetnic(args, corpus: dict, test: dict, work: Path) -> dict:
    n = corpus["rows"]
    name = f"lancetnic-{n}"
    cache = work / f"cache-{n}"
    shutil.rmtree(cache, ignore_errors=True)
    cmd = cli_cmd() + ["train", corpus["path"], "--text", "text", "--label", "label", "--epochs", "1",
                       "--memory-budget", args.budget, "--val-fraction", "0.05", "--out", str(work),
                       "--name", name, "--cache", str(cache)] + shlex.split(args.train_args)
    print(f"  train {human_rows(n)} rows …", flush=True)
    res = run_sampled(cmd, work / f"{name}.train.log", timeout=args.timeout)
    check_rc(res, f"lancetnic-flow train ({n} rows)")
    run_dir = work / name
    metrics = json.loads((run_dir / "metrics.json").read_text())
    epoch = (metrics.get("epochs") or [{}])[0]
    rows = metrics.get("rows", {})
    trained = rows.get("trained") or epoch.get("rows") or 0
    stage = metrics.get("stage_seconds", {})
    inner = metrics.get("seconds")
    out = {
        "system": "lancetnic-flow", "corpus_rows": n, "rows": rows, "rows_trained": trained,
        "wall_seconds": res["wall_seconds"], "cpu_seconds": res["cpu_seconds"],
        "rows_per_s_wall": trained / res["wall_seconds"] if res["wall_seconds"] else None,
        "rows_per_s_epoch": epoch.get("rows_per_s"), "epoch_seconds": epoch.get("seconds"),
        "run_seconds": inner, "stage_seconds": stage,
        # where the wall time goes: fit pass, training epoch(s) incl. validation, everything else
        # inside train() (planning, cluster start, saving), and process start/imports/cluster shutdown
        "time_breakdown_s": {
            "fit": stage.get("fit"), "train": stage.get("train"),
            "other_in_run": (inner - sum(stage.values())) if inner is not None else None,
            "process_overhead": (res["wall_seconds"] - inner) if inner is not None else None,
        },
        "peak_trainer_rss_bytes": res["peak_trainer_rss_bytes"],
        "peak_workers_rss_bytes": res["peak_children_rss_bytes"],
        "peak_total_rss_bytes": res["peak_total_rss_bytes"],
        "reported_memory": metrics.get("memory"),
        "val_accuracy": metrics.get("val_accuracy"), "val_macro_f1": metrics.get("val_macro_f1"),
        "train_accuracy": epoch.get("train_accuracy"), "vocabulary": metrics.get("vocabulary"),
        "run_dir": str(run_dir), "cache_bytes": dir_bytes(cache), "sampling": res,
    }
    if not args.keep_cache:
        shutil.rmtree(cache, ignore_errors=True)
    print(f"  evaluate on {human_rows(test['rows'])} held-out rows …", flush=True)
    ev_out = work / f"{name}.evaluate.json"
    ev = run_sampled(cli_cmd() + ["evaluate", str(run_dir), test["path"], "--json", "--memory-budget", args.budget],
                     work / f"{name}.evaluate.log", stdout_path=ev_out, timeout=args.timeout)
    try:  # a failed evaluation must not throw away the training measurements
        check_rc(ev, f"lancetnic-flow evaluate ({n} rows)")
        em = last_json_line(ev_out.read_text())
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"  evaluate FAILED: {exc}", file=sys.stderr, flush=True)
        out["evaluate_error"] = str(exc)
        em = {}
    out["test_accuracy"] = em.get("accuracy")
    out["test_macro_f1"] = em.get("macro_f1")
    out["test_loss"] = em.get("loss")
    out["evaluate"] = {"wall_seconds": ev["wall_seconds"], "peak_total_rss_bytes": ev["peak_total_rss_bytes"],
                       "rows": em.get("rows"), "leftover_processes": ev["leftover_processes"]}
    return out


# --------------------------------------------------------------------------- baselines (parent side)

def run_baseline(args, kind: str, corpus: dict, test: dict, work: Path) -> dict:
    n = corpus["rows"]
    result = work / f"{kind}-{n}.result.json"
    result.unlink(missing_ok=True)
    extra = {}
    train_path, test_path = corpus["path"], test["path"]
    if kind == "fasttext":
        ft_train = Path(corpus["path"]).with_suffix(".ft.txt")
        ft_test = Path(test["path"]).with_suffix(".ft.txt")
        conv = {}
        for src, dst in ((corpus["path"], ft_train), (test["path"], ft_test)):
            cres = work / f"convert-{Path(dst).stem}.json"
            r = run_sampled([sys.executable, __file__, "--_worker", "convert-fasttext", "--_train", src,
                             "--_test", str(dst), "--_result", str(cres)], work / f"convert-{Path(dst).stem}.log",
                            timeout=args.timeout)
            check_rc(r, f"fastText conversion of {src}")
            conv[Path(src).name] = json.loads(cres.read_text())
        extra["conversion"] = conv
        train_path, test_path = str(ft_train), str(ft_test)
    print(f"  baseline {kind} on {human_rows(n)} rows …", flush=True)
    res = run_sampled([sys.executable, __file__, "--_worker", kind, "--_train", train_path, "--_test", test_path,
                       "--_result", str(result)], work / f"{kind}-{n}.log", timeout=args.timeout)
    check_rc(res, f"baseline {kind}")
    inner = json.loads(result.read_text())
    out = {"system": inner.pop("system"), "corpus_rows": n, **inner, **extra,
           "wall_seconds": res["wall_seconds"], "cpu_seconds": res["cpu_seconds"],
           "rows_per_s_wall": inner["rows_trained"] / res["wall_seconds"],
           "peak_trainer_rss_bytes": res["peak_trainer_rss_bytes"],
           "peak_workers_rss_bytes": res["peak_children_rss_bytes"],
           "peak_total_rss_bytes": res["peak_total_rss_bytes"], "sampling": res}
    return out


# --------------------------------------------------------------------------- baselines (worker side)

def _read_chunks(path: str, chunksize: int):
    import pandas as pd

    return pd.read_csv(path, usecols=["text", "label"], dtype=str, keep_default_na=False, chunksize=chunksize)


def worker_sklearn(train: str, test: str) -> dict:
    import numpy as np
    import sklearn
    from sklearn.feature_extraction.text import HashingVectorizer
    from sklearn.linear_model import SGDClassifier

    t0 = time.monotonic()
    # partial_fit must know every class up front: one label-only pass
    labels: set[str] = set()
    for chunk in _read_chunks(train, 100_000):
        labels.update(chunk["label"].unique().tolist())
    classes = np.array(sorted(labels))
    scan = time.monotonic() - t0
    vec = HashingVectorizer(n_features=2**18, alternate_sign=False)
    clf = SGDClassifier(loss="log_loss", random_state=0)
    rows = 0
    t1 = time.monotonic()
    for chunk in _read_chunks(train, 10_000):
        clf.partial_fit(vec.transform(chunk["text"]), chunk["label"].to_numpy(), classes=classes)
        rows += len(chunk)
    train_s = time.monotonic() - t1
    t2 = time.monotonic()
    correct = total = 0
    for chunk in _read_chunks(test, 10_000):
        pred = clf.predict(vec.transform(chunk["text"]))
        correct += int((pred == chunk["label"].to_numpy()).sum())
        total += len(chunk)
    return {"system": "sklearn HashingVectorizer+SGD", "library_version": sklearn.__version__,
            "params": {"n_features": 2**18, "alternate_sign": False, "loss": "log_loss", "chunksize": 10_000,
                       "passes": 1},
            "rows_trained": rows, "label_scan_seconds": scan, "train_seconds": train_s,
            "rows_per_s": rows / train_s, "rows_per_s_note": "rows / the one streaming pass (read + hash + "
            "partial_fit); label scan and test excluded",
            "test_seconds": time.monotonic() - t2, "test_rows": total, "test_accuracy": correct / total}


def worker_convert_fasttext(src: str, dst: str) -> dict:
    """CSV → '__label__X normalised text' lines: lowercase, every run of
    characters other than a-z/0-9 becomes one space (the same tokens the
    other two systems see: fastText would keep 'word,' as its own token)."""
    t0 = time.monotonic()
    rows = 0
    tmp = dst + ".partial"
    with open(tmp, "w", encoding="utf-8") as f:
        for chunk in _read_chunks(src, 50_000):
            text = chunk["text"].str.lower().str.replace(r"[^a-z0-9]+", " ", regex=True).str.strip()
            lab = "__label__" + chunk["label"].str.replace(r"\s+", "_", regex=True)
            f.write("\n".join((lab + " " + text).tolist()))
            f.write("\n")
            rows += len(chunk)
    os.replace(tmp, dst)
    return {"rows": rows, "seconds": time.monotonic() - t0, "path": dst, "bytes": os.path.getsize(dst)}


def _import_fasttext():
    import fasttext  # provided by fasttext-wheel, fasttext, or fasttext-numpy2-wheel

    for dist in ("fasttext-wheel", "fasttext-numpy2-wheel", "fasttext-numpy2", "fasttext"):
        try:
            return fasttext, f"{dist} {md.version(dist)}"
        except md.PackageNotFoundError:
            continue
    return fasttext, "fasttext (unknown distribution)"


def worker_fasttext(train: str, test: str) -> dict:
    fasttext, dist = _import_fasttext()
    epochs = 5
    with open(train, "rb") as f:
        rows = sum(1 for _ in f)
    t0 = time.monotonic()
    model = fasttext.train_supervised(input=train, wordNgrams=2, epoch=epochs, thread=2, verbose=0)
    train_s = time.monotonic() - t0
    t1 = time.monotonic()
    # model.test: (lines, precision@1, recall@1); with one label per line precision@1 is accuracy.
    # (It avoids model.predict, whose numpy use breaks on numpy 2 in some fastText builds.)
    n, p1, _ = model.test(test)
    return {"system": "fastText supervised", "library_version": dist,
            "params": {"wordNgrams": 2, "epoch": epochs, "lr": "default (0.1)", "thread": 2, "dim": model.dim,
                       "bucket": model.bucket},
            "rows_trained": rows, "train_seconds": train_s,
            "rows_per_s": rows * epochs / train_s,
            "rows_per_s_note": "rows × epochs / train time (row-epochs per second)",
            "rows_per_s_pass": rows / train_s,
            "rows_per_s_pass_note": "rows / train time (all 5 epochs): comparable with one-epoch systems",
            "test_seconds": time.monotonic() - t1, "test_rows": n, "test_accuracy": p1}


def worker_main(a) -> int:
    if a._worker == "sklearn":
        out = worker_sklearn(a._train, a._test)
    elif a._worker == "fasttext":
        out = worker_fasttext(a._train, a._test)
    elif a._worker == "convert-fasttext":
        out = worker_convert_fasttext(a._train, a._test)
    else:
        raise SystemExit(f"unknown worker {a._worker}")
    Path(a._result).write_text(json.dumps(out, indent=1))
    return 0


# --------------------------------------------------------------------------- report

def ratio(a, b):
    return (a / b) if (a is not None and b) else None


def summarise(doc: dict) -> tuple[str, dict]:
    runs = sorted(doc["lancetnic"], key=lambda r: r["corpus_rows"])
    base = doc.get("baselines", [])
    budget = doc["config"]["budget_bytes"]
    lines = ["| system | corpus rows | rows trained | wall s | rows/s (wall) | rows/s (train) | fit s | train s "
             "| peak trainer MiB | peak workers MiB | peak total MiB | val acc | test acc |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        st = r["stage_seconds"]
        lines.append(f"| lancetnic-flow | {r['corpus_rows']:,} | {r['rows_trained']:,} | {r['wall_seconds']:.1f} "
                     f"| {num(r['rows_per_s_wall'])} | {num(r['rows_per_s_epoch'])} | {num(st.get('fit'), '.1f')} "
                     f"| {num(st.get('train'), '.1f')} | {mib(r['peak_trainer_rss_bytes'])} "
                     f"| {mib(r['peak_workers_rss_bytes'])} | {mib(r['peak_total_rss_bytes'])} "
                     f"| {num(r.get('val_accuracy'), '.4f')} | {num(r.get('test_accuracy'), '.4f')} |")
    for b in base:
        extra = f" ({num(b['rows_per_s_pass'])}/pass)" if "rows_per_s_pass" in b else ""
        lines.append(f"| {b['system']} | {b['corpus_rows']:,} | {b['rows_trained']:,} | {b['wall_seconds']:.1f} "
                     f"| {num(b['rows_per_s_wall'])} | {num(b['rows_per_s'])}{extra} | – "
                     f"| {num(b['train_seconds'], '.1f')} | {mib(b['peak_trainer_rss_bytes'])} "
                     f"| {mib(b['peak_workers_rss_bytes'])} | {mib(b['peak_total_rss_bytes'])} | – "
                     f"| {num(b.get('test_accuracy'), '.4f')} |")
    checks: dict = {}
    if len(runs) >= 2:
        small, large = runs[0], runs[-1]
        mid = runs[len(runs) // 2] if len(runs) >= 3 else runs[0]
        growth = ratio(large["peak_total_rss_bytes"], small["peak_total_rss_bytes"])
        checks["peak_memory_flat"] = {
            "target": "peak total RSS at the largest size ≤ 1.25 × at the smallest",
            "smallest_bytes": small["peak_total_rss_bytes"], "largest_bytes": large["peak_total_rss_bytes"],
            "ratio": growth, "pass": growth is not None and growth <= 1.25}
        checks["peak_memory_under_budget"] = {
            "target": "peak total RSS at the largest size < --memory-budget",
            "largest_bytes": large["peak_total_rss_bytes"], "budget_bytes": budget,
            "share": ratio(large["peak_total_rss_bytes"], budget),
            "pass": large["peak_total_rss_bytes"] < budget}
        for key, what in (("rows_per_s_wall", "whole run"), ("rows_per_s_epoch", "training epoch")):
            q = ratio(large.get(key), mid.get(key))
            checks[f"throughput_holds_{what.replace(' ', '_')}"] = {
                "target": f"rows/s ({what}) at the largest size ≥ 0.8 × at the middle size",
                "middle_rows": mid["corpus_rows"], "largest_rows": large["corpus_rows"],
                "middle": mid.get(key), "largest": large.get(key), "ratio": q,
                "pass": q is not None and q >= 0.8}
    vs = {}
    for b in base:
        mine = next((r for r in runs if r["corpus_rows"] == b["corpus_rows"]), None)
        if mine is None:
            continue
        vs[b["system"]] = {
            "corpus_rows": b["corpus_rows"],
            "rows_per_s_wall_ratio": ratio(mine["rows_per_s_wall"], b["rows_per_s_wall"]),
            "rows_per_s_train_ratio": ratio(mine["rows_per_s_epoch"], b["rows_per_s"]),
            **({"rows_per_s_train_vs_per_pass_ratio": ratio(mine["rows_per_s_epoch"], b["rows_per_s_pass"])}
               if "rows_per_s_pass" in b else {}),
            "peak_total_rss_ratio": ratio(mine["peak_total_rss_bytes"], b["peak_total_rss_bytes"]),
            "test_accuracy_diff": (mine["test_accuracy"] - b["test_accuracy"])
            if mine.get("test_accuracy") is not None and b.get("test_accuracy") is not None else None,
            "test_accuracy_ratio": ratio(mine.get("test_accuracy"), b.get("test_accuracy")),
        }
    checks["vs_baselines"] = vs
    text = ["", "\n".join(lines), ""]
    text.append("rows/s (wall) = rows trained / process wall time (start to exit, everything included); rows/s "
                "(train) = lancetnic-flow: the training epoch's rows/s from metrics.json; sklearn: the one "
                "streaming partial_fit pass; fastText: rows × epochs / train time (rows / train time in brackets).")
    text.append("")
    text.append("Target checks")
    for k, c in checks.items():
        if k == "vs_baselines":
            continue
        r = c.get("ratio", c.get("share"))
        text.append(f"- [{'PASS' if c['pass'] else 'FAIL'}] {c['target']}: ratio {num(r, '.3f')}")
    for name, v in vs.items():
        text.append(f"- vs {name} ({v['corpus_rows']:,} rows): rows/s wall × {num(v['rows_per_s_wall_ratio'], '.2f')}"
                    f", rows/s train × {num(v['rows_per_s_train_ratio'], '.2f')}"
                    + (f" (× {num(v['rows_per_s_train_vs_per_pass_ratio'], '.2f')} per pass)"
                       if "rows_per_s_train_vs_per_pass_ratio" in v else "")
                    + f", peak memory × {num(v['peak_total_rss_ratio'], '.2f')}"
                    f", test accuracy {num(v['test_accuracy_diff'], '+.4f')} "
                    f"(× {num(v['test_accuracy_ratio'], '.3f')})")
    return "\n".join(text), checks


# --------------------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="25000,250000,2500000", help="corpus sizes in rows, comma-separated "
                   "(25k, 2.5M work too; default 25000,250000,2500000)")
    p.add_argument("--budget", default="4GiB", help="--memory-budget for lancetnic-flow (default 4GiB)")
    p.add_argument("--out", default=str(HERE / "out"), help="corpora, runs and results (default benchmarks/out)")
    p.add_argument("--skip-baselines", action="store_true", help="lancetnic-flow only")
    p.add_argument("--baselines", default="sklearn,fasttext", help="which baselines (default sklearn,fasttext)")
    p.add_argument("--baseline-size", default=None, help="corpus size for the baselines (default: the middle size)")
    p.add_argument("--test-rows", default="20000", help="held-out test rows (default 20000): by default the "
                   "seed-0 rows right after the largest corpus's rows")
    p.add_argument("--test-seed", type=int, default=None, help="take the test corpus from make-data with this "
                   "seed instead (note: another seed is another vocabulary, so accuracy falls to chance)")
    p.add_argument("--train-args", default="", help="extra arguments for `lancetnic-flow train`, one string")
    p.add_argument("--timeout", type=float, default=None, help="seconds before a subprocess is stopped")
    p.add_argument("--keep-cache", action="store_true", help="keep the shard caches (deleted after each run)")
    # internal: the baseline subprocesses run this same file
    p.add_argument("--_worker", help=argparse.SUPPRESS)
    p.add_argument("--_train", help=argparse.SUPPRESS)
    p.add_argument("--_test", help=argparse.SUPPRESS)
    p.add_argument("--_result", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    a = parse_args(argv)
    if a._worker:
        return worker_main(a)
    signal.signal(signal.SIGTERM, _sigterm)
    # Ctrl-C even where SIGINT came in ignored (a background job of a non-interactive shell)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sizes = sorted({parse_count(s) for s in a.sizes.split(",") if s.strip()})
    budget = parse_size(a.budget)
    out = Path(a.out).resolve()
    stamp = _dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    work = out / "runs" / stamp
    work.mkdir(parents=True, exist_ok=True)
    result_path = out / f"scaling-{stamp}.json"
    baseline_size = parse_count(a.baseline_size) if a.baseline_size else sizes[len(sizes) // 2]
    kinds = [] if a.skip_baselines else [k.strip() for k in a.baselines.split(",") if k.strip()]
    doc = {
        "benchmark": "scaling", "complete": False,
        "command": shlex.join([Path(sys.executable).name, os.path.relpath(__file__, ROOT)] +
                              (sys.argv[1:] if argv is None else list(argv))),
        "config": {"sizes": sizes, "budget": a.budget, "budget_bytes": budget, "classes": CLASSES,
                   "train_seed": TRAIN_SEED,
                   "test_seed": TRAIN_SEED if a.test_seed is None else a.test_seed, "test_rows": parse_count(a.test_rows),
                   "epochs": 1, "val_fraction": 0.05, "train_args": a.train_args, "baselines": kinds,
                   "baseline_size": baseline_size if kinds else None, "sample_interval_s": SAMPLE_INTERVAL,
                   "work_dir": str(work)},
        "machine": machine_info(), "corpora": {}, "lancetnic": [], "baselines": [], "errors": [],
    }

    def save() -> None:
        tmp = result_path.with_suffix(".json.partial")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, result_path)

    print(f"scaling benchmark → {result_path}\n  sizes {', '.join(map(human_rows, sizes))} · budget {a.budget}"
          f" · baselines {', '.join(kinds) or 'none'}" + (f" on {human_rows(baseline_size)}" if kinds else ""),
          flush=True)
    t_start = time.monotonic()
    code = 0
    try:
        logs = work / "logs"
        doc["corpora"] = prepare_corpora(out, sorted(set(sizes) | ({baseline_size} if kinds else set())),
                                         parse_count(a.test_rows), a.test_seed, logs)
        test = doc["corpora"]["test"]
        save()
        for n in sizes:
            print(f"lancetnic-flow, {human_rows(n)} rows", flush=True)
            try:
                doc["lancetnic"].append(run_lancetnic(a, doc["corpora"][str(n)], test, work))
            except RuntimeError as exc:
                print(f"  FAILED: {exc}", file=sys.stderr, flush=True)
                doc["errors"].append({"step": f"lancetnic {n}", "error": str(exc)})
                code = 1
            save()
        for kind in kinds:
            try:
                doc["baselines"].append(run_baseline(a, kind, doc["corpora"][str(baseline_size)], test, work))
            except (RuntimeError, OSError, ValueError) as exc:
                print(f"  FAILED: {exc}", file=sys.stderr, flush=True)
                doc["errors"].append({"step": f"baseline {kind}", "error": str(exc)})
                code = 1
            save()
        doc["complete"] = True
    except KeyboardInterrupt:
        print("\ninterrupted: stopping subprocesses …", file=sys.stderr, flush=True)
        cleanup_all()
        doc["errors"].append({"step": "all", "error": "interrupted"})
        code = 130
    finally:
        cleanup_all()
        doc["benchmark_seconds"] = time.monotonic() - t_start
        doc["machine"]["load_average_at_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
        if doc["lancetnic"] or doc["baselines"]:
            table, checks = summarise(doc)
            doc["checks"] = checks
            doc["markdown"] = table
            print(table)
        save()
        print(f"\nresults: {result_path}")
    return code


if __name__ == "__main__":
    sys.exit(main())
