"""runs/folder.py: a run folder is written with model.json last and loaded
from JSON and safetensors only; a folder that is not a run, an unfinished run
(with or without a checkpoint), another format version or damaged weights are
refused in words; fresh names never reuse a run; a RunFolder carries its
storage options through pickle without printing them.

Damage, file by file: every way a file of a run folder can be wrong is one
UserError naming the file and what to do (a damaged metrics.json only a
warning); every state a save killed mid-way can leave loads whole or is
refused."""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import socket
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch

from lancetnic_flow.dataflow.entry_lock import try_lock_entry
from lancetnic_flow.errors import UserError
from lancetnic_flow.features.vectorize import FittedFeatures
from lancetnic_flow.models.scalpel import ScalpelNet
from lancetnic_flow.runs.folder import (CHECKPOINT_FILE, RunFolder, claim_run_dir, copy_run, finish_run, folder_options, new_run_dir,
                                        save_run, written_by)
from lancetnic_flow.runs.loading import load_run, read_run_json
from lancetnic_flow.storage import join, write_bytes


def save_small_run(run: str, finish: bool = True, seed: int = 0) -> ScalpelNet:
    torch.manual_seed(seed)
    model = ScalpelNet(5, classes=2, hidden=3)
    model.input.started(torch.arange(5))   # input rows start when first trained on: every one, as a run's would
    features = FittedFeatures(mode="tfidf", vocabulary=pa.array(list("abcde")), idf=np.ones(5, np.float32),
                              labels=["pos", "neg"])
    save_run(run, config={"training": {"class_loss": "cross_entropy"}}, features=features, model=model,
             model_meta={"model": "ScalpelMC", "net": "ScalpelNet", "kwargs": model.config, "task": "classify"},
             metrics={"val_accuracy": 0.75}, history=[{"epoch": 1, "loss": 0.5}, {"epoch": 2, "loss": 0.4}],
             finish=finish)
    return model


@pytest.mark.parametrize("kept", [None, "init_from", "learn_val"])
def test_a_hashed_run_saved_before_unseen_buckets_weighed_0_loads_weighing_them_0_unless_it_learned_them(
        tmp_path, kept):
    """Its features.json holds smooth_idf(0, docs) for the buckets no training row held: read as
    0 (their weights learned nothing), as a run fitted now holds. A continued run's idf is the
    run's it continued, of another number of rows, its new words' buckets at that value; a model
    that learned its validation rows learned their words at that value: both kept."""
    from lancetnic_flow.features.vocab import bucket_idf, smooth_idf

    torch.manual_seed(0)
    model = ScalpelNet(6, classes=2, hidden=3)
    df = np.array([0, 3, 1, 0, 9, 2])
    features = FittedFeatures(mode="hashing", buckets=6, idf=smooth_idf(df, 9), docs=9, labels=["pos", "neg"])
    config = {"training": {"init_from": str(tmp_path / "old") if kept == "init_from" else None,
                           "learn_val": kept == "learn_val"}}
    save_run(str(tmp_path / "run"), config=config, features=features, model=model,
             model_meta={"model": "ScalpelMC", "net": "ScalpelNet", "kwargs": model.config, "task": "classify"},
             metrics={}, history=[])
    idf = load_run(str(tmp_path / "run")).features.idf
    assert idf.tobytes() == (smooth_idf(df, 9) if kept else bucket_idf(df, 9)).tobytes()


@pytest.mark.parametrize("where", ["local", "memory"])
def test_a_saved_run_loads_back_with_the_same_weights_features_and_metrics(tmp_path, where):
    run = str(tmp_path / "run") if where == "local" else "memory://unit-runs/run"
    model = save_small_run(run)
    loaded = load_run(run)
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], value), name
    assert loaded.features.labels == ["pos", "neg"] and loaded.metrics == {"val_accuracy": 0.75}
    assert loaded.meta["format_version"] == 2 and not loaded.model.training
    task = loaded.task()
    assert task.kind == "classify" and task.classes == 2
    if where == "local":   # model.json records the weights it was saved with; config.json its format
        weights = (tmp_path / "run" / "model.safetensors").read_bytes()
        assert loaded.meta["weights"] == {"file": "model.safetensors", "bytes": len(weights),
                                          "sha256": hashlib.sha256(weights).hexdigest()}
        saved = json.loads((tmp_path / "run" / "config.json").read_text())
        assert saved["format_version"] == 2 and saved["written_by"].startswith("lancetnic_flow ")
        assert loaded.config == {"training": {"class_loss": "cross_entropy"}}


def test_a_run_of_format_1_its_weights_dense_still_loads_with_the_same_weights(tmp_path):
    import io

    from lancetnic_flow.runs.tensor_file import write_safetensors

    run = tmp_path / "run"
    torch.manual_seed(0)
    model = ScalpelNet(2**17, classes=3, hidden=2)    # a matrix large enough to be stored as entries
    with torch.no_grad():
        model.input.weight[2**10:] = 0
    features = FittedFeatures(mode="hashing", buckets=2**17, labels=["a", "b", "c"])
    save_run(str(run), config={}, features=features, model=model,
             model_meta={"model": "ScalpelMC", "net": "ScalpelNet", "kwargs": model.config, "task": "classify"},
             metrics={}, history=[])
    from safetensors.torch import load_file
    assert "input.weight:values" in load_file(str(run / "model.safetensors"))
    buf = io.BytesIO()                               # as format 1 wrote them: every tensor dense
    write_safetensors(buf, model.state_dict())
    (run / "model.safetensors").write_bytes(buf.getvalue())
    for name in ("model.json", "config.json"):
        edit_json(str(run), name, lambda d: d.update(format_version=1, written_by="lancetnic_flow 0.9.0"))
    edit_json(str(run), "model.json", lambda d: d.update(weights={"file": "model.safetensors", "bytes": len(
        buf.getvalue()), "sha256": hashlib.sha256(buf.getvalue()).hexdigest()}))
    loaded = load_run(str(run))
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], value), name


def test_a_folder_without_config_json_is_not_a_run(tmp_path):
    with pytest.raises(UserError, match="not a lancetnic_flow run folder") as e:
        read_run_json(str(tmp_path))
    assert "lancetnic-flow train" in e.value.hint


def test_a_misspelled_run_folder_is_said_to_be_missing_with_the_runs_beside_it(tmp_path):
    """`predict runs/frist` said the folder lacked model.json and config.json, and gave an example
    name: the folder was not there at all, and the run meant sat beside it."""
    save_small_run(str(tmp_path / "runs" / "first"))
    with pytest.raises(UserError, match="not a lancetnic_flow run folder: there is no such folder") as e:
        read_run_json(str(tmp_path / "runs" / "frist"))
    assert "did you mean 'first'?" in e.value.hint


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


# ---------------------------------------------------------------- damage, file by file


def finished_run(tmp_path, name: str = "run", seed: int = 0) -> str:
    run = str(tmp_path / name)
    save_small_run(run, seed=seed)
    return run


def edit_json(run: str, name: str, change) -> None:
    path = f"{run}/{name}"
    with open(path) as f:
        doc = json.load(f)
    change(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


def remove(run: str, name: str) -> None:
    Path(run, name).unlink()


def cut(run: str, name: str, keep) -> None:
    """Truncate ``run/name`` to ``keep(size)`` bytes, as a copy or a disk stopped mid-write leaves it."""
    with open(f"{run}/{name}", "rb") as f:
        data = f.read()
    with open(f"{run}/{name}", "wb") as f:
        f.write(data[:keep(len(data))])


def refused(run: str, *needles: str) -> UserError:
    """load_run refuses ``run``, its message naming each of ``needles``."""
    with pytest.raises(UserError) as e:
        load_run(run)
    for n in needles:
        assert n in str(e.value), str(e.value)
    return e.value


@pytest.mark.parametrize("keep", [lambda n: 0, lambda n: 5, lambda n: 40, lambda n: n // 2, lambda n: n - 1],
                         ids=["empty", "5 bytes", "inside the header", "half", "one byte short"])
def test_truncated_weights_are_refused_as_truncated_naming_the_file(tmp_path, keep):
    run = finished_run(tmp_path)
    cut(run, "model.safetensors", keep)
    e = refused(run, f"{run}/model.safetensors is damaged: it is truncated")
    assert "restore the run folder" in e.hint


def test_weights_that_are_not_safetensors_or_missing_are_refused_naming_the_file(tmp_path):
    run = finished_run(tmp_path)
    write_bytes(join(run, "model.safetensors"), b"not safetensors at all, just some words", {})
    e = refused(run, f"{run}/model.safetensors is not a valid safetensors file")
    assert "never from a pickle" in e.hint
    (tmp_path / "run" / "model.safetensors").unlink()
    refused(run, f"{run} is a damaged run folder", "model.safetensors is missing")


def test_weights_of_another_save_beside_model_json_are_refused_by_their_digest(tmp_path):
    """Same network, other weights (another run, or a save that stopped after its weights):
    the shapes fit, so only the size and SHA-256 model.json records tell them apart."""
    run, other = finished_run(tmp_path), finished_run(tmp_path, "other", seed=1)
    shutil.copy(f"{other}/model.safetensors", f"{run}/model.safetensors")
    e = refused(run, f"{run}/model.safetensors is not the file {run}/model.json was saved with",
                "different saves")
    assert "of one run together" in e.hint


def test_weights_that_do_not_fit_model_json_are_refused_in_words_not_load_state_dicts_error(tmp_path):
    """A run saved before model.json recorded its weights: the tensors' names and shapes
    are checked against the network model.json describes."""
    import safetensors.torch

    run = finished_run(tmp_path)
    edit_json(run, "model.json", lambda m: m.pop("weights"))
    safetensors.torch.save_file(ScalpelNet(7, classes=3, hidden=4).state_dict(), f"{run}/model.safetensors")
    e = refused(run, f"{run}/model.safetensors does not hold the weights of the network {run}/model.json",
                "input.weight is [7, 4] there, [5, 3] in the network", "different runs")
    assert "Error(s) in loading state_dict" not in str(e)
    safetensors.torch.save_file({"embedding": torch.zeros(3)}, f"{run}/model.safetensors")
    refused(run, "it lacks input.weight, input.bias, heads.classify.weight and 1 more",
            "it has no place for embedding")


@pytest.mark.parametrize("damage, needle", [
    (lambda run: remove(run, "features.json"), "is a damaged run folder: {run}/features.json is missing"),
    (lambda run: cut(run, "features.json", lambda n: n // 2), "{run}/features.json is damaged: it is truncated"),
    (lambda run: write_bytes(f"{run}/features.json", b"vocabulary: a b c", {}),
     "{run}/features.json is damaged: it is not JSON"),
    (lambda run: write_bytes(f"{run}/features.json", b"[1, 2]", {}),
     "{run}/features.json is damaged: it holds a JSON list"),
    (lambda run: edit_json(run, "features.json", lambda f: f.pop("mode")),
     "{run}/features.json is damaged: it lacks 'mode'"),
    (lambda run: edit_json(run, "features.json", lambda f: f.pop("vocabulary")), "it lacks 'vocabulary'"),
    (lambda run: edit_json(run, "features.json", lambda f: f.update(labels="pos")), "its labels is \"pos\""),
    (lambda run: edit_json(run, "features.json", lambda f: f.update(mode="words")), "its mode is 'words'"),
    (lambda run: edit_json(run, "features.json", lambda f: f.update(idf={"float32_base64": "?!"})),
     "{run}/features.json is damaged: its idf has 0 weights for 5 terms"),
], ids=["missing", "truncated", "not JSON", "a list", "no mode", "no vocabulary", "labels not a list", "unknown mode",
        "idf not base64"])
def test_a_damaged_features_json_is_refused_naming_it(tmp_path, damage, needle):
    run = finished_run(tmp_path)
    damage(run)
    e = refused(run, needle.format(run=run))
    assert "restore the run folder" in e.hint


def test_features_json_of_another_run_is_refused_as_not_fitting_the_network(tmp_path):
    run = finished_run(tmp_path)
    edit_json(run, "features.json",
              lambda f: f.update(labels=["a", "b", "c"], vocabulary=list("abcdefg"), idf=[1.0] * 7))
    refused(run, f"{run}/features.json does not fit the network {run}/model.json describes",
            "7 input ids, the network takes 5", "3 labels, the network has 2 classes")


def newer(doc: dict, version: int = 3) -> None:
    doc.update(format_version=version, written_by="lancetnic_flow 9.0.0")


@pytest.mark.parametrize("name", ["model.json", "config.json"])
def test_model_and_config_json_truncated_or_not_json_are_refused_naming_them(tmp_path, name):
    run = finished_run(tmp_path)
    cut(run, name, lambda n: n - 3)
    refused(run, f"{run}/{name} is damaged: it is truncated")
    write_bytes(join(run, name), b"\xff\xfe not text", {})
    refused(run, f"{run}/{name} is damaged: it is not JSON")
    write_bytes(join(run, name), b'"a string"', {})
    refused(run, f"{run}/{name} is damaged: it holds a JSON str")


@pytest.mark.parametrize("name", ["model.json", "config.json"])
def test_a_file_of_a_newer_run_format_says_which_version_wrote_it_and_to_upgrade(tmp_path, name):
    run = finished_run(tmp_path)
    edit_json(run, name, newer)
    e = refused(run, f"{run}/{name} was written by lancetnic_flow 9.0.0 in run format 3",
                f"this {written_by()} reads run format 2")
    assert "upgrade lancetnic_flow" in e.hint and "pip install -U lancetnic_flow" in e.hint


def test_an_older_or_unknown_run_format_is_said_as_such(tmp_path):
    run = finished_run(tmp_path)
    edit_json(run, "model.json", lambda m: newer(m, 0))
    e = refused(run, f"{run}/model.json is in run format 0, older than this {written_by()} reads (format 2)")
    assert "train the run again" in e.hint
    for version in (None, "one", True):
        edit_json(run, "model.json", lambda m: m.update(format_version=version))
        refused(run, f"{run}/model.json is damaged: its format_version is {json.dumps(version)}")
    edit_json(run, "model.json", lambda m: m.update(format_version=4, written_by=written_by()))   # changed since
    refused(run, f"{run}/model.json is damaged: its format_version is 4, yet {written_by()}")


def test_a_config_json_written_before_it_carried_its_format_still_loads(tmp_path):
    run = finished_run(tmp_path)
    edit_json(run, "config.json", lambda c: [c.pop("format_version"), c.pop("written_by")])
    assert load_run(run).config == {"training": {"class_loss": "cross_entropy"}}


def test_features_of_a_newer_feature_format_say_to_upgrade(tmp_path):
    run = finished_run(tmp_path)
    edit_json(run, "model.json", lambda m: m.update(written_by="lancetnic_flow 9.0.0"))
    edit_json(run, "features.json", lambda f: f.update(version=4))
    e = refused(run, f"{run}/features.json was written by lancetnic_flow 9.0.0 with feature format 4")
    assert "upgrade lancetnic_flow" in e.hint
    edit_json(run, "features.json", lambda f: f.update(version=2, subwords=True))
    refused(run, "with fields this version does not know (subwords)")


def test_model_json_without_the_network_or_with_sizes_that_build_none_is_refused(tmp_path):
    run = finished_run(tmp_path)
    edit_json(run, "model.json", lambda m: m["kwargs"].update(depth=3))
    refused(run, f"{run}/model.json is damaged: its sizes do not build a ScalpelNet")
    edit_json(run, "model.json", lambda m: m.pop("kwargs"))
    refused(run, f"{run}/model.json is damaged: it lacks the network's name and sizes")


def test_a_missing_config_json_beside_model_json_is_damage_not_a_foreign_folder(tmp_path):
    run = finished_run(tmp_path)
    (tmp_path / "run" / "config.json").unlink()
    refused(run, f"{run} is a damaged run folder: {run}/config.json is missing")


def test_a_damaged_metrics_json_is_only_warned_about_and_the_run_predicts(tmp_path):
    run = finished_run(tmp_path)
    cut(run, "metrics.json", lambda n: n // 2)
    with pytest.warns(RuntimeWarning, match=f"{run}/metrics.json is damaged.*metrics are left out"):
        loaded = load_run(run)
    assert loaded.metrics == {} and loaded.features.labels == ["pos", "neg"]


# ---------------------------------------------------------------- a save killed at any moment

# save_run's files in the order it writes them, after it removes an existing model.json.
SAVE_ORDER = ["config.json", "features.json", "model.safetensors", "metrics.json", "history.csv", "model.json"]


def first_weight(run: str) -> float:
    return float(load_run(run).model.state_dict()["input.weight"].flatten()[0])


def test_every_state_a_save_over_a_finished_run_can_be_killed_in_loads_whole_or_is_refused(tmp_path):
    """A folder saved again (`train --resume` of a run whose checkpoint outlived its model.json):
    each file is renamed into place whole, so a kill leaves the old run's files with the
    first k of the new save's. With model.json removed first, each such state is the old
    run, the new one, or an unfinished run; never the old model.json over new weights."""
    old, new = finished_run(tmp_path, "old"), finished_run(tmp_path, "new", seed=1)
    assert first_weight(old) != first_weight(new)
    for k in range(len(SAVE_ORDER) + 1):
        state = str(tmp_path / f"killed-after-{k}")
        shutil.copytree(old, state)
        if k:
            (tmp_path / f"killed-after-{k}" / "model.json").unlink()
        for name in SAVE_ORDER[:k]:
            shutil.copy(f"{new}/{name}", f"{state}/{name}")
        if k == 0:
            assert first_weight(state) == first_weight(old)
        elif k == len(SAVE_ORDER):
            assert first_weight(state) == first_weight(new)
        else:
            refused(state, "unfinished run")


def test_a_save_into_a_finished_folder_unfinishes_it_before_writing_anything(tmp_path):
    run = finished_run(tmp_path)
    save_small_run(run, finish=False, seed=1)   # the orchestrator's save, before metrics.json and model.json
    refused(run, "unfinished run")
    finish_run(run, {"model": "ScalpelMC", "net": "ScalpelNet", "kwargs": ScalpelNet(5, classes=2, hidden=3).config,
                     "task": "classify"})   # the model.json of the network the weights were saved as
    weights = (tmp_path / "run" / "model.safetensors").read_bytes()
    assert load_run(run).meta["weights"]["sha256"] == hashlib.sha256(weights).hexdigest()   # read back to record


def test_the_old_model_json_beside_a_new_saves_files_is_refused_naming_both(tmp_path):
    """The states a save that did not remove model.json first would leave: refused by the digest."""
    old, new = finished_run(tmp_path, "old"), finished_run(tmp_path, "new", seed=1)
    for k in (3, 4, 5):   # the new weights written, the old model.json still there
        state = str(tmp_path / f"unremoved-{k}")
        shutil.copytree(old, state)
        for name in SAVE_ORDER[:k]:
            shutil.copy(f"{new}/{name}", f"{state}/{name}")
        refused(state, f"{state}/model.safetensors is not the file {state}/model.json was saved with")


def test_copy_run_over_another_run_gives_the_copied_run_and_never_half_of_each(tmp_path):
    """An estimator's save() over another run: the copy unfinishes the folder first, so a
    copy of an unfinished run (as a copy stopped before its model.json leaves) is refused."""
    src, dst = finished_run(tmp_path, "src", seed=1), finished_run(tmp_path, "dst")
    save_small_run(str(tmp_path / "unfinished"), finish=False, seed=2)
    copy_run(str(tmp_path / "unfinished"), dst)
    refused(dst, "unfinished run")
    copy_run(src, dst)
    assert first_weight(dst) == first_weight(src)
    assert sorted(p.name for p in (tmp_path / "dst").iterdir()) == sorted(p.name for p in (tmp_path / "src").iterdir())
    copy_run(src, "memory://unit-runs/copied")
    assert first_weight("memory://unit-runs/copied") == first_weight(src)


def test_runs_started_at_once_with_one_name_each_get_a_folder_of_their_own(tmp_path):
    """Before: two estimators of a cross_val_score(n_jobs=2) started in the same second, took the one
    default folder (its timestamp) and wrote over each other's weights ("not the file model.json was
    saved with")."""
    import threading

    start, got = threading.Barrier(8), []

    def claim() -> None:
        start.wait()
        got.append(str(new_run_dir(str(tmp_path), "same")))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["same"] + [f"same-{n}" for n in range(2, 9)])


def test_a_config_json_field_of_another_kind_is_refused_naming_it_and_a_missing_loss_is_the_networks(tmp_path):
    # data.text 5 was an internal TypeError in predict, evaluate, explain and export; "text" read
    # as columns t, e, x, t; an unknown class_loss scored evaluate's loss with cross-entropy
    for name, value in [("text", 5), ("text", "text"), ("encoding", 7)]:
        run = finished_run(tmp_path, f"run-{name}-{value}")
        edit_json(run, "config.json", lambda d: d.setdefault("data", {}).__setitem__(name, value))
        with pytest.raises(UserError, match=rf"config.json is damaged: its data.{name} is"):
            load_run(run)
        with pytest.raises(UserError, match=rf"data.{name}"):
            read_run_json(run)
    from lancetnic_flow.runs.loading import LoadedRun

    margin = LoadedRun("run", {}, FittedFeatures(mode="hashing", buckets=16, labels=["a", "b"]), None,
                       {"kwargs": {"classes": 2, "margin": True}, "task": "classify"}, {})
    assert margin.task().class_loss == "hinge"   # a LinearSVM's network learned the hinge, config.json or not


def test_features_json_of_the_same_sizes_but_another_save_is_refused_and_one_saved_before_the_record_loads(tmp_path):
    # another run's features.json with the same labels in another order (by their counts) loaded
    # silently: evaluate said accuracy 0.0000 for a model right on 98 % of the rows
    run = finished_run(tmp_path)
    assert load_run(run).features.labels == ["pos", "neg"]
    edit_json(run, "features.json", lambda d: d.__setitem__("labels", ["neg", "pos"]))
    with pytest.raises(UserError, match="features.json is not the file .*model.json was saved with"):
        load_run(run)
    edit_json(run, "model.json", lambda d: d.pop("features"))   # a run saved before model.json recorded it
    assert load_run(run).features.labels == ["neg", "pos"]


def test_model_json_edited_to_another_network_the_weights_still_fit_is_refused_and_a_copy_made_before_loads(tmp_path):
    # kwargs.pooling "weighted" → "mean" loaded and predicted otherwise (accuracy 0.98 → 0.77); task
    # "classify" → "multilabel" answered label sets from a single-label model
    for name, change in [("pooling", lambda d: d["kwargs"].__setitem__("pooling", "mean")),
                         ("task", lambda d: d.__setitem__("task", "multilabel"))]:
        run = finished_run(tmp_path, name)
        edit_json(run, "model.json", change)
        with pytest.raises(UserError, match="model.json does not describe the network .*model.safetensors was saved as"):
            load_run(run)
    run = finished_run(tmp_path, "before")   # weights saved before their file recorded the network
    data = (tmp_path / "before" / "model.safetensors").read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    header.pop("__metadata__")
    raw = json.dumps(header).encode().ljust(size)
    (tmp_path / "before" / "model.safetensors").write_bytes(data[:8] + raw + data[8 + size:])
    edit_json(run, "model.json", lambda d: d.pop("weights"))
    assert load_run(run).meta["task"] == "classify"


def test_a_file_given_as_the_run_folder_is_refused_in_words_by_every_reader(tmp_path):
    # `evaluate data.csv RUN` (the two swapped), `predict data.csv`, `train --resume data.csv`: an
    # internal NotADirectoryError in predict, evaluate, explain, export, serve and --resume
    from lancetnic_flow.training.resume import resume_config

    data = tmp_path / "data.csv"
    data.write_text("text,label\nhello there,a\n")
    for read in (read_run_json, load_run, resume_config):
        with pytest.raises(UserError, match="data.csv is a file, not a run folder"):
            read(str(data))


def test_an_unfinished_run_is_said_to_be_still_training_while_its_trainer_holds_it_and_stopped_once_not(tmp_path):
    """Before: "still being trained, or it stopped" of every run without model.json (nothing told them
    apart). Now the trainer's writer lock tells: held, the holder is named; not, "stopped" and --resume."""
    run = str(tmp_path / "training")
    save_small_run(run, finish=False)
    trainer = try_lock_entry(run, {})
    with pytest.raises(UserError) as e:
        load_run(run)
    assert f"it is still being trained (process {os.getpid()} on {socket.gethostname()} since " in e.value.message
    assert "stopped" not in e.value.message and "--resume" not in e.value.hint
    trainer.release()
    for checkpoint in (False, True):
        if checkpoint:
            write_bytes(join(run, CHECKPOINT_FILE), b"x", {})
        with pytest.raises(UserError) as e:
            load_run(run)
        assert "it stopped before its model was saved" in e.value.message and "still being" not in e.value.message
        assert ("--resume" in e.value.hint) == checkpoint


def test_a_trainer_holds_the_folder_it_claims_until_it_lets_go_and_a_copy_takes_no_lock(tmp_path):
    run, lock = claim_run_dir(str(tmp_path), "exp")
    assert lock is not None and lock.held and (Path(run) / "config.json").exists()
    other = try_lock_entry(run, {})
    assert not other.held and other.holder.startswith(f"process {os.getpid()} on ")
    lock.release()
    assert try_lock_entry(run, {}).held
    save_small_run(run)
    copy_run(run, str(tmp_path / "copy"))
    assert ".lock" in os.listdir(run) and ".lock" not in os.listdir(tmp_path / "copy")


@pytest.mark.parametrize("name", ["model.safetensors", "features.json", "model.json", "config.json"])
def test_a_run_file_that_is_a_pipe_or_dev_null_is_refused_naming_it(tmp_path, name):
    # serve/predict ended in "internal error: UnsupportedOperation: File or stream is not seekable"
    run = finished_run(tmp_path)
    remove(run, name)
    os.symlink("/dev/null", f"{run}/{name}")
    refused(run, f"{run}/{name} is a character device, not a regular file")
    remove(run, name)
    os.mkfifo(f"{run}/{name}")
    fd = os.open(f"{run}/{name}", os.O_RDWR | os.O_NONBLOCK)   # a writer holds it: no wait to open
    try:
        refused(run, f"{run}/{name} is a pipe")
    finally:
        os.close(fd)


def test_a_name_given_that_an_earlier_run_holds_is_warned_with_the_folder_the_run_took(tmp_path):
    """`train … --name first` typed twice trained into runs/first-2 and said so only in the
    summary's path: `predict runs/first`, as the quickstart types it, read the earlier model."""
    from lancetnic_flow.errors import UserError
    from lancetnic_flow.runs.folder import new_run_dir, renamed_run_warning

    out = str(tmp_path / "runs")
    first = new_run_dir(out, "first")
    (tmp_path / "runs" / "first" / "model.safetensors").write_bytes(b"")
    second = new_run_dir(out, "first")
    assert renamed_run_warning(first, "first") is None and renamed_run_warning(second, None) is None
    said = UserError(renamed_run_warning(second, "first")).said("cli")[0]
    assert said.startswith("--name first: that folder holds an earlier run, so this one is first-2 (")
    assert "predict and evaluate it there, not with first, or give a new --name" in said
