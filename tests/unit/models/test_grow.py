"""models/grow.py: a saved network's weights in one built for more classes. Old
classes keep their weights in their places, a value column stays last, new
classes keep the fresh network's values (zeros for LinearSVM); anything but
a class axis that grew is refused."""
from __future__ import annotations

import pytest
import torch

from lancetnic_flow.models import create_model
from lancetnic_flow.models.grow import class_axis, grow_into, grown_tensor


def _net(name: str, classes: int, regress: bool = False, seed: int = 0, layers: int = 1):
    torch.manual_seed(seed)
    model, _ = create_model(name, dim=50, classes=classes, regress=regress, hidden=8, layers=layers, dropout=0.0,
                            embed=4, numeric=0)
    return model


def _trained(model):
    """Weights no fresh network has: every tensor filled with its own distinct values."""
    with torch.no_grad():
        for i, t in enumerate(model.state_dict().values()):
            if t.is_floating_point():
                t.copy_(torch.arange(t.numel(), dtype=t.dtype).reshape(t.shape) + 1000.0 * (i + 1))
    return model


def test_linear_svm_keeps_its_old_classes_columns_and_starts_new_ones_at_zero():
    old = _trained(_net("LinearSVM", 3))
    new = _net("LinearSVM", 5, seed=1)
    grew = grow_into(new, old.state_dict(), 3, 5)
    assert set(grew) == {"input.weight", "input.bias"}
    w, b = new.input.weight.detach(), new.input.bias.detach()
    assert w.shape == (50, 5) and torch.equal(w[:, :3], old.input.weight.detach())
    assert torch.equal(b[:3], old.input.bias.detach())
    assert not w[:, 3:].any() and not b[3:].any()     # a LinearSVM's weights start at zero
    assert torch.equal(new.logit_scale, old.logit_scale)


def test_a_hidden_layer_network_copies_its_body_and_grows_its_class_head():
    old = _trained(_net("ScalpelMC", 2))
    fresh = _net("ScalpelMC", 4, seed=7)
    init = {k: v.clone() for k, v in fresh.state_dict().items()}
    grow_into(fresh, old.state_dict(), 2, 4)
    for name, tensor in old.state_dict().items():
        got = fresh.state_dict()[name]
        if name.startswith("heads.classify"):
            assert torch.equal(got[:2], tensor) and torch.equal(got[2:], init[name][2:])
        else:
            assert torch.equal(got, tensor), name


def test_a_value_column_after_the_classes_stays_last():
    """Without hidden layers a multitask network's sparse layer has classes + 1 columns,
    the value's last: it moves to the end, past the new classes."""
    old = torch.arange(20.0).reshape(5, 4)           # 3 classes and the value
    fresh = torch.full((5, 6), -1.0)                 # 5 classes and the value
    out = grown_tensor(old, fresh, 3, 5)
    assert torch.equal(out[:, :3], old[:, :3]) and torch.equal(out[:, 5], old[:, 3])
    assert (out[:, 3:5] == -1.0).all()
    net = _net("ScalpelMTSK", 5, regress=True, layers=0)
    grow_into(net, _trained(_net("ScalpelMTSK", 3, regress=True, layers=0)).state_dict(), 3, 5)
    assert net.input.weight.shape == (50, 6)


def test_a_sequence_model_and_an_unchanged_network_load_as_they_were():
    old = _trained(_net("LancetMC", 3))
    same = _net("LancetMC", 3, seed=4)
    assert grow_into(same, old.state_dict(), 3, 3) == []
    assert all(torch.equal(same.state_dict()[k], v) for k, v in old.state_dict().items())
    more = _net("LancetMC", 4, seed=4)
    assert grow_into(more, old.state_dict(), 3, 4) == ["heads.classify.weight", "heads.classify.bias"]


def test_another_network_or_another_change_is_refused():
    with pytest.raises(ValueError, match="cannot grow"):
        class_axis((50, 3), (60, 5), 3, 5)           # two axes changed
    with pytest.raises(ValueError, match="cannot grow"):
        class_axis((50, 3), (50, 4), 3, 5)           # not by the classes added
    with pytest.raises(ValueError, match="cannot grow"):
        class_axis((50, 5), (50, 3), 5, 3)           # fewer classes
    assert class_axis((8, 3), (8, 3), 3, 5) is None
    with pytest.raises(ValueError, match="another network"):
        grow_into(_net("ScalpelMC", 4), _net("LinearSVM", 3).state_dict(), 3, 4)


@pytest.mark.parametrize("old_kind,new_kind", [("net", "arrays"), ("arrays", "arrays"), ("arrays", "net")])
def test_a_linear_svms_arrays_grow_as_its_network_does_from_either_kind(old_kind, new_kind):
    import numpy as np

    from lancetnic_flow.models.linear_arrays import create_linear

    args = dict(dim=50, regress=False, hidden=8, layers=1, dropout=0.0, embed=4, numeric=0)
    net_old = _trained(_net("LinearSVM", 3))
    old_state = {k: v.numpy().copy() for k, v in net_old.state_dict().items()} if old_kind == "arrays" \
        else net_old.state_dict()
    want = _net("LinearSVM", 5, seed=1)
    grow_into(want, net_old.state_dict(), 3, 5)
    new = create_linear("LinearSVM", classes=5, **args)[0] if new_kind == "arrays" else _net("LinearSVM", 5, seed=1)
    grew = grow_into(new, old_state, 3, 5)
    assert set(grew) == {"input.weight", "input.bias"}
    for name, t in want.state_dict().items():
        got = new.state_dict()[name]
        assert np.array_equal(np.asarray(got if isinstance(got, np.ndarray) else got.detach().numpy()),
                              t.detach().numpy()), name
    assert isinstance(new.state_dict()["input.weight"], np.ndarray) == (new_kind == "arrays")
