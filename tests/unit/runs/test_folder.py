"""runs/folder.py: a run folder is written with model.json last and loaded
from JSON and safetensors only; a folder that is not a run, an unfinished run
(with or without a checkpoint), another format version or damaged weights are
refused in words; fresh names never reuse a run; a RunFolder carries its
storage options through pickle without printing them."""
from __future__ import annotations

import json
import pickle

import numpy as np
import pyarrow as pa
import pytest
import torch

from lancetnic_flow.errors import UserError
from lancetnic_flow.features.vectorize import FittedFeatures
from lancetnic_flow.models.scalpel import ScalpelNet
from lancetnic_flow.runs.folder import (CHECKPOINT_FILE, RunFolder, folder_options, load_run, new_run_dir,
                                        read_run_json, save_run)
from lancetnic_flow.storage import join, write_bytes


def save_small_run(run: str, finish: bool = True) -> ScalpelNet:
    torch.manual_seed(0)
    model = ScalpelNet(5, classes=2, hidden=3)
    features = FittedFeatures(mode="tfidf", vocabulary=pa.array(list("abcde")), idf=np.ones(5, np.float32),
                              labels=["pos", "neg"])
    save_run(run, config={"training": {"class_loss": "cross_entropy"}}, features=features, model=model,
             model_meta={"model": "ScalpelMC", "net": "ScalpelNet", "kwargs": model.config, "task": "classify"},
             metrics={"val_accuracy": 0.75}, history=[{"epoch": 1, "loss": 0.5}, {"epoch": 2, "loss": 0.4}],
             finish=finish)
    return model


@pytest.mark.parametrize("where", ["local", "memory"])
def test_a_saved_run_loads_back_with_the_same_weights_features_and_metrics(tmp_path, where):
    run = str(tmp_path / "run") if where == "local" else "memory://unit-runs/run"
    model = save_small_run(run)
    loaded = load_run(run)
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], value), name
    assert loaded.features.labels == ["pos", "neg"] and loaded.metrics == {"val_accuracy": 0.75}
    assert loaded.meta["format_version"] == 1 and not loaded.model.training
    task = loaded.task()
    assert task.kind == "classify" and task.classes == 2


def test_a_folder_without_config_json_is_not_a_run(tmp_path):
    with pytest.raises(UserError, match="not a lancetnic_flow run folder") as e:
        read_run_json(str(tmp_path))
    assert "lancetnic-flow train" in e.value.hint


def test_an_unfinished_run_says_to_resume_from_its_checkpoint_or_to_train_again(tmp_path):
    run = str(tmp_path / "stopped")
    save_small_run(run, finish=False)
    with pytest.raises(UserError, match="unfinished run") as e:
        load_run(run)
    assert "train it again" in e.value.hint
    write_bytes(join(run, CHECKPOINT_FILE), b"x", {})
    with pytest.raises(UserError) as e:
        load_run(run)
    assert f"--resume {run}" in e.value.hint


def test_another_format_version_and_damaged_weights_are_refused(tmp_path):
    run = str(tmp_path / "run")
    save_small_run(run)
    write_bytes(join(run, "model.safetensors"), b"not safetensors", {})
    with pytest.raises(UserError, match="not a valid safetensors file"):
        load_run(run)
    meta = json.loads((tmp_path / "run" / "model.json").read_text())
    write_bytes(join(run, "model.json"), json.dumps({**meta, "format_version": 99}).encode(), {})
    with pytest.raises(UserError, match="incompatible version"):
        read_run_json(run)


def test_history_is_written_as_csv_with_every_key(tmp_path):
    run = str(tmp_path / "run")
    save_small_run(run)
    assert (tmp_path / "run" / "history.csv").read_text().splitlines() == ["epoch,loss", "1,0.5", "2,0.4"]


def test_new_run_dirs_never_reuse_a_run_and_refuse_names_that_are_not_plain(tmp_path):
    first = new_run_dir(str(tmp_path), "exp")
    (tmp_path / "exp" / "config.json").write_text("{}")
    second = new_run_dir(str(tmp_path), "exp")
    assert first.endswith("/exp") and second.endswith("/exp-2")
    assert new_run_dir(str(tmp_path), None).rsplit("/", 1)[-1][:2] == "20"   # a timestamp
    for bad in ("../up", "a b", ".."):
        with pytest.raises(UserError, match="not a plain folder name"):
            new_run_dir(str(tmp_path), bad)
    made = new_run_dir("memory://unit-runs/out", "m")
    assert made.startswith("memory://") and made.endswith("/unit-runs/out/m")


def test_a_run_folder_prints_as_its_url_and_pickles_with_its_options():
    run = RunFolder("s3://b/runs/x", {"key": "secret"})
    assert str(run) == "s3://b/runs/x" and json.dumps(run) == '"s3://b/runs/x"' and "secret" not in repr(run)
    back = pickle.loads(pickle.dumps(run))
    assert isinstance(back, RunFolder) and back.storage_options == {"key": "secret"}
    assert folder_options(run) == {"key": "secret"} and folder_options(run, {"a": 1}) == {"a": 1}
    assert folder_options("/plain/path") == {}


def test_a_run_of_a_network_this_process_never_registered_is_a_user_error_naming_it(tmp_path):
    """A model registered by the user's own script, loaded where that script never ran (the
    command line, a server): what to import, not an internal KeyError."""
    run = str(tmp_path / "run")
    save_small_run(run)
    meta = json.loads((tmp_path / "run" / "model.json").read_text())
    write_bytes(join(run, "model.json"), json.dumps({**meta, "net": "GatedBag"}).encode(), {})
    with pytest.raises(UserError, match="'GatedBag' is not registered in this process") as e:
        load_run(run)
    assert "import the module that registers it" in e.value.hint
