"""dataflow/monitor.py: memory samples, the trainer's and the workers' peaks, and the peak of their sum."""
from __future__ import annotations

from types import SimpleNamespace

from lancetnic_flow.dataflow.monitor import MemoryMonitor
from lancetnic_flow.events import Events


def test_the_peak_of_trainer_and_workers_together_is_one_samples_sum_not_the_sum_of_their_peaks(monkeypatch):
    mon = MemoryMonitor(Events())
    samples = iter([(100, 500), (400, 100), (250, 250)])   # (trainer, workers): the workers peak first (the fit)
    now = {}

    def rss():
        now["trainer"], now["workers"] = next(samples)
        return SimpleNamespace(rss=now["trainer"])

    monkeypatch.setattr(mon.proc, "memory_info", rss)
    monkeypatch.setattr(mon, "_children_rss", lambda: now["workers"])
    for _ in range(3):
        mon.sample()
    assert (mon.trainer_peak, mon.workers_peak, mon.total_peak) == (400, 500, 600)


def test_a_sample_says_whether_the_scheduler_was_asked_for_its_workers_even_when_it_has_none(monkeypatch):
    mon = MemoryMonitor(Events(), client=object())
    monkeypatch.setattr(mon, "_children_rss", lambda: 0)
    monkeypatch.setattr("lancetnic_flow.dataflow.monitor.workers_info", lambda client, wait: {})
    asked, skipped = mon.sample(), mon.sample()   # the scheduler is asked every other sample
    assert asked["workers"] == [] and asked["workers_asked"] is True
    assert skipped["workers"] == [] and skipped["workers_asked"] is False

    def unreachable(client, wait):
        raise OSError("scheduler gone")

    monkeypatch.setattr("lancetnic_flow.dataflow.monitor.workers_info", unreachable)
    assert mon.sample()["workers_asked"] is False   # no answer: nothing known of the workers
