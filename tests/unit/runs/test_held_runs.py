"""The loaded runs a process keeps: least recently used dropped first, within a byte budget."""
from __future__ import annotations

from lancetnic_flow.dataflow.plan import THRESHOLDS
from lancetnic_flow.runs.held_runs import HeldRuns, room_for_runs, worker_memory

MiB = 1 << 20


def test_runs_that_fit_the_budget_are_all_kept():
    held = HeldRuns()
    for name in "ab":
        held.make_room(name, 10, 30)
        held.put((name, "s"), name.upper(), 10)
    held.make_room("c", 10, 30)
    held.put(("c", "s"), "C", 10)
    assert list(held) == [("a", "s"), ("b", "s"), ("c", "s")] and held.bytes == 30


def test_the_least_recently_used_run_is_dropped_first_when_another_would_pass_the_budget():
    held = HeldRuns()
    for name in "ab":
        held.make_room(name, 10, 20)
        held.put((name, "s"), name.upper(), 10)
    assert held.get(("a", "s")) == "A"   # a used last: b is the least recently used
    held.make_room("c", 10, 20)
    held.put(("c", "s"), "C", 10)
    assert list(held) == [("a", "s"), ("c", "s")] and held.bytes <= 20


def test_what_is_kept_never_passes_the_budget_however_many_runs_were_served():
    held = HeldRuns()
    for i in range(50):
        held.make_room(f"run{i}", 7, 20)
        held.put((f"run{i}", "s"), i, 7)
        assert held.bytes <= 20
    assert list(held) == [("run48", "s"), ("run49", "s")]


def test_a_run_larger_than_the_budget_is_kept_alone():
    held = HeldRuns()
    held.make_room("a", 5, 10)
    held.put(("a", "s"), "A", 5)
    held.make_room("big", 50, 50)
    held.put(("big", "s"), "BIG", 50)
    assert list(held) == [("big", "s")]


def test_a_run_written_again_replaces_its_older_copy():
    held = HeldRuns()
    held.make_room("a", 5, 100)
    held.put(("a", "old"), "A1", 5)
    held.make_room("a", 5, 100)
    assert ("a", "old") not in held
    held.put(("a", "new"), "A2", 5)
    assert list(held) == [("a", "new")]


def test_a_worker_keeps_other_runs_in_the_band_between_dasks_target_and_pause_lines():
    limit = 4096 * MiB
    band = int(limit * (THRESHOLDS["pause"] - THRESHOLDS["target"]))
    assert room_for_runs(300 * MiB, (limit, THRESHOLDS["pause"])) == 300 * MiB + band


def test_a_worker_that_pauses_sooner_keeps_fewer_runs_and_one_pausing_below_target_keeps_one():
    limit = 4096 * MiB
    assert room_for_runs(300 * MiB, (limit, 0.7)) == 300 * MiB + int(limit * (0.7 - THRESHOLDS["target"]))
    assert room_for_runs(300 * MiB, (limit, 0.5)) == 300 * MiB


def test_without_a_known_memory_limit_one_run_is_kept():
    assert room_for_runs(300 * MiB, None) == 300 * MiB
    assert worker_memory() is None   # this process is no Dask worker
