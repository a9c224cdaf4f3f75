"""Places a run writes that cannot be written, a disk that fills up, errors
raised on workers and Ctrl-C: each ends in one message (exit 2, or 130 for
Ctrl-C), no traceback, no temporary file left, and no run folder that looks
finished when it is not.

Real processes and real filesystems: a full or read-only disk is a small
tmpfs mounted for the test (skipped where this process may not mount, i.e.
not root or no CAP_SYS_ADMIN).
"""
from __future__ import annotations

import errno
import gzip
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lancetnic_flow.data.synth import write_corpus
from lancetnic_flow.errors import UserError

from helpers import CLUSTER, assert_user_error, cli, cli_signalled_at, wait_stopped

# A small model, so checkpoints and run folders are a few hundred KB.
SMALL = ["--buckets", "4096", "--hidden", "16"]
# What a run prints once the cluster is up; a check before any work shows none of it.
STARTED = ("memory plan", "fitting", "dask dashboard")


# ---------------------------------------------------------------- small filesystems


def _mount_tmpfs(where: Path, size: str, read_only: bool = False) -> None:
    where.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if read_only else "")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({p.stderr.strip() or p.returncode}): needs root with CAP_SYS_ADMIN")


@pytest.fixture
def tmpfs(tmp_path):
    """``mount(name, size, read_only=False)`` → a fresh tmpfs under tmp_path, unmounted at the end."""
    mounted: list[Path] = []

    def mount(name: str, size: str, read_only: bool = False) -> Path:
        where = tmp_path / name
        _mount_tmpfs(where, size, read_only)
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _resize(where: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(where)], check=True)


def _fill(where: Path) -> Path:
    """Write a file under ``where`` until the filesystem is full; return it."""
    filler = where / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def _temp_files(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if ".tmp-" in p.name or ".lancetnic-write-check" in p.name]


def _not_started(out: str) -> None:
    for word in STARTED:
        assert word not in out, out


# ---------------------------------------------------------------- data and a run


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """4 classes, 10,000 rows (~3 MB): a few shards' worth, predictions of a few MB."""
    p = tmp_path_factory.mktemp("out-errors") / "corpus.csv"
    write_corpus(str(p), 10_000, classes=4, seed=5)
    return p


@pytest.fixture(scope="module")
def small_run(corpus, tmp_path_factory) -> Path:
    """A finished run (2 epochs, a small model)."""
    tmp = tmp_path_factory.mktemp("out-errors-run")
    p = cli("train", corpus, *CLUSTER, *SMALL, "--epochs", "2", "--out", tmp / "runs", "--name", "r", cwd=tmp)
    assert p.returncode == 0, p.stdout + p.stderr
    return tmp / "runs" / "r"


# ---------------------------------------------------------------- places that cannot be written


def test_out_cache_json_log_and_output_under_a_regular_file_exit_2_naming_them_before_the_cluster_starts(
        corpus, small_run, tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    bad = tmp_path / "afile" / "below"
    cases = {
        ("train", corpus, *CLUSTER, "--out", bad): "--out",
        ("train", corpus, *CLUSTER, "--out", tmp_path / "runs", "--cache", bad): "--cache",
        ("train", corpus, *CLUSTER, "--out", tmp_path / "runs", "--json-log", bad / "log.jsonl"): "--json-log",
        ("predict", small_run, "--input", corpus, "--output", bad / "p.csv", *CLUSTER): "--output",
        # the charts' place was found bad after every row was scored, and the result was lost
        ("evaluate", small_run, corpus, "--plots", bad, *CLUSTER): "--plots",
    }
    for args, flag in cases.items():
        t0 = time.monotonic()
        p = cli(*args, cwd=tmp_path)
        out = assert_user_error(p, flag, str(bad), "a part of the path is a file")
        assert time.monotonic() - t0 < 30, out
        _not_started(out)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_read_only_filesystem_for_out_cache_json_log_and_output_exits_2_before_the_cluster_starts(
        corpus, small_run, tmp_path, tmpfs):
    ro = tmpfs("ro", "1m", read_only=True)
    cases = {
        ("train", corpus, *CLUSTER, "--out", ro / "runs"): "--out",
        ("train", corpus, *CLUSTER, "--out", tmp_path / "runs", "--cache", ro / "cache"): "--cache",
        ("train", corpus, *CLUSTER, "--out", tmp_path / "runs", "--json-log", ro / "log.jsonl"): "--json-log",
        ("predict", small_run, "--input", corpus, "--output", ro / "p.jsonl", *CLUSTER): "--output",
    }
    for args, flag in cases.items():
        out = assert_user_error(cli(*args, cwd=tmp_path), flag, str(ro), "read-only file system")
        _not_started(out)


@pytest.mark.skipif(os.geteuid() == 0, reason="as root, permissions do not stop writes: chmod 0o500 proves nothing")
def test_a_folder_without_write_permission_exits_2_with_permission_denied(corpus, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        out = assert_user_error(cli("train", corpus, *CLUSTER, "--out", locked / "runs", cwd=tmp_path),
                                "--out", "permission denied")
        _not_started(out)
    finally:
        locked.chmod(0o700)


def test_a_user_error_keeps_its_message_and_hint_across_pickling():
    import pickle

    from lancetnic_flow.storage import WriteError

    for e in (UserError("m", "h"), WriteError("no space left on device at /x", "free space")):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and (back.message, back.hint) == (e.message, e.hint)


# ---------------------------------------------------------------- a disk that fills up


def test_a_full_cache_disk_exits_2_naming_it_leaves_no_temp_file_and_a_rerun_finishes_once_space_is_freed(
        corpus, tmp_path, tmpfs):
    disk = tmpfs("cache", "256k")
    args = ["train", corpus, *CLUSTER, *SMALL, "--epochs", "1", "--out", tmp_path / "runs", "--cache", disk / "c"]
    p = cli(*args, "--name", "a", cwd=tmp_path)
    out = assert_user_error(p, "no space left on device at", str(disk), "run the same command again")
    assert "Compute Failed" not in out
    assert _temp_files(disk, tmp_path / "runs") == []
    assert not (tmp_path / "runs" / "a" / "model.json").exists()
    _resize(disk, "64m")
    p = cli(*args, "--name", "b", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "runs" / "b" / "model.json").exists()


def _start(args: list, cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, "-m", "lancetnic_flow", *map(str, args)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for(log: Path, proc: subprocess.Popen, test, timeout: float = 180) -> None:
    t0 = time.monotonic()
    while True:
        assert proc.poll() is None, "the run ended first:\n" + "".join(proc.communicate())
        assert time.monotonic() - t0 < timeout, f"no such event in {timeout}s"
        text = log.read_text() if log.exists() else ""
        # A line is whole once its newline is written: the last one may be half written. (Waiting for the
        # next line instead saw the fit pass begin only once it had ended, when nothing came in between.)
        if any(test(json.loads(x)) for x in text.split("\n")[:-1]):
            return
        time.sleep(0.02)


def test_a_disk_that_fills_under_the_run_folder_exits_2_leaves_an_unfinished_run_and_resume_finishes(
        corpus, tmp_path, tmpfs):
    disk = tmpfs("out", "32m")
    log = tmp_path / "log.jsonl"
    proc = cli_signalled_at(["train", corpus, *CLUSTER, *SMALL, "--epochs", "3", "--batch-size", "64",
                             "--checkpoint-every", "5", "--out", disk / "runs", "--name", "r", "--cache",
                             tmp_path / "cache", "--json-log", log], tmp_path,
                            {"event": "checkpoint", "epoch": 1}, [signal.SIGSTOP])
    try:   # another program fills the disk once the run has a checkpoint
        wait_stopped(proc)
        filler = _fill(disk)
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    run = disk / "runs" / "r"
    p = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert_user_error(p, "no space left on device at", str(run), f"lancetnic-flow train --resume {run}")
    assert _temp_files(disk) == []
    assert not (run / "model.json").exists()       # not a finished run: predict refuses it, saying so
    assert_user_error(cli("predict", run, "--text", "hello", cwd=tmp_path), "unfinished run", "--resume")
    filler.unlink()
    p = cli("train", "--resume", run, *CLUSTER, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (run / "model.json").exists() and not (run / "checkpoint.safetensors").exists()
    assert _temp_files(disk) == []
    assert cli("predict", run, "--text", "hello", cwd=tmp_path).returncode == 0


def test_a_disk_full_while_saving_leaves_no_model_json_so_load_run_refuses_the_unfinished_run(tmpfs):
    import torch

    from lancetnic_flow.features.vectorize import FittedFeatures
    from lancetnic_flow.runs.folder import save_run
    from lancetnic_flow.runs.loading import load_run
    from lancetnic_flow.storage import WriteError

    disk = tmpfs("save", "256k")
    run = disk / "run"
    run.mkdir()
    model = torch.nn.Linear(512, 512)   # 1 MiB of weights: more than the disk holds
    with pytest.raises(WriteError, match=f"no space left on device at {run}/model.safetensors"):
        save_run(str(run), config={"data": {}}, features=FittedFeatures(mode="hashing", buckets=16), model=model,
                 model_meta={"net": "ScalpelNet", "kwargs": {}}, metrics={}, history=[])
    assert not (run / "model.json").exists() and _temp_files(disk) == []
    with pytest.raises(UserError, match="unfinished run"):
        load_run(str(run))


def test_a_full_disk_for_predict_output_exits_2_naming_it_with_no_partial_or_temp_file(
        corpus, small_run, tmp_path, tmpfs):
    disk = tmpfs("pred", "256k")
    p = cli("predict", small_run, "--input", corpus, "--output", disk / "p.csv", *CLUSTER, cwd=tmp_path)
    out = assert_user_error(p, "no space left on device at", str(disk / "p.csv"))
    assert "Compute Failed" not in out
    assert list(disk.iterdir()) == []


# ---------------------------------------------------------------- errors raised on workers


def test_a_truncated_gz_read_on_a_worker_exits_2_with_one_message_and_no_worker_traceback(tmp_path):
    # Big enough that the check before the run reads a sound head: the damage is met on a worker.
    csv = tmp_path / "big.csv"
    write_corpus(str(csv), 30_000, classes=4, seed=6)
    whole = gzip.compress(csv.read_bytes())
    (tmp_path / "bad.csv.gz").write_bytes(whole[: len(whole) * 9 // 10])
    p = cli("train", tmp_path / "bad.csv.gz", *CLUSTER, *SMALL, "--out", tmp_path / "runs", cwd=tmp_path)
    out = assert_user_error(p, "bad.csv.gz", "gzip stream is corrupt")
    assert "fitting" in out                    # it was met on a worker, during the fit pass
    assert "Compute Failed" not in out and "distributed.worker" not in out


def test_a_glob_where_one_file_lacks_the_column_exits_2_with_one_message_and_no_worker_traceback(corpus, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_bytes(corpus.read_bytes())
    (tmp_path / "in" / "b.csv").write_text("text,other\nhello world,x\nmore words,y\n")
    p = cli("train", tmp_path / "in" / "*.csv", *CLUSTER, *SMALL, "--out", tmp_path / "runs", cwd=tmp_path)
    out = assert_user_error(p, "b.csv", "no column 'label'")
    assert "Compute Failed" not in out


# ---------------------------------------------------------------- Ctrl-C


@pytest.mark.slow
def test_ctrl_c_at_random_moments_from_the_fit_pass_on_prints_no_traceback(tmp_path):
    """A Ctrl-C 0–1.2 s after the fit pass begins: in the fit pass or in the first epochs (where it lands
    depends on the machine's load), the run says it was interrupted, exits 130 and shows no traceback."""
    csv = tmp_path / "big.csv"
    write_corpus(str(csv), 200_000, classes=4, seed=7)
    rng = random.Random(11)
    for i in range(5):
        log = tmp_path / f"log{i}.jsonl"
        proc = _start(["train", csv, "--workers", "2", "--memory-budget", "3GiB", *SMALL, "--blocksize", "1MiB",
                       "--out", tmp_path / "runs", "--cache", tmp_path / f"cache{i}", "--json-log", log], tmp_path)
        try:
            _wait_for(log, proc, lambda e: e.get("event") == "stage" and e.get("stage") == "fitting")
            time.sleep(rng.uniform(0.0, 1.2))
            os.killpg(proc.pid, signal.SIGINT)
            out, err = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == 130, out + err
        assert "Traceback" not in out + err and "distributed." not in err, err
        assert "interrupted" in err


LAST_VALIDATION = {"event": "stage", "stage": "evaluating", "epoch": 3}
SAVING = {"event": "stage", "stage": "saving"}


def _ctrl_c_at(tmp_path: Path, when: dict, presses: int) -> tuple[subprocess.Popen, str, Path]:
    """A 3-epoch run in this process, ``presses`` Ctrl-Cs the moment it emits ``when``."""
    csv = tmp_path / "c.csv"
    if not csv.exists():
        write_corpus(str(csv), 20_000, classes=4, seed=7)
    log, run = tmp_path / "log.jsonl", tmp_path / "runs" / "r"
    proc = cli_signalled_at(["train", csv, "--epochs", "3", "--early-stopping", "0", "--out", tmp_path / "runs",
                             "--name", "r", "--cache", tmp_path / "cache", "--json-log", log], tmp_path, when,
                            [signal.SIGINT] * presses)
    try:
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "Traceback" not in out + err, err
    return proc, err, run


@pytest.mark.parametrize("when", [LAST_VALIDATION, SAVING], ids=["last-validation", "saving"])
def test_a_ctrl_c_after_the_last_batch_finishes_the_run_whole_then_exits_130_saying_so(tmp_path, when):
    """Before: a Ctrl-C in the last epoch's validation was ignored (exit 0, the user's stop unheard), and one
    in the save left an unfinished run without a checkpoint, saying "before training began"."""
    proc, err, run = _ctrl_c_at(tmp_path, when, presses=1)
    assert proc.returncode == 130, err
    assert f"saved whole in {run}" in err.replace("\n", " ")
    assert (run / "model.json").exists() and not (run / "checkpoint.safetensors").exists()
    assert len(json.loads((run / "metrics.json").read_text())["epochs"]) == 3


def test_a_second_ctrl_c_in_the_save_stops_at_once_and_says_truly_what_the_folder_holds(tmp_path):
    proc, err, run = _ctrl_c_at(tmp_path, SAVING, presses=2)
    assert proc.returncode == 130, err
    said = err.replace("\n", " ")
    if (run / "model.json").exists():   # the save ended between the two presses
        assert f"saved whole in {run}" in said
    elif (run / "checkpoint.safetensors").exists():
        assert f"lancetnic-flow train --resume {run}" in said
    else:
        assert "nothing to resume: run the same command again" in said and "before training began" not in said


def test_commands_checking_the_same_new_out_folder_at_once_all_pass_the_write_check(tmp_path):
    """Two runs started together with one new --out: the write check of one
    must not remove the folder under the other (seen as a spurious exit 2)."""
    import threading

    from lancetnic_flow.storage import check_writable

    failures = []
    for rep in range(30):
        target = str(tmp_path / f"r{rep}" / "runs" / "deep")
        start = threading.Barrier(6)

        def check():
            start.wait()
            try:
                check_writable(target, {}, "--out")
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                failures.append(exc)

        threads = [threading.Thread(target=check) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not (tmp_path / f"r{rep}").exists(), "the check left a folder behind"
    assert failures == []


def test_a_file_to_write_where_a_folder_is_exits_2_and_writes_nothing_inside_it(corpus, small_run, tmp_path):
    # "wrote p.csv: 10,000 predicted", exit 0, with the rows under a temporary name inside the folder p.csv
    for args, name in ((("predict", small_run, "--input", corpus, "--output", tmp_path / "p.csv", *CLUSTER), "p.csv"),
                       (("export", small_run, "--onnx", tmp_path / "m.onnx"), "m.onnx")):
        (tmp_path / name).mkdir()
        out = assert_user_error(cli(*args, cwd=tmp_path), str(tmp_path / name), "a folder is there")
        _not_started(out)
        assert list((tmp_path / name).iterdir()) == []
    # the run's own charts and per_class.csv (its validation's) were overwritten by the evaluation's
    before = (small_run / "metrics.json").read_bytes()
    out = assert_user_error(cli("evaluate", small_run, corpus, "--plots", small_run, *CLUSTER, cwd=tmp_path),
                            "is the run folder", f"{small_run}-evaluated")
    _not_started(out)
    assert (small_run / "metrics.json").read_bytes() == before
