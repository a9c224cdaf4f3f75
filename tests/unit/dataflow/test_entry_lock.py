"""dataflow/entry_lock.py: the waiting lock is unchanged (it waits, says who it waits
for once, and gets the lock when its holder lets go); the non-waiting one answers at
once; a release lets go even while a forked copy of the descriptor lives."""
from __future__ import annotations

import os
import threading
import time

from lancetnic_flow.dataflow.entry_lock import entry_holder, lock_entry, try_lock_entry


def test_the_waiting_lock_waits_for_its_holder_and_the_non_waiting_one_answers_at_once(tmp_path):
    entry = str(tmp_path / "entry")
    first = lock_entry(entry, {})
    t0 = time.monotonic()
    busy = try_lock_entry(entry, {})
    assert time.monotonic() - t0 < 1 and not busy.held and busy.holder.startswith(f"process {os.getpid()} on ")
    told, got = [], []
    waiter = threading.Thread(target=lambda: got.append(lock_entry(entry, {}, on_wait=told.append, poll=0.01)))
    waiter.start()
    # Until it says it waits (a thread that waited 0.2 s for the CPU had not yet), then a few of its polls.
    deadline = time.monotonic() + 30
    while not told and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.1)
    assert not got and len(told) == 1
    first.release()
    waiter.join(5)
    assert got and got[0].held and entry_holder(entry, {}) is not None
    got[0].release()
    assert entry_holder(entry, {}) is None


def test_a_release_lets_go_while_a_copy_of_the_descriptor_lives(tmp_path):
    # The run's chart drawer is a forked copy of the trainer: it shares the flocked descriptor.
    entry = str(tmp_path / "entry")
    held = lock_entry(entry, {})
    copy = os.dup(held._handle.fileno())
    try:
        held.release()
        assert try_lock_entry(entry, {}).held
    finally:
        os.close(copy)
