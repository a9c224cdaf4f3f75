"""When the ranks of a rule that averages weights meet within an epoch, and
what they agree on there.

Between syncs each rank steps on its own share; every so often the ranks
still have to agree on three things: whether any rank has rows left, rank 0's
word (stop, for a Ctrl-C) and, from rank 0's measure of its steps, when to
meet next (:func:`.cadence.meet_interval`). A meet that every rank waits at
holds the whole group to its slowest rank at that moment, so on a machine
whose cores run unevenly the ranks lose in waiting what they won by
splitting the work. Here a meet is posted without waiting (an asynchronous
``all_reduce``), and its answer is read at the next meet: ranks may drift
apart by one interval of steps, and the wait that is left is the real
difference between their shares of work, paid once at the epoch's end.
Every rank reads the same answers at the same steps, so they stop, and
schedule their meets, together, as with waiting meets.

Near the epoch's end (from the planned last step on), meets wait again, at
every step: there the ranks must learn together that no rank has a row left.
"""
from __future__ import annotations

import time
from typing import Any

import torch

from .cadence import MEET_FIRST, meet_interval


class Meets:
    """The meets of one rank in one epoch (or the rest of one, from step ``done``)."""

    def __init__(self, dist: Any, device: Any, rank: int, done: int):
        self.dist, self.device, self.rank = dist, device, rank
        self.at, self.step = time.perf_counter(), done   # the last meet: when, at which step of the epoch
        self.next = done + MEET_FIRST                     # the step (a count of the epoch's steps) of the next
        self.pending: tuple[Any, torch.Tensor] | None = None   # the last meet's collective, not read yet

    def due(self, done: int, planned: int) -> bool:
        """Whether the ranks meet after the step that brings the epoch to ``done`` steps of ``planned``."""
        return done >= self.next or done >= planned

    def meet(self, done: int, planned: int, has_batch: bool, word: int) -> tuple[int, int]:
        """Meet after the epoch's ``done``-th step; ``word``: rank 0's (the others
        give 0). Returns what the ranks agreed at the last meet read — how many
        ranks had a batch, rank 0's word — the same on every rank. Before
        ``planned`` that is the previous meet (this one is read at the next);
        from ``planned`` on, this one, waited for."""
        tick = time.perf_counter()
        proposal = meet_interval((tick - self.at) / max(1, done - self.step)) if self.rank == 0 else 0
        posted = self._post(has_batch, word, proposal)
        if done >= planned:   # the epoch's end: every rank must see the same last batch
            earlier = self.drain()
            active, agreed, _ = self._read(posted)
            answer = (active, earlier or agreed)   # a stop read late is still a stop
            self.next = done + 1
        else:
            if self.pending is None:   # the first meet: nothing to read yet, go on and meet again soon
                answer, every = (1, 0), MEET_FIRST
            else:
                active, agreed, every = self._read(self.pending)
                answer = (active, agreed)
            self.pending = posted
            self.next = done + every
        self.at, self.step = time.perf_counter(), done
        return answer

    def drain(self) -> int:
        """Wait for the meet still in flight (every rank drains at the same step
        before any other collective); its word, or 0."""
        if self.pending is None:
            return 0
        _, word, _ = self._read(self.pending)
        self.pending = None
        return word

    def _post(self, has_batch: bool, word: int, proposal: int) -> tuple[Any, torch.Tensor]:
        tail = torch.tensor([1.0 if has_batch else 0.0, float(word), float(proposal)], device=self.device,
                            dtype=torch.float64)
        return self.dist.all_reduce(tail, async_op=True), tail

    @staticmethod
    def _read(posted: tuple[Any, torch.Tensor]) -> tuple[int, int, int]:
        work, tail = posted
        work.wait()
        active, word, every = (int(round(v)) for v in tail.tolist())
        return active, word, every
