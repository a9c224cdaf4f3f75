"""runs/weights_size.py: the memory a run's model takes once loaded is read
from its weights' header before anything is loaded — the dense matrix of a
LinearSVM that the file keeps as a few entries included."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from lancetnic_flow.features.vectorize import FittedFeatures
from lancetnic_flow.runs.folder import save_run
from lancetnic_flow.runs.loading import load_run
from lancetnic_flow.runs.weights_size import loaded_bytes


def sparse_linear_run(path, dim: int = 1 << 17, classes: int = 3) -> str:
    """A LinearSVM-shaped run whose weights are mostly zero: stored as entries, a few KiB."""
    from lancetnic_flow.models.scalpel import ScalpelNet

    model = ScalpelNet(dim, classes=classes, layers=0, dropout=0.0, margin=True)
    with torch.no_grad():
        model.input.weight.zero_()
        model.input.weight[::1000, 0] = 1.0
    features = FittedFeatures(mode="hashing", buckets=dim, labels=[f"c{i}" for i in range(classes)])
    save_run(str(path), config={"data": {"text": ["text"]}}, features=features, model=model,
             model_meta={"model": "LinearSVM", "net": "ScalpelNet", "kwargs": model.config, "task": "classify"},
             metrics={}, history=[])
    return str(path)


def test_the_loaded_size_counts_the_dense_matrix_a_file_of_entries_holds(tmp_path):
    run = sparse_linear_run(tmp_path / "run")
    stored = (tmp_path / "run" / "model.safetensors").stat().st_size
    dense = (1 << 17) * 3 * 4
    assert stored < dense // 10                       # the file is a small part of what loading makes
    held = sum(a.nbytes for a in load_run(run).linear.state.values())
    assert held >= dense
    assert held <= loaded_bytes(run, torch_network=False) <= held + 3 * stored + 28 * ((1 << 17) // 1000 + 1)


def test_a_network_loaded_through_torch_counts_its_state_beside_the_network(tmp_path):
    run = sparse_linear_run(tmp_path / "run")
    assert loaded_bytes(run, torch_network=True) - loaded_bytes(run, torch_network=False) >= (1 << 17) * 3 * 4


def test_an_unreadable_weights_file_is_left_for_loading_to_name(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\x01")
    assert loaded_bytes(str(tmp_path)) == 0
    assert loaded_bytes(str(tmp_path / "missing")) == 0


def test_weights_that_are_a_pipe_are_left_for_loading_to_name_without_waiting_for_a_writer(tmp_path):
    import os

    os.mkfifo(tmp_path / "model.safetensors")   # opened to read, a pipe without a writer waits for one
    assert loaded_bytes(str(tmp_path)) == 0
