"""models/linear_arrays.py: LinearSVM as NumPy arrays is the network, without
torch: the same model.json record, the same tensors by name and order, the
same steps to the bit (with its twin too), the same scores, the same saved
file; and weights that do not fit are refused, not half loaded."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from lancetnic_flow.features.rows import RowBlock
from lancetnic_flow.models import create_model
from lancetnic_flow.models.calibrate import calibrate
from lancetnic_flow.models.linear_arrays import LinearArrays, create_linear, is_arrays
from lancetnic_flow.models.margin import add_twin, adopt_twin, margin_step, twin_learns
from lancetnic_flow.runs.stored_weights import encode
from lancetnic_flow.runs.tensor_file import write_safetensors

ARGS = dict(dim=300, classes=4, regress=False, hidden=64, layers=0, dropout=0.2, embed=8, numeric=0)


def batches(n: int = 6, rows: int = 40, dim: int = 300, classes: int = 4, label_sets: bool = False, seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        lengths = rng.integers(1, 9, rows)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        indices = rng.integers(0, dim, offsets[-1]).astype(np.int32)
        values = rng.random(offsets[-1]).astype(np.float32)
        labels = ((rng.random((rows, classes)) < 0.3).astype(np.uint8) if label_sets
                  else rng.integers(-1, classes, rows).astype(np.int32))   # -1: a row without a label
        yield RowBlock(indices, offsets, values, labels)


def both(twin: bool):
    net, net_meta = create_model("LinearSVM", **ARGS)
    arrays, meta = create_linear("LinearSVM", **ARGS)
    if twin:
        add_twin(net)
        add_twin(arrays)
    return net, net_meta, arrays, meta


def bits(state: dict) -> dict:
    return {k: np.asarray(v.detach().numpy() if isinstance(v, torch.Tensor) else v).view(np.uint32)
            for k, v in state.items()}


def assert_same_state(net, arrays):
    a, b = bits(net.state_dict()), bits(arrays.state_dict())
    assert list(a) == list(b)                                    # names, in the network's order
    for k in a:
        assert a[k].shape == b[k].shape and np.array_equal(a[k], b[k]), k


@pytest.mark.parametrize("twin", [False, True])
def test_the_arrays_have_the_networks_record_tensors_and_order(twin):
    net, net_meta, arrays, meta = both(twin)
    assert meta == net_meta and is_arrays(arrays) and not is_arrays(net)
    assert list(meta["kwargs"].items()) == list(net_meta["kwargs"].items())   # model.json written key for key
    assert_same_state(net, arrays)


@pytest.mark.parametrize("label_sets", [False, True])
@pytest.mark.parametrize("twin", [False, True])
def test_steps_on_the_arrays_equal_the_networks_to_the_bit(twin, label_sets):
    net, _, arrays, _ = both(twin)
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    for b in batches(label_sets=label_sets):
        s1, l1 = margin_step(net, b.indices, b.offsets, b.values, b.labels, 0.3)
        s2, l2 = margin_step(arrays, b.indices, b.offsets, b.values, b.labels, 0.3)
        assert np.array_equal(np.asarray(s1), s2) and l1 == l2
    if twin:
        val = next(batches(1, label_sets=label_sets, seed=9))
        assert twin_learns(net, val, 0.1, rng_a) == twin_learns(arrays, val, 0.1, rng_b)
    assert_same_state(net, arrays)
    assert np.abs(arrays.weight).sum() > 0                      # the steps did move the weights
    if twin:
        adopt_twin(net)
        adopt_twin(arrays)
        assert "twin_weight" not in arrays.state_dict()
        assert_same_state(net, arrays)


def test_the_arrays_score_as_the_networks_forward_and_calibrate_to_the_same_scale():
    net, _, arrays, _ = both(False)
    for b in batches(3):
        margin_step(net, b.indices, b.offsets, b.values, b.labels, 0.3)
        margin_step(arrays, b.indices, b.offsets, b.values, b.labels, 0.3)
    val = list(batches(2, seed=3))
    from lancetnic_flow.models.inputs import outputs_of
    for b in val:
        want = outputs_of(net, b, "cpu")["logits"].numpy()
        np.testing.assert_allclose(outputs_of(arrays, b, "cpu")["logits"], want, rtol=1e-6, atol=1e-6)
    a, b = calibrate(net, val, scale=True), calibrate(arrays, val, scale=True)
    assert a.scale == pytest.approx(b.scale, rel=1e-6) and a.scale != 1.0
    assert float(arrays.logit_scale) == pytest.approx(float(net.logit_scale), rel=1e-6)


def test_the_saved_file_of_the_arrays_is_the_networks_byte_for_byte():
    net, _, arrays, _ = both(False)
    for b in batches(4, dim=300):
        margin_step(net, b.indices, b.offsets, b.values, b.labels, 0.3)
        margin_step(arrays, b.indices, b.offsets, b.values, b.labels, 0.3)
    files = []
    for model in (net, arrays):
        buf = io.BytesIO()
        write_safetensors(buf, encode(model.state_dict()))
        files.append(buf.getvalue())
    assert files[0] == files[1] and len(files[0]) > 300 * 4


def test_weights_that_do_not_fit_the_arrays_are_refused_and_the_weights_kept():
    arrays, _ = create_linear("LinearSVM", **ARGS)
    arrays.weight[0, 0] = 1.5
    state = {k: v.copy() for k, v in arrays.state_dict().items()}
    with pytest.raises(RuntimeError, match="twin"):
        arrays.load_state_dict({**state, "twin_weight": state["input.weight"]})
    with pytest.raises(RuntimeError, match=r"input.bias is \(5,\)"):
        arrays.load_state_dict({**state, "input.bias": np.zeros(5, np.float32)})
    assert arrays.weight[0, 0] == 1.5
    net, _ = create_model("LinearSVM", **ARGS)
    arrays.load_state_dict(net.state_dict())                   # a network's tensors load as they are
    assert arrays.weight[0, 0] == 0.0


def test_a_model_the_arrays_cannot_be_is_refused():
    with pytest.raises(ValueError, match="numeric"):
        create_linear("LinearSVM", **{**ARGS, "numeric": 2})
    assert isinstance(create_linear("LinearSVM", **ARGS)[0], LinearArrays)


@pytest.mark.parametrize("twin", [False, True])
def test_a_checkpoint_of_the_arrays_loads_back_into_them_and_into_the_network(tmp_path, twin):
    from lancetnic_flow.training.checkpoints import load_checkpoint, save_checkpoint

    net, _, arrays, _ = both(twin)
    for b in batches(3):
        margin_step(net, b.indices, b.offsets, b.values, b.labels, 0.3)
        margin_step(arrays, b.indices, b.offsets, b.values, b.labels, 0.3)
    arrays.logit_scale.fill(2.5)
    net.logit_scale.fill_(2.5)
    save_checkpoint(str(tmp_path), {"model": arrays.state_dict(), "rng": None})
    saved = load_checkpoint(str(tmp_path))["model"]
    fresh_arrays, fresh_net = both(twin)[2], both(twin)[0]
    fresh_arrays.load_state_dict(saved)
    fresh_net.load_state_dict({k: torch.as_tensor(v) for k, v in saved.items()})
    assert_same_state(net, fresh_arrays)
    assert_same_state(fresh_net, fresh_arrays)


def test_a_twin_starts_as_the_weights_it_twins_fresh_stepped_or_loaded():
    _, _, fresh, _ = both(False)
    add_twin(fresh)                        # fresh: zeros without copying the zero weights
    assert not fresh.twin_weight.any() and fresh.twin_weight.shape == fresh.weight.shape
    _, _, stepped, _ = both(False)
    b = next(batches(1))
    margin_step(stepped, b.indices, b.offsets, b.values, b.labels, 0.5)
    add_twin(stepped)                      # stepped before its twin came: the twin copies the steps
    assert stepped.weight.any() and np.array_equal(stepped.twin_weight, stepped.weight)
    _, _, loaded, _ = both(False)
    loaded.load_state_dict({**loaded.state_dict(), "input.weight": stepped.weight, "input.bias": stepped.bias})
    add_twin(loaded)
    assert np.array_equal(loaded.twin_weight, stepped.weight) and np.array_equal(loaded.twin_bias, stepped.bias)
