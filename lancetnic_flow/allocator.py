"""Giving freed memory back to the operating system.

glibc keeps freed heap pages for reuse, so a process that just dropped a
partition's tables still shows them in its RSS. Dask's nanny sets
``MALLOC_TRIM_THRESHOLD_`` for the workers it starts; the trainer, and any
task that just freed a large working set, asks explicitly.
"""
from __future__ import annotations

import ctypes


def trim_allocator() -> None:
    """Hand freed heap back to the OS (glibc only; elsewhere a no-op)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


# Tensors at least this large are worth huge pages (numpy asks the kernel for
# them from 4 MiB on: numpy's own threshold).
HUGE_PAGES_FROM = 4 << 20


def on_huge_pages(model) -> int:
    """Move each large CPU parameter of ``model`` into memory that numpy
    allocates, which asks Linux for transparent huge pages (``madvise``; the
    machine's default is often "madvise", under which torch's own tensors get
    none). A linear model's steps read weight rows all over a 2^19-row
    matrix: with 4 KiB pages nearly every row costs a TLB miss. Same values,
    same parameter objects; returns the bytes moved. Call before the model's
    optimisers are built."""
    import torch

    moved = 0
    for p in model.parameters():
        t = p.data
        if (t.device.type != "cpu" or t.nbytes < HUGE_PAGES_FROM or not t.is_contiguous()
                or t.dtype not in (torch.float32, torch.float64)):
            continue
        p.data = torch.from_numpy(t.numpy().copy())   # numpy's copy: numpy's memory
        moved += t.nbytes
    return moved
