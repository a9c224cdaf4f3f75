#!/usr/bin/env python
"""Memory-pressure soak: one long `lancetnic-flow train` under a small budget.

Run it from the repository root, with the project's venv:

    .venv/bin/python benchmarks/soak.py                       # 3,000,000 rows, --memory-budget 1.5GiB, 2 epochs
    .venv/bin/python benchmarks/soak.py --rows 200k           # a quick check (a few minutes)
    .venv/bin/python benchmarks/soak.py --budget 2GiB --train-args "--workers 2"

What it does (see benchmarks/README.md for every field of the result):

1. ``lancetnic-flow make-data`` writes (or reuses) ``--out/data/corpus-N-c4-s0.csv``
   (CSV, 4 classes, seed 0), as ``scaling.py`` does.
2. ``lancetnic-flow train CORPUS --memory-budget BUDGET --epochs 2
   --val-fraction 0.05 --json-log LOG`` runs as a subprocess with a fresh
   shard cache, under ``scaling.py``'s process-tree sampler (every 0.5 s),
   extended here to keep each descendant's own RSS and lifetime.
3. From the sampler, the JSON log's ``plan``, ``memory``, ``stage`` and
   ``warning`` events, ``/proc/vmstat`` and ``dmesg``, it records: exit
   status; peak total RSS (trainer + every descendant) and when; peak trainer
   and per-worker RSS against the plan; worker restarts (a worker PID that
   goes away while the run goes on and a new one that appears; and, from the
   log, a worker name that changes address); OOM kills; and creep: each
   worker's unmanaged memory (RSS − Dask-managed bytes) in the first and last
   quarter of the featurisation epoch, and the trainer's RSS in the first and
   last quarter of epoch 2 (medians, and a least-squares slope in MiB per
   million rows).
4. Writes ``OUT/soak-<date>T<time>.json`` and prints a Markdown table with
   PASS/FAIL per target: exit status 0; peak total RSS < the budget; no
   worker restart; no OOM kill; creep < ``--creep-bound`` (10 %).

Ctrl-C (or SIGTERM) stops the run and every process under it, as in
``scaling.py``, writes what was measured and exits 130.
"""
from __future__ import annotations

import argparse
import bisect
import contextlib
import datetime as _dt
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scaling  # noqa: E402  (the sampler class is swapped in this module while the run is sampled)
from scaling import (CLASSES, HERE, ROOT, TRAIN_SEED, MiB, TreeSampler, _sigterm, cleanup_all, cli_cmd,  # noqa: E402
                     dir_bytes, ensure_corpus, human_rows, machine_info, parse_count, parse_size, run_sampled)

SOAK_INTERVAL = 0.5
CREEP_BOUND = 0.10
PROCESS_POINTS = 400
# LocalCluster starts its workers with multiprocessing's spawn; the resource
# tracker (and a forkserver, where used) are helpers, not workers.
WORKER_MARK = "multiprocessing.spawn"
HELPER_MARKS = ("resource_tracker", "forkserver")
# Lines in the CLI's stderr that mean memory trouble in Dask or the kernel.
TROUBLE = re.compile(r"restarting worker|was killed|killedworker|memoryerror|out of memory|\boom\b|"
                     r"unmanaged memory use is high|worker is at \d+% memory|paus(e|ing) worker", re.I)
OOM_LINE = re.compile(r"oom|out of memory|killed process", re.I)


# --------------------------------------------------------------------------- sampling each process

def _role(p: psutil.Process) -> str | None:
    """'worker', 'helper', 'other', or None while the cmdline is unreadable
    (right after fork, a spawned child still shows its parent's)."""
    try:
        cmd = " ".join(p.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None
    if any(h in cmd for h in HELPER_MARKS):
        return "helper"
    if WORKER_MARK in cmd:
        return "worker"
    return "other" if cmd and "lancetnic-flow" not in cmd else None


class SoakSampler(TreeSampler):
    """scaling.TreeSampler, plus every descendant's own RSS, peak and
    lifetime: per-worker peaks, and restarts seen as PIDs that come and go."""

    def __init__(self, pid: int, interval: float = SOAK_INTERVAL):
        super().__init__(pid, interval)
        self.t0_wall = time.time() - (time.monotonic() - self.t0)
        self.procs: dict[int, dict] = {}

    def sample(self) -> bool:
        if not super().sample():
            return False
        t = self.timeline[-1][0]
        for pid, p in list(self.seen.items()):
            try:
                rss = p.memory_info().rss
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                continue
            if not rss:  # a zombie waiting to be reaped
                continue
            rec = self.procs.setdefault(pid, {"pid": pid, "role": None, "cmdline": "", "first_seen_s": t,
                                              "peak_rss_bytes": 0, "peak_at_s": t, "rss": []})
            if rec["role"] in (None, "other"):
                role = _role(p)
                if role is not None:
                    rec["role"] = role
                    with contextlib.suppress(psutil.Error):
                        rec["cmdline"] = " ".join(p.cmdline())[:200]
            rec["last_seen_s"] = t
            rec["rss"].append((t, rss))
            if rss > rec["peak_rss_bytes"]:
                rec["peak_rss_bytes"], rec["peak_at_s"] = rss, t
        return True

    def result(self) -> dict:
        out = super().result()
        procs = []
        for rec in self.procs.values():
            step = max(1, len(rec["rss"]) // PROCESS_POINTS)
            procs.append({**{k: v for k, v in rec.items() if k != "rss"}, "role": rec["role"] or "other",
                          "samples": len(rec["rss"]), "rss_timeline": [list(r) for r in rec["rss"][::step]]})
        out["t0_wall"] = self.t0_wall
        out["root_pid"] = self.root.pid
        out["processes"] = sorted(procs, key=lambda r: r["first_seen_s"])
        # full resolution, for peaks per stage (the parent's 400-row timeline is for plots)
        out["timeline_full"] = [list(r) for r in self.timeline]
        return out


@contextlib.contextmanager
def sampled_with(cls: type) -> Iterator[None]:
    """Make scaling.run_sampled sample with ``cls`` (it builds its sampler by name)."""
    saved = scaling.TreeSampler
    scaling.TreeSampler = cls
    try:
        yield
    finally:
        scaling.TreeSampler = saved


# --------------------------------------------------------------------------- OOM evidence

def read_oom_counter() -> int | None:
    """The kernel's machine-wide count of OOM kills (Linux ≥ 4.13)."""
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def read_dmesg() -> list[str] | None:
    """The kernel ring buffer, or None where this user may not read it."""
    try:
        r = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.splitlines() if r.returncode == 0 else None


def oom_evidence(before: dict, returncode: int | None, pids: set[int]) -> dict:
    after_count, after_lines = read_oom_counter(), read_dmesg()
    new_lines: list[str] | None = None
    if before["dmesg"] is not None and after_lines is not None:
        seen = set(before["dmesg"])
        new_lines = [ln for ln in after_lines if ln not in seen and OOM_LINE.search(ln)]
    ours = [ln for ln in (new_lines or []) if any(re.search(rf"\b{pid}\b", ln) for pid in pids)]
    delta = (after_count - before["counter"]) if (after_count is not None and before["counter"] is not None) else None
    killed_root = returncode in (-9, 137)
    if new_lines is not None:
        oom = killed_root or bool(ours)
        basis = "dmesg lines naming a PID of the run, and the CLI's exit status"
    else:  # no dmesg: count any OOM kill on the machine during the run against us
        oom = killed_root or bool(delta)
        basis = "dmesg not readable: the machine-wide oom_kill counter, and the CLI's exit status"
    return {"oom_kill": oom, "basis": basis, "cli_killed_by_sigkill": killed_root,
            "dmesg_readable": after_lines is not None, "dmesg_new_oom_lines": new_lines,
            "dmesg_lines_naming_our_pids": ours, "vmstat_oom_kill_delta": delta}


# --------------------------------------------------------------------------- the JSON log

def read_log(path: Path, t0_wall: float) -> list[dict]:
    """Events with ``ts``: seconds since the sampler's start (the log's own
    ``elapsed`` starts at the first event, after imports)."""
    events = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return events
    for line in lines:
        try:
            e = json.loads(line)
            e["ts"] = _dt.datetime.fromisoformat(e["time"]).timestamp() - t0_wall
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line of a killed run
        events.append(e)
    return events


def stage_spans(events: list[dict], end: float) -> list[dict]:
    """Consecutive stages: name, epoch, start and end (s since start)."""
    marks = [e for e in events if e["event"] == "stage"]
    spans = []
    for i, e in enumerate(marks):
        label = e["stage"] + (f" {e['epoch']}" if e.get("epoch") else "") + (
            f" ({e['source']})" if e.get("source") else "")
        stop = marks[i + 1]["ts"] if i + 1 < len(marks) else end
        spans.append({"stage": e["stage"], "epoch": e.get("epoch"), "source": e.get("source"), "label": label,
                      "start_s": e["ts"], "end_s": stop})
    return spans


def stage_at(spans: list[dict], t: float) -> str:
    if not spans or t < spans[0]["start_s"]:
        return "start-up"
    for s in spans:
        if s["start_s"] <= t < s["end_s"]:
            return s["label"]
    return "shutdown"


def find_span(spans: list[dict], stage: str, epoch: int | None = None) -> dict | None:
    return next((s for s in spans if s["stage"] == stage and (epoch is None or s["epoch"] == epoch)), None)


def cumulative(events: list[dict], kind: str, a: float, b: float, *, running: bool, **match: Any
               ) -> list[tuple[float, float]]:
    """(t, rows so far) in [a, b]: ``running`` rows are already a running
    total (batch events), otherwise they are per item and summed."""
    pts, total = [(a, 0.0)], 0.0
    for e in events:
        if e["event"] != kind or not (a <= e["ts"] <= b) or any(e.get(k) != v for k, v in match.items()):
            continue
        total = float(e.get("rows") or 0) if running else total + float(e.get("rows") or 0)
        pts.append((e["ts"], total))
    return pts


def rows_at(progress: list[tuple[float, float]], t: float) -> float:
    ts = [p[0] for p in progress]
    i = bisect.bisect_right(ts, t)
    if i == 0:
        return progress[0][1]
    if i >= len(progress):
        return progress[-1][1]
    (t0, r0), (t1, r1) = progress[i - 1], progress[i]
    return r0 + (r1 - r0) * (t - t0) / (t1 - t0) if t1 > t0 else r1


def creep(points: list[tuple[float, float]], a: float, b: float, progress: list[tuple[float, float]],
          bound: float) -> dict:
    """Median of the first and the last quarter (by time) of ``points`` in
    [a, b], their change, and a least-squares slope in MiB per million rows."""
    pts = [(t, v) for t, v in points if a <= t <= b]
    q = (b - a) / 4
    first = [v for t, v in pts if t < a + q]
    last = [v for t, v in pts if t >= b - q]
    out: dict = {"window_s": [round(a, 1), round(b, 1)], "samples": len(pts)}
    if len(first) < 3 or len(last) < 3:
        out["note"] = "too few samples in a quarter"
        return out
    f, l_ = statistics.median(first), statistics.median(last)
    xs = [rows_at(progress, t) / 1e6 for t, _ in pts]
    ys = [v / MiB for _, v in pts]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else None
    change = (l_ - f) / f if f else None
    out.update(first_quarter_median_bytes=f, last_quarter_median_bytes=l_, change=change,
               slope_mib_per_million_rows=slope, rows=progress[-1][1] if progress else None,
               bound=bound, ok=change is not None and change < bound)
    return out


def worker_series(events: list[dict]) -> dict[str, dict]:
    """Per worker name: its addresses and (t, rss, managed, spilled) samples."""
    out: dict[str, dict] = {}
    for e in events:
        if e["event"] != "memory":
            continue
        for w in e.get("workers") or []:
            rec = out.setdefault(str(w.get("name")), {"addresses": [], "samples": []})
            if w.get("address") not in rec["addresses"]:
                rec["addresses"].append(w.get("address"))
            rec["samples"].append((e["ts"], w.get("rss") or 0, w.get("managed") or 0, w.get("spilled") or 0,
                                   w.get("limit") or 0))
    return out


# --------------------------------------------------------------------------- analysis

def analyse(res: dict, events: list[dict], bound: float, log_path: Path) -> dict:
    """Peaks per stage, worker peaks and restarts, warnings and creep, from
    the sampler's result and the run's JSON-log events."""
    tl = res["timeline_full"]
    end = tl[-1][0] if tl else 0.0
    spans = stage_spans(events, end)
    plan = next((e["plan"] for e in events if e["event"] == "plan"), None) or {}
    done_t = next((e["ts"] for e in events if e["event"] == "done"), None)

    # peaks, overall and per stage
    per_stage: dict[str, dict] = {}
    for t, root, kids, _n in tl:
        s = per_stage.setdefault(stage_at(spans, t), {"peak_total_rss_bytes": 0, "peak_trainer_rss_bytes": 0,
                                                      "peak_children_rss_bytes": 0})
        s["peak_total_rss_bytes"] = max(s["peak_total_rss_bytes"], root + kids)
        s["peak_trainer_rss_bytes"] = max(s["peak_trainer_rss_bytes"], root)
        s["peak_children_rss_bytes"] = max(s["peak_children_rss_bytes"], kids)
    for sp in spans:
        sp.update(seconds=sp["end_s"] - sp["start_s"], **per_stage.get(sp["label"], {}))

    # workers seen in the process tree, and restarts
    procs = res["processes"]
    workers = [p for p in procs if p["role"] == "worker"]
    run_end = done_t if done_t is not None else end
    gone_early = [p["pid"] for p in workers if p.get("last_seen_s", 0) < run_end - 2 * res["interval_s"]]
    expected = plan.get("workers") or 0
    log_workers = worker_series(events)
    log_restarts = sum(max(0, len(w["addresses"]) - 1) for w in log_workers.values())
    restarts = {"worker_pids_seen": len(workers), "workers_planned": expected,
                "restarts_from_tree": max(0, len(workers) - expected) if expected else None,
                "workers_gone_before_run_end": gone_early,
                "restarts_from_log": log_restarts,
                "log_worker_addresses": {n: w["addresses"] for n, w in log_workers.items()}}
    restarts["count"] = max(restarts["restarts_from_tree"] or 0, len(gone_early), log_restarts)

    warnings = [e.get("message") for e in events if e["event"] == "warning"]
    trouble = []
    with contextlib.suppress(OSError):
        for line in Path(res["log"]).read_text(errors="replace").splitlines()[1:]:
            if TROUBLE.search(line):
                trouble.append(line[:300])

    # creep: workers' unmanaged memory while featurising, the trainer's RSS in epoch 2
    feat = find_span(spans, "training", 1)
    ep2 = find_span(spans, "training", 2)
    fit = find_span(spans, "fitting")
    creeps: dict = {"bound": bound, "workers_featurising": {}, "workers_fitting": {}}
    if feat:
        prog = cumulative(events, "featurized", feat["start_s"], feat["end_s"], running=False)
        for name, w in log_workers.items():
            pts = [(t, rss - managed) for t, rss, managed, _s, _l in w["samples"]]
            creeps["workers_featurising"][name] = creep(pts, feat["start_s"], feat["end_s"], prog, bound)
    if fit:  # informational: the fit pass runs on the same workers
        prog = cumulative(events, "progress", fit["start_s"], fit["end_s"], running=False, stage="fitting")
        for name, w in log_workers.items():
            pts = [(t, rss - managed) for t, rss, managed, _s, _l in w["samples"]]
            creeps["workers_fitting"][name] = creep(pts, fit["start_s"], fit["end_s"], prog, bound)
    if ep2:
        prog = cumulative(events, "batch", ep2["start_s"], ep2["end_s"], running=True, epoch=2)
        pts = [(e["ts"], e["trainer_rss"]) for e in events if e["event"] == "memory"]
        creeps["trainer_epoch2"] = creep(pts, ep2["start_s"], ep2["end_s"], prog, bound)
    spilled = {n: max((s[3] for s in w["samples"]), default=0) for n, w in log_workers.items()}

    return {"plan": plan, "stages": spans, "restarts": restarts, "warnings": warnings,
            "log_trouble_lines": trouble[:30], "creep": creeps, "max_spilled_bytes": spilled,
            "peak_total_stage": stage_at(spans, res["peak_total_at_s"]),
            "peak_trainer_stage": stage_at(spans, res["peak_trainer_at_s"]),
            "workers": [{"pid": p["pid"], "peak_rss_bytes": p["peak_rss_bytes"], "peak_at_s": p["peak_at_s"],
                         "peak_stage": stage_at(spans, p["peak_at_s"]), "first_seen_s": p["first_seen_s"],
                         "last_seen_s": p.get("last_seen_s")} for p in workers],
            "json_log": str(log_path)}


def fmt_mib(n: float | None) -> str:
    return "–" if n is None else f"{n / MiB:,.0f} MiB"


def checks_of(doc: dict) -> list[dict]:
    run, an, budget = doc["run"], doc["analysis"], doc["config"]["budget_bytes"]
    cr = an["creep"]
    out = [
        {"target": "exit status 0", "pass": run["returncode"] == 0, "value": run["returncode"]},
        {"target": f"peak total RSS < budget ({fmt_mib(budget)})", "pass": run["peak_total_rss_bytes"] < budget,
         "value": run["peak_total_rss_bytes"]},
        {"target": "worker restarts == 0", "pass": an["restarts"]["count"] == 0, "value": an["restarts"]["count"]},
        {"target": "no OOM kill", "pass": not doc["oom"]["oom_kill"], "value": doc["oom"]["oom_kill"]},
    ]
    items = [(f"worker {n} unmanaged memory, featurisation", c) for n, c in cr["workers_featurising"].items()]
    items.append(("trainer RSS, epoch 2", cr.get("trainer_epoch2", {"note": "no epoch 2"})))
    for what, c in items:
        out.append({"target": f"creep < {cr['bound']:.0%}: {what}", "pass": bool(c.get("ok")),
                    "value": c.get("change"), "note": c.get("note")})
    return out


def markdown(doc: dict) -> str:
    run, an, plan = doc["run"], doc["analysis"], doc["analysis"]["plan"]
    budget = doc["config"]["budget_bytes"]
    t = lambda s: "–" if s is None else f"{s:,.0f} s"  # noqa: E731
    lines = [f"soak: {human_rows(doc['corpus']['rows'])} rows, --memory-budget {doc['config']['budget']}, "
             f"{doc['config']['epochs']} epochs; wall {t(run['wall_seconds'])}; plan: trainer "
             f"{fmt_mib(plan.get('trainer'))}, {plan.get('workers')} worker(s) × {fmt_mib(plan.get('worker_limit'))}, "
             f"partition {fmt_mib(plan.get('partition'))}", "",
             "| measure | value | plan / bound | verdict |", "|---|---|---|---|"]
    checks = {c["target"]: c for c in doc["checks"]}
    v = lambda key: "PASS" if checks[key]["pass"] else "FAIL"  # noqa: E731
    lines.append(f"| exit status | {run['returncode']} | 0 | {v('exit status 0')} |")
    pk = f"peak total RSS < budget ({fmt_mib(budget)})"
    lines.append(f"| peak total RSS (trainer + all descendants) | {fmt_mib(run['peak_total_rss_bytes'])} at "
                 f"{t(run['peak_total_at_s'])} ({an['peak_total_stage']}) | < {fmt_mib(budget)} budget; "
                 f"trainer + workers share {fmt_mib((plan.get('budget') or 0) - (plan.get('reserve') or 0))} "
                 f"| {v(pk)} |")
    share = plan.get("trainer")
    lines.append(f"| peak trainer RSS (CLI: torch, scheduler, nannies) | {fmt_mib(run['peak_trainer_rss_bytes'])} at "
                 f"{t(run['peak_trainer_at_s'])} ({an['peak_trainer_stage']}) | trainer share {fmt_mib(share)} | "
                 f"{'within plan' if share and run['peak_trainer_rss_bytes'] <= share else 'over plan'} |")
    limit = plan.get("worker_limit")
    for w in an["workers"]:
        lines.append(f"| peak RSS of worker pid {w['pid']} | {fmt_mib(w['peak_rss_bytes'])} at {t(w['peak_at_s'])} "
                     f"({w['peak_stage']}) | worker_limit {fmt_mib(limit)} | "
                     f"{'within plan' if limit and w['peak_rss_bytes'] <= limit else 'over plan'} |")
    r = an["restarts"]
    lines.append(f"| worker restarts | {r['count']} ({r['worker_pids_seen']} worker PID(s) for {r['workers_planned']} "
                 f"planned; {len(r['workers_gone_before_run_end'])} gone before the end; log: "
                 f"{r['restarts_from_log']} address change(s)) | 0 | {v('worker restarts == 0')} |")
    o = doc["oom"]
    dmesg = (f"readable, {len(o['dmesg_new_oom_lines'] or [])} new OOM line(s)" if o["dmesg_readable"]
             else "not readable")
    delta = o["vmstat_oom_kill_delta"]
    counter = "n/a" if delta is None else f"+{delta}"
    lines.append(f"| OOM kills | {'yes' if o['oom_kill'] else 'none'} (dmesg {dmesg}; machine-wide oom_kill "
                 f"counter {counter}) | none | {v('no OOM kill')} |")
    cr = an["creep"]
    for what, c, key in [(f"worker {n} unmanaged memory, featurisation (epoch 1)", c,
                          f"creep < {cr['bound']:.0%}: worker {n} unmanaged memory, featurisation")
                         for n, c in cr["workers_featurising"].items()] + [
            ("trainer RSS, epoch 2", cr.get("trainer_epoch2", {}), f"creep < {cr['bound']:.0%}: trainer RSS, epoch 2")]:
        if "change" in c:
            slope = c["slope_mib_per_million_rows"]
            val = (f"{fmt_mib(c['first_quarter_median_bytes'])} → {fmt_mib(c['last_quarter_median_bytes'])} "
                   f"({c['change']:+.1%}); slope {'–' if slope is None else f'{slope:+.1f}'} MiB per M rows")
        else:
            val = c.get("note", "not measured")
        lines.append(f"| {what}: first → last quarter median | {val} | < +{cr['bound']:.0%} | {v(key)} |")
    lines.append(f"| warning events / memory lines in stderr | {len(an['warnings'])} / {len(an['log_trouble_lines'])} "
                 f"| – | – |")
    lines += ["", "| stage | start s | seconds | peak total | peak trainer | peak descendants (workers, helpers) |",
              "|---|---:|---:|---:|---:|---:|"]
    for s in an["stages"]:
        lines.append(f"| {s['label']} | {s['start_s']:,.0f} | {s['seconds']:,.0f} | "
                     f"{fmt_mib(s.get('peak_total_rss_bytes'))} | {fmt_mib(s.get('peak_trainer_rss_bytes'))} | "
                     f"{fmt_mib(s.get('peak_children_rss_bytes'))} |")
    verdict = "PASS" if all(c["pass"] for c in doc["checks"]) else "FAIL"
    failed = [c["target"] for c in doc["checks"] if not c["pass"]]
    lines += ["", f"verdict: {verdict}" + (f" — failed: {'; '.join(failed)}" if failed else "")]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="3000000", help="corpus rows (3M, 200k work too; default 3000000)")
    p.add_argument("--budget", default="1.5GiB", help="--memory-budget for lancetnic-flow (default 1.5GiB)")
    p.add_argument("--epochs", type=int, default=2, help="epochs (default 2: epoch 1 featurises, epoch 2 reads "
                   "the cache)")
    p.add_argument("--out", default=str(HERE / "out"), help="corpus, run and results (default benchmarks/out)")
    p.add_argument("--interval", type=float, default=SOAK_INTERVAL, help="sampling interval in s (default 0.5)")
    p.add_argument("--creep-bound", type=float, default=CREEP_BOUND,
                   help="largest allowed rise, first to last quarter median (default 0.10)")
    p.add_argument("--train-args", default="", help="extra arguments for `lancetnic-flow train`, one string")
    p.add_argument("--timeout", type=float, default=None, help="seconds before the run is stopped")
    p.add_argument("--keep-cache", action="store_true", help="keep the shard cache (deleted at the end)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    a = parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    rows, budget = parse_count(a.rows), parse_size(a.budget)
    out = Path(a.out).resolve()
    stamp = _dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    work = out / "runs" / f"soak-{stamp}"
    work.mkdir(parents=True, exist_ok=True)
    result_path = out / f"soak-{stamp}.json"
    doc: dict = {
        "benchmark": "soak", "complete": False,
        "command": shlex.join([Path(sys.executable).name, os.path.relpath(__file__, ROOT)] +
                              (sys.argv[1:] if argv is None else list(argv))),
        "config": {"rows": rows, "budget": a.budget, "budget_bytes": budget, "epochs": a.epochs,
                   "val_fraction": 0.05, "classes": CLASSES, "seed": TRAIN_SEED, "sample_interval_s": a.interval,
                   "creep_bound": a.creep_bound, "train_args": a.train_args, "work_dir": str(work)},
        "machine": machine_info(), "errors": [],
    }

    def save() -> None:
        tmp = result_path.with_suffix(".json.partial")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, result_path)

    print(f"soak → {result_path}\n  {human_rows(rows)} rows · budget {a.budget} · {a.epochs} epochs", flush=True)
    code = 0
    t_start = time.monotonic()
    try:
        doc["corpus"] = ensure_corpus(out, rows, TRAIN_SEED, work / "logs")
        save()
        cache, log = work / "cache", work / "train.jsonl"
        shutil.rmtree(cache, ignore_errors=True)
        cmd = cli_cmd() + ["train", doc["corpus"]["path"], "--text", "text", "--label", "label",
                           "--memory-budget", a.budget, "--epochs", str(a.epochs), "--val-fraction", "0.05",
                           "--json-log", str(log), "--out", str(work), "--name", "soak",
                           "--cache", str(cache)] + shlex.split(a.train_args)
        before = {"counter": read_oom_counter(), "dmesg": read_dmesg()}
        print(f"  train … (log {log})", flush=True)

        class Sampler(SoakSampler):
            def __init__(self, pid: int):
                super().__init__(pid, a.interval)

        with sampled_with(Sampler):
            res = run_sampled(cmd, work / "train.log", timeout=a.timeout)
        pids = {p["pid"] for p in res["processes"]} | {res["root_pid"]}
        doc["oom"] = oom_evidence(before, res["returncode"], pids)
        events = read_log(log, res["t0_wall"])
        doc["analysis"] = analyse(res, events, a.creep_bound, log)
        metrics_path = work / "soak" / "metrics.json"
        metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
        res.pop("timeline_full")
        doc["run"] = {**res, "rows": metrics.get("rows"), "run_seconds": metrics.get("seconds"),
                      "stage_seconds": metrics.get("stage_seconds"), "val_accuracy": metrics.get("val_accuracy"),
                      "epochs": [{k: e.get(k) for k in ("epoch", "rows", "seconds", "rows_per_s", "val_accuracy")}
                                 for e in metrics.get("epochs", [])],
                      "reported_memory": metrics.get("memory"), "cache_bytes": dir_bytes(cache)}
        if not a.keep_cache:
            shutil.rmtree(cache, ignore_errors=True)
        doc["checks"] = checks_of(doc)
        doc["markdown"] = markdown(doc)
        doc["verdict"] = "PASS" if all(c["pass"] for c in doc["checks"]) else "FAIL"
        doc["complete"] = True
        print(doc["markdown"])
        code = 0 if doc["verdict"] == "PASS" else 1
    except KeyboardInterrupt:
        print("\ninterrupted: stopping subprocesses …", file=sys.stderr, flush=True)
        cleanup_all()
        doc["errors"].append({"step": "all", "error": "interrupted"})
        code = 130
    except (RuntimeError, OSError) as exc:
        print(f"FAILED: {exc}", file=sys.stderr, flush=True)
        doc["errors"].append({"step": "soak", "error": str(exc)})
        code = 1
    finally:
        cleanup_all()
        doc["benchmark_seconds"] = time.monotonic() - t_start
        doc["machine"]["load_average_at_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
        save()
        print(f"\nresults: {result_path}")
    return code


if __name__ == "__main__":
    sys.exit(main())
