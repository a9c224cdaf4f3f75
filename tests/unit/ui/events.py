"""A scripted run as dashboard events (plan, fit, a live epoch, a cached
one), and a recording console: the inputs of the ui unit tests."""
from __future__ import annotations

import io

from rich.console import Console

from lancetnic_flow.ui.dashboard import DashboardState

GiB, MiB = 2**30, 2**20
PLAN = {"budget": 6 * GiB, "reserve": int(1.5 * GiB), "trainer": 768 * MiB, "workers": 2, "threads": 1,
        "worker_limit": 2 * GiB, "partition": 4 * MiB, "in_flight": 4, "external": False}


def worker(name: int, rss: float, managed: float = 0.0, spilled: float = 0.0) -> dict:
    return {"address": f"tcp://127.0.0.1:{4000 + name}", "name": str(name), "limit": 2 * GiB,
            "rss": int(rss * 2 * GiB), "managed": int(managed * 2 * GiB), "spilled": int(spilled * 2 * GiB)}


def memory(t: float, trainer: int = 400 * MiB, workers=None) -> tuple[str, dict]:
    ws = workers if workers is not None else [worker(0, 0.3, 0.1), worker(1, 0.75, 0.5, 0.05)]
    return "memory", {"t": t, "trainer_rss": trainer, "workers_rss": sum(w["rss"] for w in ws),
                      "available": 20 * GiB, "workers": ws, "trainer_peak": trainer, "workers_peak": 0}


def script(until_epoch: int = 1) -> list[tuple[str, dict]]:
    """A run as events: plan, fit 4 partitions, epoch 1 live (featurised), epoch 2 cached."""
    ev: list[tuple[str, dict]] = [
        ("stage", {"t": 0.0, "stage": "planning"}),
        ("plan", {"t": 2.0, "plan": PLAN, "text": "memory plan  budget 6.0 GiB · trainer 0.8\n  partition 4.0 MiB",
                  "dashboard": "http://127.0.0.1:8787/status"}),
        ("warning", {"t": 2.1, "message": "data.csv.gz is compressed: one partition, one worker"}),
        ("stage", {"t": 2.2, "stage": "fitting", "total": 4}),
    ]
    for i in range(4):
        ev.append(("progress", {"t": 3.0 + i, "stage": "fitting", "done": i + 1, "total": 4, "rows": 2500,
                                "bytes_read": 2_000_000}))
        ev.append(memory(3.5 + i))
    ev.append(("fitted", {"t": 7.5, "seconds": 5.3, "vocabulary": 19_951, "labels": 4, "docs": 9_000}))
    t = 8.0
    for epoch in (1, 2):
        ev.append(("stage", {"t": t, "stage": "training", "epoch": epoch, "epochs": 2, "total_rows": 9_000,
                             "source": "live" if epoch == 1 else "cache"}))
        rows = 0
        for b in range(35):
            t += 0.1
            rows = min(9_000, rows + 256)
            ev.append(("batch", {"t": t, "epoch": epoch, "rows": rows, "total_rows": 9_000,
                                 "loss": 1.2 / (1 + b / 5 + epoch), "tokens": 9_000}))
            if epoch == 1 and b % 9 == 0:
                ev.append(("featurized", {"t": t, "done": b // 9 + 1, "total": 4, "rows": 2500, "train_rows": 2250,
                                          "tokens": 80_000, "bytes_read": 2_000_000, "seconds": 1.0}))
            if b % 5 == 0:
                ev.append(memory(t, trainer=(420 + b) * MiB))
        if epoch > until_epoch:
            break
        ev.append(("stage", {"t": t, "stage": "evaluating", "epoch": epoch, "epochs": 2}))
        t += 0.5
        ev.append(("epoch", {"t": t, "epoch": epoch, "train_loss": 0.4 / epoch, "train_accuracy": 0.9,
                             "val_loss": 0.33 + 0.01 * epoch, "val_accuracy": 0.91 - 0.002 * epoch,
                             "val_macro_f1": 0.905, "rows": rows, "seconds": 3.5, "rows_per_s": 2_571.0}))
    return ev


def state_after(events, now: float | None = None) -> DashboardState:
    clock = [0.0]
    s = DashboardState(clock=lambda: clock[0])
    for kind, e in events:
        clock[0] = e["t"]
        s.update(kind, dict(e))
    if now is not None:
        clock[0] = now
    return s


def record(renderable, width: int) -> tuple[str, Console]:
    c = Console(record=True, force_terminal=True, width=width, color_system="truecolor", file=io.StringIO())
    c.print(renderable)
    return c.export_text(clear=False), c
