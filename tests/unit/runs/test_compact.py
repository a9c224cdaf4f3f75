"""runs/compact.py: a copy with 8-bit weights is written whole or not left behind."""
from __future__ import annotations

import numpy as np
import pytest

from lancetnic_flow.errors import UserError
from lancetnic_flow.features.vectorize import FittedFeatures
from lancetnic_flow.models.scalpel import ScalpelNet
from lancetnic_flow.runs import compact
from lancetnic_flow.runs.folder import save_run
from lancetnic_flow.runs.loading import load_run


def _run(path: str) -> None:
    buckets = 1 << 15   # × hidden 4: past stored_weights.MIN_ELEMENTS, a matrix stored in 8 bits
    model = ScalpelNet(buckets, classes=2, hidden=4)
    save_run(path, config={}, features=FittedFeatures(mode="hashing", buckets=buckets, labels=["a", "b"],
                                                      idf=np.ones(buckets, np.float32)),
             model=model, model_meta={"model": "ScalpelMC", "net": "ScalpelNet", "kwargs": model.config,
                                      "task": "classify"}, metrics={}, history=[])


def test_a_copy_stopped_mid_way_leaves_no_folder_and_a_new_export_writes_it_whole(tmp_path, monkeypatch):
    # a full disk under --compact DIR left DIR without model.json, refused as "an unfinished run: train
    # it again", and `export --compact DIR` again refused DIR as not empty
    run, dst = str(tmp_path / "run"), str(tmp_path / "int8")
    _run(run)
    real = compact.write_weights

    def full(*args, **kwargs):
        raise UserError(f"no space left on device at {dst}/model.safetensors")

    monkeypatch.setattr(compact, "write_weights", full)
    with pytest.raises(UserError, match="no space left"):
        compact.compact_run(run, dst)
    assert not (tmp_path / "int8").exists()
    monkeypatch.setattr(compact, "write_weights", real)
    assert compact.compact_run(run, dst)["matrices"] and load_run(dst).meta["quantised"]["bits"] == 8


def test_a_compact_copy_takes_no_writer_lock_of_the_run_it_copies(tmp_path):
    # the run's .lock (its trainer's, runs/run_lock.py) was copied into the compact run as one of its files
    run, dst = tmp_path / "run", tmp_path / "int8"
    _run(str(run))
    (run / ".lock").write_text('{"pid": 1, "host": "h", "since": 0}')
    compact.compact_run(str(run), str(dst))
    assert (dst / "model.json").exists() and ".lock" not in [p.name for p in dst.iterdir()]
