"""How often LinearSVM's ``--ddp`` ranks average their weights.

Between two syncs each rank learns from its own share alone: replicas that
learn apart drift apart, the more the more ranks there are, and their mean
then scores under one process's model. Up to four ranks one sync at each
epoch's end kept the averaged model at one process's accuracy; above,
the default syncs every ``steps // (ranks / 4)²`` steps of an epoch and at
its end (docs/benchmarks.md, "Eight ranks: more partitions, more syncs").
``--sync-every N`` sets it by hand.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from ...plurals import counted

# Up to this many ranks, one sync at each epoch's end is enough (measured).
EPOCH_SYNC_RANKS = 4


@dataclass(frozen=True)
class Cadence:
    """When the ranks of one epoch average: every ``every`` steps (0: only at
    the epoch's end, which always syncs), and who chose it."""

    every: int
    per_epoch: int          # syncs in the epoch, its end included
    chosen_by: str          # "--sync-every" or "default"

    def due(self, done: int) -> bool:
        """Whether the step that brings the epoch to ``done`` steps ends with a sync
        (the epoch's end syncs anyway: not counted here)."""
        return self.every > 0 and done % self.every == 0

    def describe(self, ranks: int) -> str:
        """What the run says about it."""
        if self.per_epoch <= 1:
            return f"the {ranks} ranks average their weights at each epoch's end"
        how = "--sync-every" if self.chosen_by == "--sync-every" else f"{ranks} ranks"
        return (f"the {ranks} ranks average their weights every {counted(self.every, 'step')}, {self.per_epoch} times an epoch "
                f"({how}; each sync sends about twice the weights a rank holds)")


def syncs_per_epoch(ranks: int) -> int:
    """The default: 1 up to :data:`EPOCH_SYNC_RANKS` ranks, then ``ceil((ranks / 4)²)``."""
    if ranks <= EPOCH_SYNC_RANKS:
        return 1
    return math.ceil((ranks / EPOCH_SYNC_RANKS) ** 2)


def cadence(ranks: int, steps_per_epoch: int, sync_every: int | None) -> Cadence:
    """The epoch's cadence: ``sync_every`` (the user's) when given, else the
    default's syncs spread evenly over the epoch's ``steps_per_epoch`` steps."""
    steps = max(1, steps_per_epoch)
    if sync_every:
        return Cadence(sync_every, max(1, -(-steps // sync_every)), "--sync-every")
    want = syncs_per_epoch(ranks)
    if ranks <= 1 or want <= 1 or steps <= 1:
        return Cadence(0, 1, "default")
    every = max(1, steps // want)
    return Cadence(every, -(-steps // every), "default")


# Between syncs the ranks still meet now and then (whether any has rows left,
# rank 0's stop): MEET_FIRST steps into an epoch, then about every
# MEET_SECONDS of steps, as rank 0 measures them (meets.py: a meet is read at
# the next, so no rank waits at one). Meets that waited every 32 steps cost
# two ranks a quarter of their epoch rate on the Debian file ten times over
# (docs/benchmarks.md, "Ranks own their shares").
MEET_FIRST = 32
MEET_SECONDS = 0.25
MEET_MAX = 4096


def meet_interval(step_seconds: float) -> int:
    """Steps to the next meet, for steps that took ``step_seconds`` each
    (rank 0's measure since the last meet): about MEET_SECONDS of steps,
    never fewer than MEET_FIRST nor more than MEET_MAX."""
    if not step_seconds > 0:
        return MEET_FIRST
    return int(min(MEET_MAX, max(MEET_FIRST, MEET_SECONDS / step_seconds)))
