"""Which shards each ``--ddp`` rank reads, its rows a step, and how many steps an epoch has.

A partition's shards (its chunks) always go to one rank together, in chunk
order. Rules that exchange gradients deal the partitions again each epoch,
in the epoch's seeded order, each to the rank with the fewest rows so far.
Rules that average weights (the linear model) deal them once for the run —
each rank owns its share, reads it once and keeps it — and balance that deal
by rows: every sync waits for the rank with the most rows, so a share one
partition heavier than the others costs every rank that partition's time at
each sync (docs/benchmarks.md, "Ranks own their shares").
"""
from __future__ import annotations

import numpy as np

from ...dataflow.stream import epoch_order

# Swaps tried to even out an owned deal, per rank (each takes one pass over two shares).
EVEN_OUT_ROUNDS = 8


def shares(shards: list, world: int, seed: int, epoch: int, owned: bool = False) -> list[list]:
    """Every rank's shards in ``epoch`` (see :func:`share`)."""
    owned = owned and world > 1
    by_part: dict[int, list] = {}
    for s in shards:
        by_part.setdefault(s.partition, []).append(s)
    keys = sorted(by_part)
    rows = np.array([sum(s.rows for s in by_part[k]) for k in keys], np.int64)
    order = epoch_order(len(keys), seed, 0 if owned else epoch)
    if owned:   # largest first (ties in the seeded order): the greedy deal ends closer
        order = order[np.argsort(-rows[order], kind="stable")]
    load = [0] * world
    parts: list[list[int]] = [[] for _ in range(world)]
    for i in order:
        r = min(range(world), key=lambda j: (load[j], j))
        load[r] += int(rows[i])
        parts[r].append(int(i))
    if owned:
        even_out(parts, rows, EVEN_OUT_ROUNDS * world)
        # each rank visits its own partitions in each epoch's order, drawn from its own seed
        parts = [[p[i] for i in epoch_order(len(p), seed * 1000 + r, epoch)] for r, p in enumerate(parts)]
    return [[s for i in p for s in sorted(by_part[keys[i]], key=lambda s: s.chunk)] for p in parts]


def share(shards: list, rank: int, world: int, seed: int, epoch: int, owned: bool = False) -> list:
    """Rank ``rank``'s shards in ``epoch``: disjoint from the other ranks',
    together covering every shard, with nearly equal rows.

    ``owned`` (a rule that averages weights): the partitions are dealt once,
    balanced by rows (:func:`even_out`), and each rank keeps its own for the
    whole run, visiting them in each epoch's seeded order — iterative
    parameter mixing as its authors ran it, each machine on its own data. A
    rank then reads (and keeps) its own shards only; dealt again each epoch,
    two ranks each read nearly every shard of the corpus over a run
    (docs/benchmarks.md). One rank (a trainer task) visits every partition in
    the order a run in the trainer's process does, owned or not."""
    return shares(shards, world, seed, epoch, owned)[rank]


def rank_batches(shards: list, world: int, seed: int, epoch: int, batch_size: int, owned: bool = False) -> list[int]:
    """Each rank's rows a step in ``epoch``, of the global ``batch_size``. Ranks that exchange
    gradients split it in proportion to their shares (:func:`split_batch`): every step trains
    about ``batch_size`` rows in all and an epoch takes a single process's steps, however
    unevenly whole partitions deal. Split evenly, a rank whose share held every row (a corpus
    of one partition) took half a batch a step: twice a single process's steps, each at twice
    the per-example rate, and ``--ddp 2`` trained another model. ``owned`` (ranks that step on
    their own and average their weights): ``batch_size / world`` each."""
    if owned and world > 1:
        return [max(1, batch_size // world)] * world
    return split_batch([sum(s.rows for s in part) for part in shares(shards, world, seed, epoch, owned)], batch_size)


def split_batch(rows: list[int], batch_size: int) -> list[int]:
    """``batch_size`` split in proportion to ``rows`` (each rank's share), the remainder to the
    largest fractions (ties to the lower rank): the parts add up to ``batch_size``; a rank whose
    share has a row takes one a step at least."""
    total = sum(rows)
    if not total:
        return [max(1, batch_size // len(rows))] * len(rows)
    sizes = [batch_size * n // total for n in rows]
    behind = sorted(range(len(rows)), key=lambda r: (-(batch_size * rows[r] % total), r))
    for r in behind[:batch_size - sum(sizes)]:
        sizes[r] += 1
    return [max(1, b) for b in sizes]


def steps_in(shards: list, world: int, seed: int, epoch: int, batch_size: int, owned: bool = False) -> int:
    """Optimiser steps in ``epoch`` of the global ``batch_size``: the most batches a share takes
    at its rank's part of it (:func:`rank_batches`; every rank steps together)."""
    parts = shares(shards, world, seed, epoch, owned)
    sizes = rank_batches(shards, world, seed, epoch, batch_size, owned)
    return max(-(-sum(s.rows for s in part) // b) for part, b in zip(parts, sizes))


def even_out(parts: list[list[int]], rows: np.ndarray, rounds: int) -> None:
    """Lighten the heaviest share, ``rounds`` times at most, by the one move or
    swap of partitions (indices into ``rows``) with another share that leaves
    the heavier of the two lightest; in place. Each round is a sort and a
    binary search per share, so a deal of thousands of partitions costs
    milliseconds."""
    for _ in range(rounds):
        loads = [int(rows[p].sum()) for p in parts]
        hi = int(np.argmax(loads))
        heavy = rows[parts[hi]]
        best, pick = loads[hi], None
        for lo in range(len(parts)):
            gap = loads[hi] - loads[lo]
            if gap <= 0:
                continue
            got = _best_swap(heavy, rows[parts[lo]], gap)
            if got is not None and loads[lo] + (gap + got[0]) // 2 < best:
                best, pick = loads[lo] + (gap + got[0]) // 2, (lo, got[1], got[2])
        if pick is None:
            return
        lo, i, j = pick
        moved = parts[hi].pop(i)
        if j < len(parts[lo]):
            parts[hi].append(parts[lo].pop(j))
        parts[lo].append(moved)


def _best_swap(heavy: np.ndarray, light: np.ndarray, gap: int) -> tuple[int, int, int] | None:
    """The move or swap between two shares ``gap`` rows apart that leaves them
    closest: (their spread after it, the heavy share's partition, the light
    one's — ``len(light)``: a move, nothing comes back), or None if none
    brings them closer. The best sends d = heavy − light ≈ gap / 2 rows."""
    light = np.concatenate([light, [0]])
    by_size = np.argsort(light, kind="stable")
    at = np.searchsorted(light[by_size], heavy - gap / 2)
    best, pick = gap, None
    for near in (np.clip(at - 1, 0, len(light) - 1), np.clip(at, 0, len(light) - 1)):
        after = np.abs(gap - 2 * (heavy - light[by_size[near]]))
        i = int(np.argmin(after))
        if after[i] < best:
            best, pick = int(after[i]), (int(after[i]), i, int(by_size[near[i]]))
    return pick
