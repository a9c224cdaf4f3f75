"""Where a training run is: exactly what a checkpoint holds, and what a
``--ddp`` segment starts from.

The stream position is a count (``batches`` of ``epoch``): an epoch's batches
are a pure function of the seed and the epoch, so a resumed run regenerates
the epoch and skips the batches already trained.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..scores import val_scores


@dataclass
class TrainState:
    key: str = ""                      # the cache entry trained on: a resume needs the same data and options
    # What the key is made of, in the clear (dataflow/manifest.key_parts): a resume whose key differs
    # names what changed. None: a checkpoint written before they were kept.
    key_parts: dict | None = None
    epoch: int = 0                     # the epoch to continue in (0-based)
    batches: int = 0                   # batches of that epoch already trained
    rows: int = 0                      # rows of that epoch already trained
    seconds: float = 0.0               # and the seconds spent training them: the epoch's rows/s counts both parts
    step: int = 0                      # optimiser steps so far (the learning-rate schedule)
    stale: int = 0                     # epochs since --monitor last improved
    total_steps: int | None = None     # of the whole run, as the schedule was planned
    total_rows: int = 0                # training rows per epoch
    history: list = field(default_factory=list)      # one record per finished epoch
    confusions: list = field(default_factory=list)   # per epoch, kept out of history.csv
    best: dict | None = None           # the best epoch by --monitor: its score, metrics, sample and weights
    train_metrics: dict | None = None  # the epoch's training metrics so far (mid-epoch only)
    model: dict | None = None          # weights
    optimizers: list | None = None     # optimiser states
    rng: Any = None                    # the trainer's torch RNG state
    ddp: dict | None = None            # --ddp runs: {"ranks": N, "rng": [each rank's [CPU, CUDA] RNG state]}
    # What the run decided from its data before the checkpoint (metrics.json's "decided"): a resumed
    # run does not decide it all again (config.json names the analyzer --analyzer auto chose).
    decided: dict | None = None
    # The network trained (model.json's "model", "net" and "kwargs"): a resume whose config.json
    # now builds another one (edited, or another run's) is refused, not trained on from these weights.
    network: dict | None = None
    # The block size and worker threads the run cut its inputs by: a resume cuts them the same,
    # whatever its own plan, so the stopped epoch's batches are the ones trained before.
    partitioning: list | None = None
    # The digest of the cache entry's training shards when the checkpoint was written (their
    # order, rows and CRC-32s): an entry rebuilt since by another run with other partitions
    # would replay other batches than those trained. None: no complete entry, or written before.
    shards: str | None = None

    def to_checkpoint(self) -> dict[str, Any]:
        """The checkpoint's content: every field, by name, without copies."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_checkpoint(cls, saved: dict[str, Any]) -> "TrainState":
        """A checkpoint's content (any version this package wrote) as a state."""
        known = {f.name for f in dataclasses.fields(cls)}
        state = cls(**{k: v for k, v in saved.items() if k in known})
        state.history, confusions = _flat_history(state.history or [])
        state.confusions = state.confusions or confusions
        return state


def _flat_history(history: list[dict]) -> tuple[list[dict], list]:
    """Epoch records with their validation scores as ``val_*`` keys. Checkpoints
    of --ddp runs from before the training step was shared nest them under
    "val" (with the confusion matrix): flatten those."""
    flat, confusions = [], []
    for h in history:
        if "val" in h:
            h = dict(h)
            val = h.pop("val") or {}
            h.update(val_scores(val))
            confusions.append(val.get("confusion"))
        flat.append(h)
    return flat, confusions if len(confusions) == len(history) else []
