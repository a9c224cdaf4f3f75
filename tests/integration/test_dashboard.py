"""The terminal experience of the real CLI: the JSON log of a real run, a
real run under a pseudo-terminal, and a user error as a JSON event. The
dashboard's state and rendering from scripted events are tests/unit/ui/'s."""
from __future__ import annotations

import fcntl
import json
import os
import re
import struct
import subprocess
import sys
import termios
import time

import pytest
from rich.cells import cell_len

from lancetnic_flow.data.synth import write_corpus

from helpers import CLUSTER


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
    # On a LocalCluster (3,000 rows would run in this process): the memory panel's worker rows.
    base = [sys.executable, "-m", "lancetnic_flow", "train", str(d / "c.csv"), *CLUSTER, "--run-on", "cluster",
            "--epochs", "1", "--features", "tfidf", "--out", str(d / "runs")]
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
