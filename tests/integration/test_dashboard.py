"""The terminal experience: the dashboard's state and rendering from scripted
events (80 and 200 columns), the plain log, the JSON log of a real CLI run,
and a real run under a pseudo-terminal."""
from __future__ import annotations

import fcntl
import io
import json
import os
import re
import struct
import subprocess
import sys
import termios
import time

import numpy as np
import pytest
from rich.cells import cell_len
from rich.console import Console

from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.ui.dashboard import (DashboardState, LiveDashboard, Meter, mem_style, render, render_summary,
                                         replay)
from lancetnic_flow.ui.report import ConsoleReport, PlainLog

from helpers import CLUSTER

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


@pytest.mark.parametrize("width", [80, 200])
def test_dashboard_renders_progress_model_and_memory_within_the_width(width):
    s = state_after(script(until_epoch=1))   # mid-epoch 2, after epoch 1's validation
    text, _ = record(render(s, width), width)
    for needle in ("lancetnic-flow", "planning", "fitting", "training epoch 2/2", "evaluating", "saving",
                   "fit", "featurise", "rows", "epochs", "/s", "ETA", "throughput", "rows/s", "tokens/s",
                   "MB/s read", "model", "train loss", "last val", "acc 0.9080", "F1 0.9050", "best",
                   "loss 0.3400", "memory", "trainer", "worker 0", "worker 1", "machine", "available",
                   "budget 6.0G = OS 1.5G + trainer 768M + 2 × 2.0G", "dask dashboard",
                   "http://127.0.0.1:8787/status", "spill at 70%", "pause at 80%", "warning:"):
        assert needle in text, (needle, text)
    assert "━" in text and "█" in text and "▒" in text and "░" in text and "┊" in text   # bars, segments, ticks
    assert "8,960/9,000" in text or "8,960" in text or "8.960" in text or "/9,000" in text
    lines = text.splitlines()
    assert all(cell_len(line) <= width for line in lines), max(lines, key=cell_len)
    if width >= 120:
        assert "managed" in text and "unmanaged" in text and "spilled" in text  # the wide worker legend in full
        assert any("lancetnic-flow" in line and "model" in line for line in lines)  # side by side
    else:
        assert not any("lancetnic-flow" in line and "model" in line for line in lines)


def test_the_state_follows_the_run_and_rates_come_from_event_times():
    s = state_after(script(until_epoch=1))
    assert s.stage == "training" and s.epoch == 2 and s.epochs_done == 1
    assert s.fit_done == s.fit_total == 4 and s.feat_done == s.feat_total == 4
    assert s.bytes_read == 8 * 2_000_000
    assert s.best["epoch"] == 1 and s.last_epoch["epoch"] == 1
    assert [w["name"] for w in s.workers] == ["0", "1"]
    # 256 rows per 0.1 s of event time
    assert s.rows_rate() == pytest.approx(2560, rel=0.1)
    assert s.tokens_meter.rate(s.now()) == pytest.approx(90_000, rel=0.1)
    # a stalled counter decays to 0 instead of showing its last rate forever
    assert s.rows_meter.rate(s.now() + 60) == 0.0
    # the monitor sends an empty worker list every other sample: the last list stays
    s.update(*memory(100.0, workers=[]))
    assert len(s.workers) == 2


def test_meter_and_memory_colours():
    m = Meter(window=10, every=0.5)
    for i in range(40):
        m.add(i * 0.25, i * 100)
    assert m.rate(39 * 0.25) == pytest.approx(400, rel=0.05)
    assert mem_style(0.3) == "green" and mem_style(0.65) == "yellow"
    assert mem_style(0.75) == "dark_orange" and mem_style(0.85) == "bold red"


def test_workers_are_coloured_as_they_near_spill_and_pause():
    s = state_after(script(until_epoch=0))
    for frac, colour in ((0.3, "green"), (0.75, "dark_orange"), (0.85, "bold red")):
        s.update(*memory(20.0, workers=[worker(0, frac, 0.6 * frac)]))
        frame = render(s, 80)
        line = next(line for line in frame.lines if "worker 0" in line.plain)
        assert any(str(span.style) == colour for span in line.spans), (frac, line.spans)
        assert f"{frac:.0%}" in line.plain


def test_summary_has_metrics_rows_time_memory_run_and_predict():
    metrics = {"val_accuracy": 0.9078, "val_macro_f1": 0.9057, "val_loss": 0.3252, "best_epoch": 1,
               "monitor": "val_loss", "model": "ScalpelMC", "vocabulary": 19_951,
               "rows": {"read": 60_000, "trained": 53_900, "validated": 5_973, "skipped": {"empty_text": 120,
                                                                                          "malformed": 7}},
               "stage_seconds": {"cluster_start": 4.2, "fit": 10.1, "train": 16.5, "save": 2.0}, "seconds": 33.0,
               "epochs": [{}, {}],
               "memory": {"budget_bytes": 6 * GiB, "trainer_peak_rss_bytes": 436 * MiB,
                          "workers_peak_bytes": 900 * MiB, "plan": PLAN}}
    for width in (80, 200):
        text, _ = record(render_summary({"run": "/runs/20260101-000000", "metrics": metrics}, width), width)
        for needle in ("training finished", "accuracy", "0.9078", "macro-F1", "read", "60,000", "trained",
                       "validated", "skipped", "empty_text", "malformed", "cluster start", "fit", "train",
                       "save", "total", "33.0s", "peak memory", "trainer", "436M", "57% of its 768M",
                       "workers", "900M", "budget", "6.0G", "run      /runs/20260101-000000",
                       "lancetnic-flow predict /runs/20260101-000000 --text '...'"):
            assert needle in text, (width, needle, text)
        assert all(cell_len(line) <= width for line in text.splitlines())


def test_plain_log_prints_milestones_and_a_status_line_every_interval():
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=300)
    clock = [0.0]
    log = PlainLog(console, interval=1.0, state=DashboardState(clock=lambda: clock[0]))
    for kind, e in script(until_epoch=2):
        clock[0] = e["t"]
        log(kind, dict(e))
    lines = out.getvalue().splitlines()
    text = out.getvalue()
    assert "\x1b[" not in text   # no escape codes in logs
    assert lines[0].startswith("memory plan")
    assert "dask dashboard  http://127.0.0.1:8787/status" in lines
    assert "warning: data.csv.gz is compressed: one partition, one worker" in lines
    assert "fitting features over 4 partitions" in lines
    assert "features  19,951 inputs · 4 classes · 9,000 training rows (in 5.3s)" in lines
    assert "training epoch 1/2 (featurising live)" in lines and "training epoch 2/2 (from the shard cache)" in lines
    assert "evaluating epoch 1/2" in lines
    assert any(line.startswith("epoch 1  train loss 0.4000 · val loss 0.3400 · acc 0.9080") for line in lines)
    status = [line for line in lines if line.startswith("[0:")]
    assert any("fitting 2/4 partitions" in line for line in status)
    training = [line for line in status if "training epoch 1/2" in line]
    assert training and all(k in training[-1] for k in ("rows/s", "tokens/s", "loss", "memory trainer",
                                                        "workers", "available", "featurised"))
    # rows in the status lines only grow within an epoch
    seen = [int(re.search(r"rows ([\d,]+)/", line).group(1).replace(",", "")) for line in training]
    assert seen == sorted(seen)


def test_quiet_prints_only_the_summary_and_json_log_writes_one_object_per_event(tmp_path):
    out = io.StringIO()
    rep = ConsoleReport(Console(file=out, force_terminal=False, width=120), quiet=True,
                        json_log=str(tmp_path / "log.jsonl"))
    for kind, e in script(until_epoch=1):
        rep(kind, dict(e))
    rep("done", {"t": 30.0, "run": "/r/x", "metrics": {"val_accuracy": np.float32(0.5), "val_loss": float("nan"),
                                                       "rows": {"read": 10, "trained": 9, "validated": 1,
                                                                "skipped": {}}, "memory": {}, "stage_seconds": {}}})
    rep.finish()
    assert out.getvalue().lstrip().startswith("╭─ training finished") and "/r/x" in out.getvalue()
    recs = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert recs[0]["event"] == "stage" and recs[0]["elapsed"] == 0.0 and "t" not in recs[0]
    assert recs[-1]["event"] == "done" and recs[-1]["metrics"]["val_accuracy"] == 0.5
    assert recs[-1]["metrics"]["val_loss"] is None          # NaN → null
    # replaying the log rebuilds the dashboard's state
    s = replay((tmp_path / "log.jsonl").read_text().splitlines())
    assert s.stage == "done" and s.epochs_done == 1 and s.fit_total == 4


def test_event_handling_is_cheap():
    """The listener only updates state: many thousands of batch events a second."""
    dash = LiveDashboard(Console(file=io.StringIO(), force_terminal=True, width=120))
    e = {"epoch": 1, "rows": 0, "total_rows": 10**6, "loss": 0.5, "tokens": 5000}
    n, t0 = 20_000, time.perf_counter()
    for i in range(n):
        e["rows"], e["t"] = i * 256, t0 + i * 1e-3
        dash("batch", e)
    rate = n / (time.perf_counter() - t0)
    assert rate > 20_000, rate
    assert not dash.started   # a batch alone does not start the display


# ------------------------------------------------------------ the real CLI


def _cli_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return {**env, "PYTHONWARNINGS": "ignore", "TERM": "xterm-256color", **extra}


def _spawn_in_pty(args: list[str], cols: int, rows: int) -> tuple[subprocess.Popen, int]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    p = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=_cli_env(), start_new_session=True,
                         close_fds=True)
    os.close(slave)
    return p, master


def _read_all(master: int, p: subprocess.Popen, timeout: float) -> bytes:
    import select

    buf, end = bytearray(), time.monotonic() + timeout
    while time.monotonic() < end:
        r, _, _ = select.select([master], [], [], 0.5)
        if r:
            try:
                data = os.read(master, 65536)
            except OSError:   # EIO: the child closed the terminal
                break
            if not data:
                break
            buf += data
        elif p.poll() is not None:
            break
    os.close(master)
    return bytes(buf)


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    """Two real runs at once: JSON log to stdout (a pipe), and the live dashboard in a 100×40 pty
    that also writes a JSON log to a file."""
    d = tmp_path_factory.mktemp("dash")
    write_corpus(str(d / "c.csv"), 3000, classes=4, seed=3)
    # A fitted vocabulary: its epoch 1 featurises live, so every kind of event occurs.
    base = [sys.executable, "-m", "lancetnic_flow", "train", str(d / "c.csv"), *CLUSTER, "--epochs", "1",
            "--features", "tfidf", "--out", str(d / "runs")]
    t0 = time.monotonic()
    piped = subprocess.Popen([*base, "--cache", str(d / "cache1"), "--name", "json", "--json-log"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_cli_env())
    tty, master = _spawn_in_pty([*base, "--cache", str(d / "cache2"), "--name", "tty", "--json-log",
                                 str(d / "tty.jsonl")], 100, 40)
    raw = _read_all(master, tty, 240)
    tty.wait(timeout=60)
    out, err = piped.communicate(timeout=240)
    return {"dir": d, "json": (piped.returncode, out, err), "tty": (tty.returncode, raw.decode("utf-8", "replace")),
            "seconds": time.monotonic() - t0}


def test_json_log_of_a_real_run_is_one_event_per_line(cli_runs):
    rc, out, err = cli_runs["json"]
    assert rc == 0, err
    recs = [json.loads(line) for line in out.splitlines()]   # every line is JSON
    assert recs and all("event" in r and "elapsed" in r and "time" in r for r in recs)
    kinds = [r["event"] for r in recs]
    assert kinds[0] == "stage" and kinds[-1] == "done"
    for needed in ("plan", "progress", "fitted", "featurized", "batch", "epoch", "memory"):
        assert needed in kinds, needed
    elapsed = [r["elapsed"] for r in recs]
    assert elapsed == sorted(elapsed) or max(a - b for a, b in zip(elapsed, elapsed[1:])) < 1.0
    fit = [r["done"] for r in recs if r["event"] == "progress"]
    assert fit == list(range(1, len(fit) + 1)) and fit[-1] == recs[kinds.index("progress")]["total"]
    feat = [r["done"] for r in recs if r["event"] == "featurized"]
    assert feat == sorted(feat) and feat[-1] == [r for r in recs if r["event"] == "featurized"][-1]["total"]
    assert all(r["bytes_read"] > 0 for r in recs if r["event"] in ("progress", "featurized"))
    rows = [r["rows"] for r in recs if r["event"] == "batch"]
    assert rows == sorted(rows) and rows[-1] > 2000
    done = recs[-1]
    assert done["metrics"]["rows"]["read"] == 3000 and done["metrics"]["val_accuracy"] is not None
    assert os.path.isdir(done["run"])
    # the console view is off: stderr carries no dashboard, no summary
    assert "training finished" not in err and "memory plan" not in err


def test_live_dashboard_in_a_pseudo_terminal(cli_runs):
    rc, raw = cli_runs["tty"]
    assert rc == 0, raw[-3000:]
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
    assert "\x1b[2K" in raw or "\x1b[1A" in raw, "the live area is redrawn in place"
    frames = text.count("╭─ lancetnic-flow")
    assert frames >= 3, frames
    assert text.count("╭─ memory") >= 3 and "worker 0" in text and "trainer" in text and "budget 3.0G" in text
    assert "━" in text and "█" in text
    # it updates: the clock ticks and the panels change between frames
    clocks = set(re.findall(r"│ planning.*?(\d+:\d\d) │", text))
    assert len(clocks) >= 2, clocks
    assert "memory plan" in text and "epoch 1  train loss" in text
    assert "training finished" in text and "lancetnic-flow predict" in text
    assert all(cell_len(line) <= 100 for line in text.replace("\r", "\n").splitlines())
    # the JSON log went to the file at the same time
    recs = [json.loads(line) for line in (cli_runs["dir"] / "tty.jsonl").read_text().splitlines()]
    assert recs[-1]["event"] == "done"


def test_json_log_reports_user_errors_as_an_event(tmp_path):
    p = subprocess.run([sys.executable, "-m", "lancetnic_flow", "make-data", str(tmp_path / "x.csv"), "--rows", "0",
                        "--json-log"], capture_output=True, text=True, env=_cli_env(), timeout=120)
    assert p.returncode == 2
    recs = [json.loads(line) for line in p.stdout.splitlines()]
    assert recs[-1]["event"] == "error" and recs[-1]["status"] == 2 and "--rows" in recs[-1]["message"]
    assert p.stderr.count("error:") == 1 and "Traceback" not in p.stderr


def test_messages_with_square_brackets_print_literally_in_every_view():
    """A library error quoting '[/__w/.../pair.cc:152]' once crashed the error
    report itself (Rich read it as a closing markup tag)."""
    from lancetnic_flow.ui.dashboard import LiveDashboard

    gloo = "RuntimeError: [/__w/pytorch/third_party/gloo/transport/tcp/pair.cc:152] Connection refused"
    out = io.StringIO()
    rep = ConsoleReport(Console(file=out, force_terminal=False, width=200), quiet=True)
    rep.error(gloo, "check [bold]the[/bold] address")
    text = out.getvalue()
    assert gloo in text and "check [bold]the[/bold] address" in text

    for view in (PlainLog(Console(file=(buf := io.StringIO()), force_terminal=False, width=200)),
                 LiveDashboard(Console(file=(buf2 := io.StringIO()), force_terminal=True, width=200))):
        view("warning", {"message": f"shard s3://b/[red]x[/red].npz is damaged; {gloo}", "t": 1.0})
        view("resumed", {"run": "runs/[x]", "epoch": 2, "batches": 3, "step": 9, "t": 2.0})
        if isinstance(view, LiveDashboard):
            view.stop()
    for written in (buf.getvalue(), buf2.getvalue()):
        assert "s3://b/[red]x[/red].npz" in written and "pair.cc:152]" in written
