"""Training end to end on the session's Dask cluster: it learns, it accounts for
every row and its memory, it is reproducible, it reuses its cache (and only
when the data is unchanged), it overlaps featurisation with epoch 1, and the
run folder holds exactly what a model needs, with secrets masked."""
from __future__ import annotations

import csv
import glob
import json
import os
import shutil
import time
from pathlib import Path


from lancetnic_flow.features.vectorize import FittedFeatures
from lancetnic_flow.events import Events
from lancetnic_flow.training.orchestrator import train

from helpers import make_config

RUN_FILES = {"config.json", "features.json", "model.json", "model.safetensors", "metrics.json", "history.csv"}


class Recorder:
    """Subscribes to a run's events; keeps (kind, data, wall-clock time)."""

    def __init__(self, on=None):
        self.events = Events()
        self.log: list[tuple[str, dict, float]] = []
        self.on = on or {}
        self.events.subscribe(self)

    def __call__(self, kind, data):
        if kind == "memory":
            return
        self.log.append((kind, data, time.time()))
        if kind in self.on:
            self.on.pop(kind)(data)

    def of(self, kind):
        return [d for k, d, _ in self.log if k == kind]


def assert_rows_add_up(metrics):
    rows = metrics["rows"]
    assert set(rows) == {"read", "trained", "validated", "skipped"}
    assert rows["read"] == rows["trained"] + rows["validated"] + sum(rows["skipped"].values())


def test_training_learns_four_classes_and_reports_metrics_rows_and_memory(trained_run):
    m = trained_run.metrics
    assert m["val_accuracy"] > 0.8
    assert m["val_macro_f1"] > 0.8
    assert 0 < m["val_loss"] < 1.0
    assert len(m["labels"]) == 4
    assert isinstance(m["epochs"], list) and [e["epoch"] for e in m["epochs"]] == [1, 2, 3]
    assert all(e["train_loss"] > 0 and e["val_accuracy"] is not None for e in m["epochs"])
    assert m["epochs"][-1]["train_loss"] < m["epochs"][0]["train_loss"]
    assert m["rows"]["read"] == 8000 and m["rows"]["validated"] > 400
    assert_rows_add_up(m)
    mem = m["memory"]
    assert {"budget_bytes", "trainer_peak_rss_bytes", "workers_peak_bytes"} <= set(mem)
    assert mem["trainer_peak_rss_bytes"] > 50 * 2**20
    assert mem["workers_peak_bytes"] > 0
    assert m["seconds"] > 0
    # metrics.json on disk is the same record
    on_disk = json.loads((Path(trained_run.run) / "metrics.json").read_text())
    for key in ("val_accuracy", "val_macro_f1", "val_loss", "epochs", "rows", "memory", "seconds"):
        assert on_disk[key] == m[key]


def test_run_folder_holds_config_features_model_weights_metrics_and_history(trained_run):
    run = Path(trained_run.run)
    assert RUN_FILES <= {p.name for p in run.iterdir()}
    assert not list(run.glob("*.pt")) and not list(run.glob("*.pkl")) and not list(run.glob("*.bin"))
    model = json.loads((run / "model.json").read_text())
    assert model["model"] == "ScalpelMC" and model["kwargs"]["classes"] == 4
    features = FittedFeatures.from_json((run / "features.json").read_text())
    assert len(features.labels) == 4 and len(features.vocabulary) == len(features.idf)
    with open(run / "history.csv") as f:
        history = list(csv.DictReader(f))
    assert [int(h["epoch"]) for h in history] == [1, 2, 3]
    config = json.loads((run / "config.json").read_text())
    assert config["training"]["epochs"] == 3 and config["data"]["label"] == "label"


def _dirty_copy(src: Path, dst: Path) -> int:
    """Copy a CSV and append rows that must be skipped; returns how many."""
    shutil.copy(src, dst)
    bad = ['"",sports,1.0,2.0\n',            # empty text
           '"text with no label",,1.0,2.0\n',  # missing label
           '"   ",sports,1.0,2.0\n']         # blank text
    with open(dst, "a") as f:
        f.writelines(bad)
    return len(bad)


def test_binary_training_learns_and_counts_skipped_rows(client, corpus2, tmp_path):
    data = tmp_path / "dirty.csv"
    n_bad = _dirty_copy(corpus2, data)
    res = train(make_config(data, tmp_path, epochs=3), client=client)
    m = res.metrics
    assert len(m["labels"]) == 2
    assert m["val_accuracy"] > 0.8
    assert m["rows"]["read"] == 4000 + n_bad
    assert sum(m["rows"]["skipped"].values()) == n_bad
    assert_rows_add_up(m)


def test_same_seed_twice_with_fresh_caches_gives_identical_metrics(client, small_corpus, tmp_path):
    a = train(make_config(small_corpus, tmp_path / "a", epochs=2), client=client).metrics
    b = train(make_config(small_corpus, tmp_path / "b", epochs=2), client=client).metrics
    assert [e["train_loss"] for e in a["epochs"]] == [e["train_loss"] for e in b["epochs"]]
    assert [e["val_loss"] for e in a["epochs"]] == [e["val_loss"] for e in b["epochs"]]
    for key in ("val_accuracy", "val_macro_f1", "val_loss", "rows", "confusion", "labels"):
        assert a[key] == b[key]
    other = train(make_config(small_corpus, tmp_path / "c", epochs=1, seed=1), client=client).metrics
    assert other["epochs"][0]["train_loss"] != a["epochs"][0]["train_loss"]


def test_second_run_on_same_data_and_config_uses_the_cache_and_gives_the_same_metrics(
        client, small_corpus, tmp_path):
    cache = tmp_path / "cache"
    first = train(make_config(small_corpus, tmp_path, epochs=2, cache=cache), client=client)
    entries = os.listdir(cache)
    assert len(entries) == 1
    rec = Recorder()
    res = train(make_config(small_corpus, tmp_path, epochs=2, cache=cache), rec.events, client=client)
    fitted = rec.of("fitted")
    assert len(fitted) == 1 and fitted[0].get("cached") is True
    assert not rec.of("progress")  # no fit pass ran
    assert os.listdir(cache) == entries  # no new entry
    a, b = first.metrics, res.metrics
    for key in ("val_accuracy", "val_macro_f1", "val_loss", "rows", "confusion"):
        assert a[key] == b[key]
    # epoch 1 was featurised live the first time and read from the cache the second: same batches
    assert [e["train_loss"] for e in a["epochs"]] == [e["train_loss"] for e in b["epochs"]]


def test_changed_input_file_gets_a_new_cache_entry(client, small_corpus, tmp_path):
    data = tmp_path / "grow.csv"
    shutil.copy(small_corpus, data)
    cache = tmp_path / "cache"
    first = train(make_config(data, tmp_path, epochs=1, cache=cache), client=client)
    assert len(os.listdir(cache)) == 1
    with open(small_corpus) as src, open(data, "a") as dst:
        dst.writelines(src.readlines()[1:201])  # 200 more rows, no header
    rec = Recorder()
    second = train(make_config(data, tmp_path, epochs=1, cache=cache), rec.events, client=client)
    assert len(os.listdir(cache)) == 2
    assert not rec.of("fitted")[0].get("cached")
    assert second.metrics["rows"]["read"] == first.metrics["rows"]["read"] + 200


def test_separate_validation_set_is_used_for_validation(client, corpus4, tmp_path):
    lines = corpus4.read_text().splitlines(keepends=True)
    train_file, val_file = tmp_path / "train.csv", tmp_path / "val.csv"
    train_file.write_text("".join(lines[:5001]))
    val_file.write_text(lines[0] + "".join(lines[5001:6001]))
    res = train(make_config(train_file, tmp_path, val=[val_file], epochs=2), client=client)
    m = res.metrics
    assert m["rows"]["trained"] == 5000  # --val-fraction is ignored: every training row trains
    assert m["rows"]["validated"] == 1000
    assert sum(sum(r) for r in m["confusion"]) == 1000
    assert m["val_accuracy"] > 0.75
    assert_rows_add_up(m)


def test_epoch_one_trains_while_partitions_are_still_being_featurised(client, corpus4, tmp_path):
    cache = tmp_path / "cache"
    seen = {}

    def on_first_batch(data):
        seen["wall"] = time.time()
        seen["shards"] = len(glob.glob(str(cache / "*" / "shards" / "*.npz")))

    rec = Recorder(on={"batch": on_first_batch})
    cfg = make_config(corpus4, tmp_path, epochs=1, cache=cache, blocksize=150_000)
    cfg.training.shuffle_buffer = 256
    res = train(cfg, rec.events, client=client)
    shards = glob.glob(str(cache / "*" / "shards" / "*.npz"))
    manifest = json.loads(next(cache.glob("*/manifest.json")).read_text())
    assert len(manifest["results"]) >= 6  # 2.3 MB in 150 kB partitions: 16 of them
    assert "wall" in seen
    # when the first batch was trained, some partitions were not yet featurised ...
    assert seen["shards"] < len(shards)
    # ... and the last shard was written after it
    assert seen["wall"] < max(os.stat(s).st_mtime for s in shards)
    assert res.metrics["rows"]["read"] == 8000


def test_config_json_masks_secret_storage_options(client, small_corpus, tmp_path):
    res = train(make_config(small_corpus, tmp_path, epochs=1, storage_options={"secret": "hunter2",
                                                                                "nested": {"api_token": "t0ps3cret"}}),
                client=client)
    run = Path(res.run)
    config = json.loads((run / "config.json").read_text())
    assert config["data"]["storage_options"]["secret"] == "***"
    assert config["data"]["storage_options"]["nested"]["api_token"] == "***"
    for p in run.iterdir():
        text = p.read_bytes()
        assert b"hunter2" not in text and b"t0ps3cret" not in text, p.name
