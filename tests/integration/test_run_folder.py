"""A damaged run folder through every entry point, and a save killed mid-way.

``predict --text``, ``predict --input/--output``, ``evaluate``, ``serve`` and
``export`` refuse a damaged run folder (truncated weights, a missing
features.json, a config.json of a newer run format, another run's weights
beside model.json, a model.json that is not JSON) with exit 2, no traceback
and one message naming the file, before writing anything (serve: before it
is ever ready, its port open while the run loads);
``Predictor`` and ``TextClassifier.load`` raise the same UserError. A process
SIGKILLed while it saves a run over a finished one leaves a folder that is
refused as unfinished, never one that loads half (docs/reliability.md).

The runs are built in process in a second (``helpers.built_run``): what is
checked is the folder, not what training puts in it.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lancetnic_flow.api.estimators import TextClassifier
from lancetnic_flow.errors import UserError
from lancetnic_flow.runs.predict import Predictor

from helpers import LABELS, assert_user_error, built_run, cli


def truncate_weights(run: Path) -> None:
    data = (run / "model.safetensors").read_bytes()
    (run / "model.safetensors").write_bytes(data[:len(data) // 2])


def newer_config(run: Path) -> None:
    doc = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**doc, "format_version": 3, "written_by": "lancetnic_flow 9.0.0"}))


def other_weights(run: Path) -> None:
    shutil.copy(run.parent / "other" / "model.safetensors", run / "model.safetensors")


# damage → (what it does to a copy of a finished run, what the refusal names; {run} is the folder)
DAMAGES = {
    "truncated weights": (truncate_weights, ["{run}/model.safetensors is damaged: it is truncated"]),
    "missing features.json": (lambda run: (run / "features.json").unlink(), ["{run}/features.json is missing"]),
    "config.json of a newer version": (newer_config, ["{run}/config.json was written by lancetnic_flow 9.0.0",
                                                      "upgrade lancetnic_flow"]),
    "another run's weights": (other_weights, ["{run}/model.safetensors is not the file {run}/model.json"]),
    "model.json not JSON": (lambda run: (run / "model.json").write_text("{\"net\": \"ScalpelNet\", \"kwa"),
                            ["{run}/model.json is damaged: it is truncated"]),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """A finished run (``base``), another of the same network with other weights, and data to read."""
    root = tmp_path_factory.mktemp("folders")
    built_run("ScalpelMC", "classify", out=root / "base")
    built_run("ScalpelMC", "classify", seed=1, out=root / "other")
    rows = [f"w{i} w{i + 1} w{i + 2},{LABELS[i % 3]}" for i in range(30)]
    (root / "data.csv").write_text("text,label\n" + "\n".join(rows) + "\n")
    return root


def damaged(runs: Path, name: str) -> Path:
    run = runs / name.replace(" ", "-").replace("'", "")
    if not run.exists():
        shutil.copytree(runs / "base", run)
        DAMAGES[name][0](run)
    return run


def commands(run: Path, data: Path, out: Path) -> dict[str, list]:
    return {"predict --text": ["predict", run, "--text", "w1 w2"],
            "predict --input": ["predict", run, "--input", data, "--output", out / "predicted.csv"],
            "evaluate": ["evaluate", run, data],
            "serve": ["serve", run, "--port", "0"],
            "export": ["export", run, "--onnx", out / "model.onnx"]}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(DAMAGES))
def test_every_command_refuses_a_damaged_run_folder_with_exit_2_naming_the_file(runs, name, tmp_path):
    run = damaged(runs, name)
    needles = [n.format(run=run) for n in DAMAGES[name][1]]
    todo = commands(run, runs / "data.csv", tmp_path)
    # serve would listen and never return had it accepted the run: the timeout says so.
    with ThreadPoolExecutor(len(todo)) as pool:
        done = dict(zip(todo, pool.map(lambda args: cli(*args, cwd=tmp_path, timeout=180), todo.values())))
    for command, p in done.items():
        try:
            assert_user_error(p, *needles)
        except AssertionError as exc:
            raise AssertionError(f"{command}: {exc}") from None
    assert not (tmp_path / "predicted.csv").exists() and not (tmp_path / "model.onnx").exists()


@pytest.mark.parametrize("name", list(DAMAGES))
def test_the_predictor_and_an_estimator_raise_the_same_user_error(runs, name):
    run = damaged(runs, name)
    needles = [n.format(run=run) for n in DAMAGES[name][1]]
    for load in (Predictor, TextClassifier.load):
        with pytest.raises(UserError) as e:
            load(str(run))
        assert all(n in str(e.value) for n in needles), str(e.value)


def test_a_damaged_metrics_json_does_not_stop_prediction(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs / "base", run)
    (run / "metrics.json").write_text('{"val_accuracy": 0.9')
    p = cli("predict", run, "--text", "w1 w2", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(p.stdout.splitlines()[-1])["status"] == "ok"


# ---------------------------------------------------------------- a save killed mid-way

SAVER = """
import sys, time
import torch
from lancetnic_flow.features.vectorize import FittedFeatures
from lancetnic_flow.models.scalpel import ScalpelNet
from lancetnic_flow.runs import tensor_file
from lancetnic_flow.runs.folder import save_run

run, buckets = sys.argv[1], 2**21   # 2M buckets x 16: 128 MiB of weights, a write that takes a while
write = tensor_file.write_safetensors

class Stalled:
    # The second save's weights stop once their first tensor's bytes are out: it is killed there.
    def __init__(self, f):
        self.f, self.writes = f, 0
    def write(self, data):
        n = self.f.write(data)
        self.writes += 1
        if self.writes == 3:   # the header's length, the header, a tensor
            getattr(getattr(self.f, "f", self.f), "flush", lambda: None)()
            print("writing 2", flush=True)
            time.sleep(600)
        return n

if len(sys.argv) > 2:
    tensor_file.write_safetensors = lambda f, *a, **kw: write(Stalled(f) if version == 2 else f, *a, **kw)
features = FittedFeatures(mode="hashing", ngrams=1, buckets=buckets, labels=["a", "b"])
for version in (1, 2):
    model = ScalpelNet(buckets, classes=2, hidden=16)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(version)
    # The second save stops where the trainer's does before metrics.json and model.json.
    save_run(run, config={"data": {"text": ["text"]}}, features=features, model=model,
             model_meta={"net": "ScalpelNet", "kwargs": model.config, "task": "classify"},
             metrics={"version": version}, history=[], finish=version == 1)
    print(f"saved {version}", flush=True)
time.sleep(600)
"""


def saver(tmp_path: Path, stall: bool) -> tuple[subprocess.Popen, Path]:
    """The script that saves a run twice; with ``stall``, the second save stops mid-way through
    its weights and says "writing 2". (Watched for from here, that moment came and went unseen
    while this process waited for the CPU.)"""
    run = tmp_path / "run"
    script = tmp_path / "saver.py"
    script.write_text(SAVER)
    proc = subprocess.Popen([sys.executable, str(script), str(run), *(["stall"] if stall else [])],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.stdout.readline().strip() == "saved 1"
    return proc, run


def weights_version(run: Path) -> float:
    import safetensors.torch

    from lancetnic_flow.runs.stored_weights import decode

    return float(decode(safetensors.torch.load_file(str(run / "model.safetensors")))["input.weight"][0, 0])


@pytest.mark.parametrize("moment", ["while the weights are written", "after the weights, before model.json"])
def test_a_save_over_a_finished_run_killed_mid_way_leaves_an_unfinished_run_never_half_of_each(tmp_path, moment):
    mid_way = moment == "while the weights are written"
    proc, run = saver(tmp_path, stall=mid_way)
    try:
        assert proc.stdout.readline().strip() == ("writing 2" if mid_way else "saved 2")
        if mid_way:
            assert [p.stat().st_size > 0 for p in run.iterdir() if p.name.startswith("model.safetensors.tmp-")] \
                == [True]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    # Whatever the moment, the real name holds one whole save's weights, never a part of one.
    assert weights_version(run) in ((1.0,) if mid_way else (1.0, 2.0))
    assert not (run / "model.json").exists()
    with pytest.raises(UserError, match="unfinished run"):
        Predictor(str(run))
    p = cli("predict", run, "--text", "w1 w2", cwd=tmp_path)
    assert_user_error(p, f"{run} is an unfinished run")
