"""training/state.py: a checkpoint holds what the run decided from its data, so
a resumed run's metrics.json says what a run never stopped says."""
from __future__ import annotations

from lancetnic_flow.training.checkpoints import pack, unpack
from lancetnic_flow.training.state import TrainState


def test_a_checkpoint_keeps_what_the_run_decided_before_it():
    decided = {"analyzer": {"analyzer": "char_wb", "char_script_share": 1.0, "letters_sampled": 75100},
               "format": [{"path": "d.txt", "format": "fasttext"}], "cache": "none"}
    state = TrainState(key="k", epoch=1, batches=8, decided=decided)
    tensors, meta = pack(state.to_checkpoint())
    back = TrainState.from_checkpoint(unpack(tensors, meta))
    assert back.decided == decided and back == state
    assert TrainState.from_checkpoint({"key": "k"}).decided is None   # a checkpoint written before it
