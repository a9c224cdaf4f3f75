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
