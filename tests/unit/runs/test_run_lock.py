"""runs/run_lock.py: one trainer per run folder. A second trainer into a folder whose
trainer still holds its writer lock is refused at once, naming the holder and what to do;
the readers see who trains it without taking anything. flock locks are per open file
description, so a second open in this process stands for another process."""
from __future__ import annotations

import os
import socket

import pytest

from lancetnic_flow.dataflow.entry_lock import try_lock_entry
from lancetnic_flow.errors import UserError
from lancetnic_flow.runs.run_lock import lock_run, run_holder


def test_a_second_trainer_into_a_run_being_trained_is_refused_naming_the_holder_and_what_to_do(tmp_path):
    run = str(tmp_path / "run")
    os.makedirs(run)
    trainer = lock_run(run)
    assert trainer is not None and trainer.held
    with pytest.raises(UserError) as e:
        lock_run(run)
    assert f"is being trained by process {os.getpid()} on {socket.gethostname()} since " in e.value.message
    assert "wait for that training to end, or stop it" in e.value.hint and f"--resume {run}" in e.value.hint
    trainer.release()
    again = lock_run(run)
    assert again is not None and again.held


def test_the_holder_is_told_without_taking_the_lock_and_nobody_once_it_is_let_go(tmp_path):
    run = str(tmp_path / "run")
    os.makedirs(run)
    assert run_holder(run) is None        # no lock file: never locked, and none is made
    assert os.listdir(run) == []
    trainer = try_lock_entry(run, {})
    for _ in range(2):                    # a look takes nothing: the trainer still holds it
        assert run_holder(run).startswith(f"process {os.getpid()} on ")
    assert not try_lock_entry(run, {}).held
    trainer.release()
    assert run_holder(run) is None


def test_resuming_a_folder_that_is_not_there_creates_nothing(tmp_path):
    missing, afile = tmp_path / "typo", tmp_path / "data.csv"
    afile.write_text("text,label\n")
    assert lock_run(str(missing)) is None and not missing.exists()
    assert lock_run(str(afile)) is None


def test_a_folder_on_a_store_with_no_lock_is_trained_unlocked_and_read_as_stopped():
    import fsspec

    fsspec.filesystem("memory").makedirs("/run-lock/run", exist_ok=True)
    assert lock_run("memory://run-lock/run") is None and run_holder("memory://run-lock/run") is None
