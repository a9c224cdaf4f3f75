"""The OrderedWindow on a real cluster (dataflow/window.py): never more than
its window of tasks in flight, results in submission order."""
from __future__ import annotations

from pathlib import Path

from lancetnic_flow.dataflow.window import OrderedWindow

from helpers import timed_task


def _max_concurrency(log_dir: Path) -> tuple[int, int]:
    spans = [tuple(map(float, p.read_text().split()[:2])) for p in log_dir.iterdir()]
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    cur = best = 0
    for _, d in points:
        cur += d
        best = max(best, cur)
    return best, len(spans)


def test_featurizer_never_has_more_than_window_tasks_in_flight(client, tmp_path):
    # 2 worker processes could run 2 tasks at once; a window of 1 must keep it to 1.
    log = tmp_path / "log"
    log.mkdir()
    jobs = [(i, 0.25) for i in range(6)]
    got = list(OrderedWindow(client, timed_task, jobs, 1, log_dir=str(log)))
    assert got == list(range(6))
    best, n = _max_concurrency(log)
    assert n == 6
    assert best == 1


def test_featurizer_uses_the_window_and_yields_in_submission_order(client, tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    # later jobs finish first; results still come back in submission order
    jobs = [(i, 0.6 - 0.1 * i) for i in range(6)]
    got = list(OrderedWindow(client, timed_task, jobs, 2, log_dir=str(log)))
    assert got == list(range(6))
    best, n = _max_concurrency(log)
    assert n == 6 and best == 2  # the two workers were both used, never more
