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
