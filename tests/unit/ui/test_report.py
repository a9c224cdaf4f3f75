"""ui/report.py and ui/jsonlog.py: the plain log prints milestones and a
status line per interval, --quiet only the summary, the JSON log one object
per event (NaN as null) that replays into the dashboard state, and messages
with square brackets print literally in every view."""
from __future__ import annotations

import io
import json
import re

import numpy as np
from rich.console import Console

from lancetnic_flow.ui.dashboard import DashboardState, LiveDashboard, replay
from lancetnic_flow.ui.report import ConsoleReport, PlainLog

from .events import script


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


def test_plain_log_prints_an_epochs_header_once_when_ddp_segments_announce_it_again():
    out = io.StringIO()
    log = PlainLog(Console(file=out, force_terminal=False, width=300), interval=100.0)
    stage = {"stage": "training", "epochs": 2, "total_rows": 4000, "source": "cluster"}
    for t, epoch in ((0.0, 1), (2.0, 1), (4.0, 1), (6.0, 2)):   # epoch 1 in three segments (periodic checkpoints)
        log("stage", {**stage, "t": t, "epoch": epoch})
    lines = out.getvalue().splitlines()
    assert [line for line in lines if line.startswith("training epoch")] == ["training epoch 1/2", "training epoch 2/2"]


def test_a_commands_result_line_is_left_to_its_event_when_the_json_log_is_on_stdout(monkeypatch):
    # predict --json-log - printed "wrote N rows ..." beside the log although the console view is off
    out, stdout = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdout", stdout)
    console = Console(file=out, force_terminal=False, width=200)
    to_stdout = ConsoleReport(console, json_log="-")
    to_stdout.say("wrote 4 rows to p.csv")
    assert out.getvalue() == ""
    for report in (ConsoleReport(console), ConsoleReport(console, quiet=True)):
        report.say("wrote 4 rows to p.csv")
    assert out.getvalue().count("wrote 4 rows to p.csv") == 2


def test_plain_log_says_one_partition_in_the_singular():
    # a small input is one partition: it said "fitting features over 1 partitions"
    out = io.StringIO()
    log = PlainLog(Console(file=out, force_terminal=False, width=300), interval=1.0, state=DashboardState())
    log("stage", {"stage": "fitting", "total": 1})
    log("stage", {"stage": "fitting", "total": 3})
    assert out.getvalue().splitlines() == ["fitting features over 1 partition", "fitting features over 3 partitions"]
