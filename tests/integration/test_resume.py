"""Checkpoints and resume: a killed or interrupted trainer costs minutes, not the run.

The promise: with the same seed, a run that was stopped (Ctrl-C, or SIGKILL
of the trainer and its local workers) and resumed with ``--resume`` ends
with the metrics of a run that was never stopped.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest
import torch

from lancetnic_flow.config import CheckpointEvery
from lancetnic_flow.errors import UserError
from lancetnic_flow.events import Events
from lancetnic_flow.models.metrics import RegressionMetrics
from lancetnic_flow.training.checkpoints import CHECKPOINT, load_checkpoint, save_checkpoint
from lancetnic_flow.training.orchestrator import train
from lancetnic_flow.training.resume import resume_config
from lancetnic_flow.training.stop import TrainingInterrupted

from helpers import CLUSTER, assert_user_error, cli, cli_signalled_at, make_config, wait_stopped


def test_checkpoint_every_reads_batches_durations_and_off():
    assert CheckpointEvery.parse("500") == CheckpointEvery(batches=500)
    assert CheckpointEvery.parse("90s").seconds == 90 and CheckpointEvery.parse("10m").seconds == 600
    assert CheckpointEvery.parse("1h").seconds == 3600
    assert CheckpointEvery.parse("off") == CheckpointEvery() and not CheckpointEvery().due(10**9, 1e9)
    assert CheckpointEvery(batches=5).due(5, 0) and not CheckpointEvery(batches=5).due(4, 1e9)
    with pytest.raises(UserError, match="neither a number of batches nor a duration"):
        CheckpointEvery.parse("ten minutes")


def test_a_checkpoint_round_trips_optimiser_rng_and_metric_state_without_pickle(tmp_path):
    p = torch.nn.Parameter(torch.randn(3, 2))
    opt = torch.optim.RAdam([p], lr=0.1)
    p.grad = torch.ones_like(p)
    opt.step()
    reg = RegressionMetrics(50.0, 10.0, sample=4, seed=3)
    reg.update(np.arange(6.0), np.arange(6.0) + 0.5)
    state = {"optimizer": opt.state_dict(), "rng": torch.get_rng_state(), "metrics": reg.state(),
             "history": [{"epoch": 1, "val_loss": None}], "pair": (1, 2)}
    save_checkpoint(str(tmp_path), state)
    back = load_checkpoint(str(tmp_path))
    assert torch.equal(back["rng"], state["rng"]) and back["pair"] == (1, 2) and back["history"] == state["history"]
    opt2 = torch.optim.RAdam([torch.nn.Parameter(p.detach().clone())], lr=0.1)
    opt2.load_state_dict(back["optimizer"])
    assert torch.equal(opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])
    reg2 = RegressionMetrics(50.0, 10.0, sample=4, seed=99)
    reg2.load_state(back["metrics"])
    more = (np.arange(5.0), np.arange(5.0) - 0.5)
    reg.update(*more)
    reg2.update(*more)   # same reservoir draws: the RNG state came back too
    assert reg2.result() == reg.result() and np.array_equal(reg2.true, reg.true)
    # A standard safetensors reader opens it: plain tensors and a JSON header.
    import safetensors.torch

    assert "s/rng" in str(list(safetensors.torch.load_file(str(tmp_path / CHECKPOINT))))


def _interrupt_at(epoch: int, batch: int, rows: int = 128) -> Events:
    """Events that send this process a real SIGINT (a Ctrl-C) at ``batch`` of ``epoch`` (``rows`` a batch)."""
    events = Events()

    def listener(kind: str, e: dict) -> None:
        if kind == "batch" and e["epoch"] == epoch and e["rows"] == batch * rows:
            os.kill(os.getpid(), signal.SIGINT)

    events.subscribe(listener)
    return events


def test_a_checkpoint_of_an_older_ddp_run_reads_as_the_same_train_state():
    """--ddp checkpoints written before the training step was shared nest each
    epoch's validation scores (and its confusion matrix) under "val"; they
    read as flat records, the confusions beside them."""
    from lancetnic_flow.training.state import TrainState

    val = {"loss": 0.5, "accuracy": 0.8, "macro_f1": 0.75, "macro_precision": 0.7, "macro_recall": 0.72,
           "confusion": [[3, 1], [0, 4]], "per_class": {}}
    old = {"key": "k", "epoch": 1, "batches": 0, "rows": 0, "step": 10, "stale": 0, "total_steps": None,
           "total_rows": 640, "confusions": [], "best": None, "train_metrics": None, "model": {}, "optimizers": [],
           "rng": None, "ddp": {"ranks": 2, "rng": [None, None]},
           "history": [{"epoch": 1, "train_loss": 0.9, "train_accuracy": 0.6, "val": val, "rows": 640,
                        "seconds": 1.0, "lr": 0.01, "rows_per_s": 640.0}]}
    state = TrainState.from_checkpoint(old)
    h = state.history[0]
    assert "val" not in h and h["val_loss"] == 0.5 and h["val_accuracy"] == 0.8 and h["val_precision"] == 0.7
    assert h["val_mae"] is None and h["train_loss"] == 0.9 and h["rows"] == 640
    assert state.confusions == [[[3, 1], [0, 4]]]
    assert state.ddp == {"ranks": 2, "rng": [None, None]} and state.step == 10 and state.total_rows == 640
    assert TrainState.from_checkpoint(state.to_checkpoint()) == state


@pytest.mark.parametrize("model,task,epoch,batch", [
    ("ScalpelMC", "classify", 1, 6),      # epoch 1: featurised live, replayed on resume
    ("ScalpelMTSK", "multitask", 2, 9),   # epoch 2: from the cache; regression metrics resume too
])   # every model family resumes at epoch 2 in tests/integration/test_model_matrix.py
def test_ctrl_c_checkpoints_and_resume_ends_with_the_uninterrupted_metrics(client, small_corpus, tmp_path,
                                                                            model, task, epoch, batch):
    def config(name: str):
        cfg = make_config(small_corpus, tmp_path, epochs=3)
        cfg.model.name, cfg.training.task, cfg.output.name = model, task, name
        if task != "classify":
            cfg.data.target = "target"
        cfg.training.checkpoint_every = "off"   # only the Ctrl-C checkpoint
        return cfg

    ref = train(config("ref"), client=client)
    with pytest.raises(TrainingInterrupted) as stopped:
        train(config("stopped"), _interrupt_at(epoch, batch), client=client)
    run = tmp_path / "runs" / "stopped"
    assert f"--resume {run}" in str(stopped.value) and (run / CHECKPOINT).exists()
    assert not (run / "model.safetensors").exists()
    saved = load_checkpoint(str(run))
    assert saved["batches"] == batch
    spent = saved.get("seconds", 0.0)   # the interrupted epoch's training so far
    assert spent > 0

    # As a run started on a laptop's LocalCluster is: resumed on the client's cluster, its sizes are not the plan's.
    config_json = run / "config.json"
    config_json.write_text(json.dumps({**(doc := json.loads(config_json.read_text())),
                                       "cluster": {**doc["cluster"], "workers": 3, "memory_budget": 6 << 30}}))
    res = train(resume_config(str(run)), client=client, resume=str(run))
    assert res.run == str(run) and not (run / CHECKPOINT).exists()   # dropped once the model is saved
    resumed = json.loads(config_json.read_text())["cluster"]
    assert (resumed["workers"], resumed["memory_budget"]) == (None, None)   # config.json: the client's workers planned
    compared = [k for k in ("val_loss", "val_accuracy", "val_rmse", "val_mae") if ref.metrics[k] is not None]
    assert "val_loss" in compared and (task == "classify") == ("val_rmse" not in compared)
    for key in compared:
        assert res.metrics[key] == pytest.approx(ref.metrics[key], rel=1e-6, abs=1e-9), key
    assert [e["train_loss"] for e in res.metrics["epochs"]] == pytest.approx(
        [e["train_loss"] for e in ref.metrics["epochs"]], rel=1e-6)
    assert res.metrics["rows"] == ref.metrics["rows"]
    # The interrupted epoch's seconds and rows/s are the whole epoch's, not its rows over the time since the resume.
    assert res.metrics["resumed"] == {"epoch": epoch, "batches": batch} and "resumed" not in ref.metrics
    resumed = res.metrics["epochs"][epoch - 1]
    assert resumed["seconds"] > spent and resumed["rows_per_s"] == pytest.approx(resumed["rows"] / resumed["seconds"])


def test_a_resumed_runs_metrics_keep_what_it_decided_before_the_checkpoint(client, small_corpus, tmp_path):
    """--analyzer auto decides from a sample of the text, and config.json then names the
    analyzer, so a resumed run does not decide it again: the checkpoint keeps the
    decision, and metrics.json's "decided" is the run never stopped's."""
    def config(name: str):
        cfg = make_config(small_corpus, tmp_path, epochs=2, mode="hashing", max_features=None, analyzer="auto")
        cfg.model.name, cfg.output.name, cfg.training.checkpoint_every = "ScalpelMC", name, "off"
        return cfg

    ref = train(config("ref"), client=client)
    with pytest.raises(TrainingInterrupted):
        train(config("stopped"), _interrupt_at(1, 6), client=client)
    run = tmp_path / "runs" / "stopped"
    res = train(resume_config(str(run)), client=client, resume=str(run))
    assert ref.metrics["decided"]["analyzer"]["analyzer"] == "word"
    assert res.metrics["decided"] == ref.metrics["decided"]


def test_a_new_run_never_takes_over_an_interrupted_runs_folder(client, small_corpus, tmp_path):
    cfg = make_config(small_corpus, tmp_path, epochs=2)
    cfg.output.name = "same"
    with pytest.raises(TrainingInterrupted):
        train(cfg, _interrupt_at(1, 3), client=client)
    cfg = make_config(small_corpus, tmp_path, epochs=1)
    cfg.output.name = "same"
    said = []
    events = Events()
    events.subscribe(lambda kind, e: said.append(e["message"]) if kind == "warning" else None)
    res = train(cfg, events, client=client)
    assert res.run.endswith("same-2") and (tmp_path / "runs" / "same" / CHECKPOINT).exists()
    # The name typed is the earlier run's: the run says which folder it took instead.
    assert any("that folder holds an earlier run, so this one is same-2" in w for w in said), said


@pytest.mark.slow
def test_sigkilled_trainer_resumes_from_its_last_checkpoint_to_the_same_metrics(small_corpus, tmp_path):
    """SIGKILL of the whole process group (trainer + its LocalCluster workers),
    mid-epoch 2, after a periodic checkpoint; then `train --resume RUN`."""
    common = [small_corpus, *CLUSTER, "--epochs", "3", "--batch-size", "64", "--lr", "0.01",
              "--out", tmp_path / "runs", "--cache", tmp_path / "cache"]
    ref = cli("train", *common, "--name", "ref", "--checkpoint-every", "off", cwd=tmp_path)
    assert ref.returncode == 0, ref.stderr
    run = tmp_path / "runs" / "killed"
    proc = cli_signalled_at(["train", *common, "--name", "killed", "--checkpoint-every", "5"], tmp_path,
                            {"event": "checkpoint", "epoch": 2, "batches": 10}, [signal.SIGKILL], group=True,
                            stderr=subprocess.STDOUT)
    try:
        proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    saved = load_checkpoint(str(run))
    # 0-based epoch 1 = the second epoch; the kill may land a checkpoint or two later (short default epochs).
    assert (saved["epoch"], saved["batches"]) >= (1, 10) and saved["epoch"] <= 2

    resumed = cli("train", "--resume", run, *CLUSTER, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    a = json.loads((tmp_path / "runs" / "ref" / "metrics.json").read_text())
    b = json.loads((run / "metrics.json").read_text())
    assert b["val_accuracy"] == pytest.approx(a["val_accuracy"], abs=1e-9)
    assert b["val_loss"] == pytest.approx(a["val_loss"], rel=1e-6)
    assert b["rows"] == a["rows"]


def test_resume_errors_are_user_errors(small_corpus, tmp_path):
    (tmp_path / "empty").mkdir()
    assert_user_error(cli("train", "--resume", tmp_path / "empty", cwd=tmp_path), "no config.json")
    # The run's own values are what an option is checked against: a folder without them is named first.
    assert_user_error(cli("train", "--resume", tmp_path / "empty", "--epochs", "5", cwd=tmp_path),
                      "no config.json")
    assert_user_error(cli("train", cwd=tmp_path), "train needs training data", "--resume")
    assert_user_error(cli("train", small_corpus, "--checkpoint-every", "often", cwd=tmp_path),
                      "--checkpoint-every: ", "10m")   # the flag as typed


def test_resume_asks_again_for_masked_credentials(tmp_path):
    cfg = make_config("s3://bucket/x.csv", tmp_path, storage_options={"key": "AKIA", "secret": "s3cr3t",
                                                                      "client_kwargs": {"endpoint_url": "http://h"}})
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(cfg.to_dict()))
    assert "s3cr3t" not in (run / "config.json").read_text()
    with pytest.raises(UserError, match="key, secret were masked") as e:
        resume_config(str(run))
    assert "storage_options key=..." in e.value.hint and "--storage-option key=..." in e.value.said("cli")[1]
    back = resume_config(str(run), storage_options={"key": "AKIA", "secret": "s3cr3t"})
    assert back.data.storage_options == {"key": "AKIA", "secret": "s3cr3t",
                                         "client_kwargs": {"endpoint_url": "http://h"}}


@pytest.mark.slow
def test_ctrl_c_in_a_terminal_stops_cleanly_and_says_how_to_resume(small_corpus, tmp_path):
    """SIGINT to the whole process group, as a terminal sends it: trainer and
    local workers. One message, exit 130, no traceback, no process left behind."""
    log = tmp_path / "log.jsonl"
    # Six epochs: the default's are a fraction of a second here, and the interrupt must land before the end.
    proc = cli_signalled_at(["train", small_corpus, "--workers", "2", "--memory-budget", "3GiB", "--epochs", "6",
                             "--batch-size", "32", "--out", tmp_path / "runs", "--name", "r", "--json-log", log],
                            tmp_path, {"event": "batch", "epoch": 2}, [signal.SIGINT], group=True,
                            stderr=subprocess.STDOUT)
    try:
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    run = tmp_path / "runs" / "r"
    assert proc.returncode == 130, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert f"resume with: lancetnic-flow train --resume {run}" in out
    # Interrupted in epoch 2 or, the default's epochs being short, a little later: never before the batch seen.
    assert (run / CHECKPOINT).exists() and 1 <= load_checkpoint(str(run))["epoch"] <= 5
    t0 = time.monotonic()
    while time.monotonic() - t0 < 20:   # the workers went with the trainer (allowing for reaping)
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        pytest.fail("processes of the interrupted run are still alive 20 s after it exited")
    resumed = cli("train", "--resume", run, "--workers", "2", "--memory-budget", "3GiB", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming" in resumed.stderr + resumed.stdout and (run / "model.safetensors").exists()


@pytest.mark.slow
def test_a_run_being_trained_refuses_a_second_trainer_and_predict_says_it_is_still_training(small_corpus, tmp_path):
    """Before: `train --resume RUN` of a run whose trainer still lived (paused here) trained into
    the same folder beside it, and predict said "still being trained, or it stopped". Now the
    folder's writer lock refuses the second trainer naming the first, and predict tells which."""
    run = tmp_path / "runs" / "busy"
    # Stopped at its first checkpoint: a trainer that still lives, as a stalled or restarted job's.
    proc = cli_signalled_at(["train", small_corpus, *CLUSTER, "--epochs", "3", "--batch-size", "64", "--out",
                             tmp_path / "runs", "--cache", tmp_path / "cache", "--name", "busy", "--checkpoint-every",
                             "5"], tmp_path, {"event": "checkpoint"}, [signal.SIGSTOP], group=True,
                            stderr=subprocess.STDOUT)
    try:
        wait_stopped(proc)
        before = (run / CHECKPOINT).read_bytes()
        holder = f"process {proc.pid} on "
        assert_user_error(cli("train", "--resume", run, *CLUSTER, cwd=tmp_path), f"{run} is being trained by {holder}",
                          "wait for that training to end, or stop it")
        assert (run / CHECKPOINT).read_bytes() == before and not (run / "model.json").exists()
        out = assert_user_error(cli("predict", run, "--text", "hello", cwd=tmp_path), f"still being trained ({holder}")
        assert "stopped" not in out
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert_user_error(cli("predict", run, "--text", "hello", cwd=tmp_path), "it stopped before its model was saved",
                      f"--resume {run}")


def test_a_resume_refused_for_changed_data_or_options_names_what_changed(client, small_corpus, tmp_path):
    """The checkpoint keeps its cache key's parts: a resume after the training file grew, or
    after config.json's --min-df was edited, says which, with the values, not only that
    "the training data or feature options changed"."""
    import shutil

    data = tmp_path / "train.csv"
    shutil.copy(small_corpus, data)
    cfg = make_config(data, tmp_path, epochs=2)
    cfg.output.name = "stopped"
    with pytest.raises(TrainingInterrupted):
        train(cfg, _interrupt_at(1, 3), client=client)
    run = tmp_path / "runs" / "stopped"
    size = data.stat().st_size
    with open(data, "a") as f:
        f.write("one more row of text,sports\n")
    entries = sorted(p.name for p in (tmp_path / "cache").iterdir())
    with pytest.raises(UserError, match=f"{data}'s content changed \\({size:,} bytes, now {size + 28:,}\\)"):
        train(resume_config(str(run)), client=client, resume=str(run))
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == entries   # refused before a fit pass
    shutil.copy(small_corpus, data)   # the same content, written again: only its modification time differs
    config = json.loads((run / "config.json").read_text())
    config["features"]["min_df"] = 3
    (run / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError) as e:
        train(resume_config(str(run)), client=client, resume=str(run))
    assert "min_df was 1, now 3" in str(e.value) and f"{data} was changed (the same size" in str(e.value)


def test_train_resume_with_options_other_than_the_runs_is_refused_not_trained_on(client, small_corpus, tmp_path):
    """train(cfg, resume=RUN) with another --epochs trained on with it, and config.json then said the
    run had 5 epochs from the start; the command line's --resume refuses it. Refused alike, naming it."""
    cfg = make_config(small_corpus, tmp_path, epochs=2)
    cfg.output.name = "stopped"
    with pytest.raises(TrainingInterrupted):
        train(cfg, _interrupt_at(1, 3), client=client)
    run = tmp_path / "runs" / "stopped"
    other = resume_config(str(run))
    other.training.epochs = 5
    with pytest.raises(UserError, match="the configuration given changes epochs .the run's: epochs=2."):
        train(other, client=client, resume=str(run))
    assert json.loads((run / "config.json").read_text())["training"]["epochs"] == 2
    res = train(resume_config(str(run)), client=client, resume=str(run))   # as it was started: goes on
    assert len(res.metrics["epochs"]) == 2
