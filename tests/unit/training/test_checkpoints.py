"""training/checkpoints.py: a checkpoint restores only into the network and optimisers that wrote it."""
from __future__ import annotations

import pytest
import torch

from lancetnic_flow.errors import UserError
from lancetnic_flow.training.checkpoints import restore_weights
from lancetnic_flow.training.state import TrainState


def _state(model: torch.nn.Module, opt: torch.optim.Optimizer) -> TrainState:
    return TrainState(model=model.state_dict(), optimizers=[opt.state_dict()])


def test_another_runs_checkpoint_is_refused_in_words_and_the_runs_own_restores():
    # a checkpoint of the same data and features but --hidden 64 copied into a --hidden 32 run
    # ended `train --resume` in load_state_dict's "size mismatch" as an internal error
    wide = torch.nn.Linear(3, 4)
    narrow = torch.nn.Linear(3, 2)
    adam = torch.optim.Adam(narrow.parameters())
    for saved in (_state(wide, torch.optim.Adam(wide.parameters())),
                  TrainState(model=narrow.state_dict(), optimizers=[])):   # an optimiser short
        with pytest.raises(UserError, match="checkpoint.safetensors does not fit the network.*another run's"):
            restore_weights("runs/r", narrow, [adam], saved)
    own = torch.nn.Linear(3, 2)
    restore_weights("runs/r", own, [torch.optim.Adam(own.parameters())], _state(narrow, adam))
    assert torch.equal(own.weight, narrow.weight)


def test_a_checkpoint_continues_only_as_the_network_it_trained_whatever_config_json_now_says():
    # config.json's model.name edited to FastTextBag (the same tensors) resumed a ScalpelMC checkpoint
    # as FastTextBag and saved it as one; --hidden edited was load_state_dict's internal error
    from lancetnic_flow.training.checkpoints import check_network, network_of, pack, unpack

    meta = {"model": "ScalpelMC", "net": "ScalpelNet", "kwargs": {"dim": 8, "hidden": 64, "pooling": "weighted"},
            "task": "classify", "thresholds": [0.5]}
    tensors, doc = pack(TrainState(network=network_of(meta)).to_checkpoint())
    saved = TrainState.from_checkpoint(unpack(tensors, doc))
    check_network("runs/r", saved, network_of(meta))   # its own network, through the file's JSON
    for other in ({**meta, "model": "FastTextBag"}, {**meta, "kwargs": {**meta["kwargs"], "hidden": 32}}):
        with pytest.raises(UserError, match="holds a network other than the one runs/r/config.json now builds"):
            check_network("runs/r", saved, network_of(other))
    check_network("runs/r", TrainState(), network_of({**meta, "model": "FastTextBag"}))   # written before it recorded one
