#!/usr/bin/env python
"""What two ranks on one machine would gain by averaging their weights
through shared memory instead of gloo's all-reduce over loopback TCP (not
built: the measure of the lever docs/benchmarks.md names for two ranks).

    .venv/bin/python benchmarks/shared_average.py          # ROUNDS=4, a 2^19 × 57 float32 weight

Two processes each hold a weight of the linear model's default size. Each
round times, on rank 0:

* gloo: ``all_reduce`` then a division by 2, what a rank's sync does now
  (training/ddp/comm.py, ``average_weights``);
* shared halves: each rank owns half the rows; it copies the other half
  into its slot in /dev/shm, averages its own half with what the other rank
  put in the other slot, writes that average back into the slot, and
  copies the other rank's averaged half in. Two slots of half a replica
  each; each file is unlinked once both ranks have mapped it.

and checks that both ways give the same weights bit for bit (for two
ranks (a + b) / 2 is what summing then dividing gives).
"""
from __future__ import annotations

import mmap
import os
import socket
import sys
import time

import numpy as np

ROWS, CLASSES = 1 << 19, 57


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slots_for(rank: int, half: int, dist) -> list[np.ndarray]:
    """Both ranks' slots, mapped; this rank's file created, then unlinked once both hold it."""
    size = half * CLASSES * 4
    paths = [f"/dev/shm/lancetnic-flow-average-{os.getppid()}-{k}" for k in range(2)]
    fd = os.open(paths[rank], os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.ftruncate(fd, size)
    os.close(fd)
    dist.barrier()
    slots = []
    for path in paths:
        fd = os.open(path, os.O_RDWR)
        slots.append(np.frombuffer(mmap.mmap(fd, size), np.float32).reshape(half, CLASSES))
        os.close(fd)
    dist.barrier()
    os.unlink(paths[rank])
    return slots


def rank_main(rank: int, port: int, rounds: int) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.set_num_threads(1)
    weight = np.random.default_rng(rank).random((ROWS, CLASSES), dtype=np.float32)
    half = ROWS // 2
    mine, theirs = (slice(0, half), slice(half, ROWS)) if rank == 0 else (slice(half, ROWS), slice(0, half))
    slots = slots_for(rank, half, dist)
    for _ in range(rounds):
        by_gloo = torch.from_numpy(weight.copy())
        dist.barrier()
        tick = time.perf_counter()
        dist.all_reduce(by_gloo)
        by_gloo.div_(2)
        gloo_s = time.perf_counter() - tick
        shared = weight.copy()
        dist.barrier()
        tick = time.perf_counter()
        slots[rank][:] = shared[theirs]
        dist.barrier()
        other = slots[1 - rank]
        np.add(shared[mine], other, out=shared[mine])
        shared[mine] /= np.float32(2)
        other[:] = shared[mine]
        dist.barrier()
        shared[theirs] = slots[rank]
        shared_s = time.perf_counter() - tick
        if rank == 0:
            print(f"gloo all-reduce and division {1000 * gloo_s:.0f} ms; shared halves {1000 * shared_s:.0f} ms; "
                  f"the same weights: {np.array_equal(by_gloo.numpy(), shared)}", flush=True)
    dist.destroy_process_group()


def main() -> None:
    if len(sys.argv) == 4:   # one rank: RANK PORT ROUNDS
        rank_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
        return
    import subprocess

    port, rounds = free_port(), int(os.environ.get("ROUNDS", "4"))
    procs = [subprocess.Popen([sys.executable, __file__, str(r), str(port), str(rounds)]) for r in (1, 0)]
    sys.exit(max(p.wait() for p in procs))


if __name__ == "__main__":
    main()
