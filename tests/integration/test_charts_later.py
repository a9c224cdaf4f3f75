"""The command line ends once a run is saved; its charts follow, drawn by a
detached copy of the process (``--wait-for-plots`` draws them first). The run
folder never misses what the run names, and a chart that fails says so in the
folder instead of vanishing."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from lancetnic_flow.runs.plots import CHARTS_FAILED, PlotJob, can_detach, draw_detached

from helpers import charts_drawn, cli

PNG = b"\x89PNG\r\n\x1a\n"
RUN = ["--epochs", "2", "--seed", "0"]

pytestmark = pytest.mark.skipif(not can_detach(), reason="charts are drawn after the run on Linux only")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("later")
    assert cli("make-data", "d.csv", "--rows", "1200", "--classes", "3", cwd=d).returncode == 0
    return d


def _done(stdout: str) -> dict:
    return next(e for e in map(json.loads, (x for x in stdout.splitlines() if x.startswith("{")))
                if e["event"] == "done")


def test_train_ends_with_the_run_saved_and_its_charts_follow_from_a_detached_process(corpus):
    p = cli("train", "d.csv", *RUN, "--out", "runs", "--name", "later", "--json-log", cwd=corpus)
    assert p.returncode == 0, p.stderr[-2000:]
    run = corpus / "runs" / "later"
    done = _done(p.stdout)
    charts = done["charts"]
    # What the run names as saved is there when the command ends: the model, metrics, the tables.
    for name in ("model.json", "model.safetensors", "metrics.json", "history.csv", "per_class.csv", "top_terms.csv"):
        assert (run / name).exists(), name
    assert sorted(charts["files"]) == ["accuracy.png", "class_distribution.png", "confusion_matrix.png",
                                       "loss.png", "per_class.png", "top_terms.png"]
    assert charts["pid"] != done.get("pid", os.getpid())
    assert charts_drawn(p.stdout) == charts["pid"]
    metrics = json.loads((run / "metrics.json").read_text())
    assert sorted(metrics["plots"]) == sorted(charts["files"] + ["per_class.csv", "top_terms.csv"])
    for name in metrics["plots"]:
        assert (run / name).stat().st_size > 0, name
    for name in charts["files"]:
        assert (run / name).read_bytes()[:8] == PNG, name
    assert not (run / CHARTS_FAILED).exists()


def test_wait_for_plots_draws_them_before_the_command_ends(corpus):
    p = cli("train", "d.csv", *RUN, "--out", "runs", "--name", "waited", "--wait-for-plots", "--json-log",
            cwd=corpus)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "charts" not in _done(p.stdout)
    run = corpus / "runs" / "waited"
    for name in ("loss.png", "accuracy.png", "confusion_matrix.png", "per_class.png", "class_distribution.png",
                 "top_terms.png"):
        assert (run / name).read_bytes()[:8] == PNG, name


def test_the_summary_says_the_charts_are_being_drawn_and_no_plots_draws_none(corpus):
    p = cli("train", "d.csv", *RUN, "--out", "runs", "--name", "told", cwd=corpus)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "6 drawing in the background, pid" in p.stdout + p.stderr
    charts_drawn(p.stdout + p.stderr)
    p = cli("train", "d.csv", *RUN, "--out", "runs", "--name", "none", "--no-plots", "--json-log", cwd=corpus)
    assert p.returncode == 0 and "charts" not in _done(p.stdout)
    assert not list((corpus / "runs" / "none").glob("*.png"))


def test_a_chart_that_fails_in_the_detached_process_is_named_in_the_folder_and_the_others_are_written(tmp_path):
    def ok(name: str):
        return lambda: (tmp_path / name).write_bytes(PNG)

    def broken():
        raise ValueError("no room on the canvas")

    jobs = [PlotJob([str(tmp_path / "a.png")], ok("a.png"), True),
            PlotJob([str(tmp_path / "b.png")], broken, True),
            PlotJob([str(tmp_path / "c.png")], ok("c.png"), True)]
    pid = draw_detached(str(tmp_path), jobs)
    assert pid and charts_drawn(f"drawing in the background, pid {pid}") == pid
    assert (tmp_path / "a.png").exists() and (tmp_path / "c.png").exists() and not (tmp_path / "b.png").exists()
    assert (tmp_path / CHARTS_FAILED).read_text() == "b.png: ValueError: no room on the canvas\n"


def test_the_detached_process_leaves_the_callers_session_and_output_and_no_zombie(tmp_path):
    seen = tmp_path / "seen"

    def report():
        seen.write_text(json.dumps({"sid": os.getsid(0), "pid": os.getpid(),
                                    "stdout": os.readlink("/proc/self/fd/1")}))
        print("not on the caller's terminal")

    children = _children()
    pid = draw_detached(str(tmp_path), [PlotJob([str(seen)], report, True)])
    # The intermediate child was reaped here: nothing of it is left as this process's zombie.
    assert _children() == children
    charts_drawn(f"drawing in the background, pid {pid}")
    got = json.loads(seen.read_text())
    assert got["pid"] == pid and got["sid"] != os.getsid(0)
    assert got["stdout"] == os.devnull


def _children() -> set[int]:
    """This process's child processes, zombies included (from /proc)."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                out.add(int(d))
    return out
