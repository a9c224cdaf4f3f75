"""Helpers shared by the test modules (fixtures are in conftest.py): running
the CLI as a real subprocess, checking a user error, a small training config,
and tasks that run on Dask workers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from lancetnic_flow.config import (ClusterConfig, DataConfig, FeatureConfig, ModelConfig, OutputConfig, TrainConfig,
                                   TrainingConfig)

# A small local cluster for CLI runs: one worker, a 3 GiB plan.
CLUSTER = ["--workers", "1", "--memory-budget", "3GiB"]


def cli(*args, cwd, timeout=300, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m lancetnic_flow ARGS`` in ``cwd``, output captured; a command
    that trains returns once the charts it left drawing are written too (a
    test reads its run folder as a user does a moment later)."""
    env = {**os.environ, "COLUMNS": "200", "PYTHONWARNINGS": "ignore", **(env or {})}
    argv = [sys.executable, "-m", "lancetnic_flow", *map(str, args)]
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if {"train", "tune", "run"} & set(argv[3:5]):
        drawers_done(argv)
    return p


def drawers_done(argv: list[str], timeout: float = 90) -> None:
    """Wait while a process with exactly ``argv`` runs: the forked copy of a
    command that draws its charts after it ended (runs/plots.py::draw_detached)."""
    import time

    want = ("\0".join(argv) + "\0").encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = False
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if f.read() != want:
                        continue
                with open(f"/proc/{d}/stat") as f:
                    alive = f.read().rsplit(")", 1)[-1].split()[0] != "Z"
            except OSError:
                continue
            if alive:
                break
        if not alive:
            return
        time.sleep(0.05)
    raise AssertionError(f"the charts of {' '.join(argv[3:6])} … were still being drawn after {timeout} s")


def charts_drawn(output: str, timeout: float = 90) -> int | None:
    """Wait for the charts a ``train`` command left drawing in the background
    (the pid its summary or its ``done`` event names) to be written; returns
    that pid, or None when the command drew them itself."""
    import re
    import time

    found = re.search(r'drawing in the background, pid (\d+)|"charts": \{"pid": (\d+)', output)
    if found is None:
        return None
    pid = int(found.group(1) or found.group(2))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:   # a zombie has finished (its parent, the command, is gone)
                if f.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    assert time.monotonic() < deadline, f"the charts' process {pid} still runs after {timeout} s"
    return pid


def model_task_pairs() -> list[tuple[str, str]]:
    """Every registered model with every task it does: what test_models builds and trains in process."""
    from lancetnic_flow.registry import MODELS

    return [(name, task) for name, spec in MODELS.items() for task in spec.tasks]


def assert_user_error(p: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit 2, one ``error:`` line, no traceback, and every needle in the output."""
    out = p.stdout + p.stderr
    assert p.returncode == 2, out
    assert "Traceback" not in out, out
    assert out.count("error:") == 1, out
    for n in needles:
        assert n in out, out
    return out


def make_config(train, tmp: Path, *, val=None, epochs=3, seed=0, blocksize=None, cache=None,
                storage_options=None, val_fraction=0.1, **features) -> TrainConfig:
    """A small, fast training config writing its run (and cache) under ``tmp``: a fitted
    vocabulary of words with raw tf, lazy Adam on the input rows, monitored by val_loss —
    the settings the Python-API tests' thresholds were set with (the CLI tests run the defaults)."""
    return TrainConfig(
        data=DataConfig(train=[str(t) for t in (train if isinstance(train, (list, tuple)) else [train])],
                        val=[str(v) for v in (val or [])], val_fraction=val_fraction,
                        storage_options=dict(storage_options or {})),
        features=FeatureConfig(**{"max_features": 20_000, "ngrams": 1, "sublinear_tf": False, **features}),
        model=ModelConfig(hidden=32, layers=1, dropout=0.1),
        training=TrainingConfig(epochs=epochs, batch_size=128, lr=5e-3, seed=seed, shuffle_buffer=2_000,
                                sparse_optimizer="adam", early_stopping=0, monitor="val_loss"),
        cluster=ClusterConfig(blocksize=blocksize),
        output=OutputConfig(out=str(tmp / "runs"), cache=str(cache) if cache else str(tmp / "cache")),
    )


WORDS = [f"w{i}" for i in range(60)]
LABELS = ["sports", "tech", "politics"]
THRESHOLDS = [0.35, 0.6, 0.2]    # a multilabel run's, one per label


def built_run(name: str, task: str, numeric: int = 0, seed: int = 0, out: Path | None = None,
              labels: list[str] | None = None):
    """A :class:`Predictor` of model ``name`` for ``task`` with random (scaled-up) weights,
    built in process in a second (no cluster, no training): hashed words and pairs, or ids
    of ``WORDS`` cut at 12; ``labels`` (three; default :data:`LABELS`). With ``out``, also
    saved there as a run folder."""
    import pyarrow as pa
    import torch

    from lancetnic_flow.features.vectorize import FittedFeatures
    from lancetnic_flow.models import MODELS, create_model
    from lancetnic_flow.runs.folder import save_run
    from lancetnic_flow.runs.loading import LoadedRun
    from lancetnic_flow.runs.predict import Predictor

    torch.manual_seed(seed)
    mode = MODELS[name].features[0]
    regress = task in ("regress", "multitask")
    features = FittedFeatures(mode=mode, ngrams=1 if mode == "ids" else 2, buckets=4096, max_len=12,
                              vocabulary=pa.array(WORDS, pa.string()) if mode == "ids" else None,
                              labels=(labels or LABELS) if task != "regress" else [], target=(250.0, 40.0) if regress else None,
                              numeric={f"n{i}": (3.0, 2.0) for i in range(numeric)})
    model, meta = create_model(name, dim=features.dim, classes=0 if task == "regress" else len(LABELS),
                               regress=regress, hidden=16, layers=1, dropout=0.1, embed=8, numeric=numeric)
    if hasattr(model.input, "started"):   # a bag's input rows start when first trained on: every one at once here
        model.input.started(torch.arange(model.input.weight.shape[0]))
    with torch.no_grad():   # larger than the init's weights: logits far apart, rows that differ
        for p in model.parameters():
            p.mul_(3.0)
    config = {"data": {"text": ["text"], "numeric": [f"n{i}" for i in range(numeric)]}}
    meta = {**meta, "task": task}
    if task == "multilabel":   # thresholds of its own per label, as training chooses them
        meta["thresholds"] = THRESHOLDS
    if out is not None:
        save_run(str(out), config=config, features=features, model=model, model_meta=meta, metrics={}, history=[])
    return Predictor(LoadedRun(str(out or "memory"), config, features, model.eval(), meta, {}))


# ---------------------------------------------------------------- signals at an event
# Sent by a test once the JSON log showed an event's line, a signal came when the test got the
# CPU back: on a busy host after the run had moved on, or ended (a 0.3 s delay is enough). The
# command line sends them itself, in the event's call, once the log has the line.

SIGNALLED_AT = """
import json, os, sys, time
from lancetnic_flow.cli import main
from lancetnic_flow.events import Events
when, signals, to, emit = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], Events.emit
def signalling(self, kind, **data):
    global signals
    emit(self, kind, **data)
    if signals and all({**data, "event": kind}.get(k) == v for k, v in when.items()):
        sending, signals = signals, []
        for sig in sending:
            if to == "group":
                os.killpg(os.getpgid(0), sig)
            else:
                os.kill(os.getpid() if to == "self" else int(to), sig)
            time.sleep(0.01)
Events.emit = signalling
sys.exit(main(sys.argv[4:]))
"""


def cli_signalled_at(args: list, cwd: Path | None, when: dict, signals: list[int], group: bool = False,
                     stderr: int = subprocess.PIPE, env: dict | None = None, target: int | None = None
                     ) -> subprocess.Popen:
    """``python -m lancetnic_flow ARGS`` in a process group of its own, which sends itself
    ``signals`` the moment it emits the event ``when`` (``{"event": kind, field: value}``):
    to its whole group with ``group`` (the trainer and its local workers, as a terminal's
    Ctrl-C), to the process ``target`` (its scheduler, say) with that, else to the trainer alone."""
    env = {**(os.environ if env is None else env), "PYTHONWARNINGS": "ignore", "COLUMNS": "200"}
    to = "group" if group else "self" if target is None else str(target)
    argv = [sys.executable, "-c", SIGNALLED_AT, json.dumps(when), json.dumps([int(s) for s in signals]), to,
            *map(str, args)]
    return subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
                            start_new_session=True)


def wait_stopped(proc: subprocess.Popen, timeout: float = 180) -> None:
    """Until ``proc`` is stopped (SIGSTOP); it must not end first."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, "the run ended first:\n" + "".join(proc.communicate())
        with open(f"/proc/{proc.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        assert time.monotonic() < deadline, f"not stopped in {timeout} s"
        time.sleep(0.02)


# ---------------------------------------------------------------- tasks run on the workers
# Dask pickles functions by reference: a worker imports this module (tests/ is on
# the path the workers inherit), so it stays light (no torch, no scikit-learn).


def timed_task(i: int, seconds: float, log_dir: str) -> int:
    """Sleep, recording wall-clock start and stop in a file the test reads."""
    import os
    import time

    t0 = time.time()
    time.sleep(seconds)
    t1 = time.time()
    with open(os.path.join(log_dir, f"{i:03d}"), "w") as f:
        f.write(f"{t0} {t1} {os.getpid()}")
    return i


def worker_hashes(strings: list[str]) -> list[int]:
    import pyarrow as pa

    from lancetnic_flow.features.hashing import hash_strings

    return [int(h) for h in hash_strings(pa.array(strings))]


def transform_in_worker(features, texts: list[str]):
    import pyarrow as pa

    return features.transform_texts(pa.array(texts))


def templated_csv(path: Path, rows: int = 4000) -> Path:
    """Rows "value word<k> thing<j>" with the target y = k plus a uniform fraction."""
    import csv
    import random

    rng = random.Random(5)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "y"])
        for i in range(rows):
            v = rng.random() * 10
            w.writerow([f"value word{int(v)} thing{i % 7}", f"{v:.3f}"])
    return path
