"""A text too long for the worker that reads it: one clear error before it is
tokenised, instead of a worker killed for its memory again and again.

A row is never split, so one text longer than the partition is tokenised
whole: its tokens, n-grams and their counts are held at once, many times the
text's bytes (:func:`text_peak`, measured on long texts; see docs/memory.md). The memory plan sizes partitions for texts of ordinary
length; here, on a Dask worker with a memory limit, a chunk holding a text
longer than :data:`CHECK_FROM` is checked against what the worker has left
below Dask's pause line, and refused in words when it would not fit. In the
calling process (small inputs, no worker) nothing is checked.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import UserError
from ...sizes import format_size

# What a task holds while it tokenises and counts one long text: a base and so many
# bytes per byte of the text (an upper line over texts of 1 to 20 MB with hashed
# bigrams, the costliest measured; docs/memory.md).
TEXT_BASE = 160 << 20
PEAK_PER_TEXT_BYTE = 60
# Texts shorter than this fit any planned task: the check reads no memory for them.
CHECK_FROM = 1 << 20


def longest_text(table: pa.Table) -> tuple[int, int]:
    """(bytes, row) of the row whose text columns together are longest; (0, -1) for no row."""
    lengths = None
    for name, col in zip(table.column_names, table.columns):
        if name == "label" or not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            continue
        n = pc.fill_null(pc.binary_length(col), 0)
        lengths = n if lengths is None else pc.add(lengths, n)
    if lengths is None or len(lengths) == 0:
        return 0, -1
    row = int(pc.index(lengths, pc.max(lengths)).as_py())
    return int(pc.max(lengths).as_py()), row


def text_peak(size: int) -> int:
    """The bytes a task holds at most while it tokenises one text of ``size`` bytes."""
    return TEXT_BASE + PEAK_PER_TEXT_BYTE * size


def worker_room() -> tuple[int, int, float] | None:
    """(memory limit, bytes left below the pause line, the pause line's share) of the
    Dask worker this runs on; None outside a worker or for a worker without a limit."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return None
    limit = getattr(getattr(worker, "memory_manager", None), "memory_limit", None)
    if not limit:
        return None
    import dask
    import psutil

    pause = dask.config.get("distributed.worker.memory.pause", 0.8) or 0.95
    return int(limit), int(limit * pause) - psutil.Process().memory_info().rss, pause


def check_text_lengths(table: pa.Table, url: str) -> None:
    """Refuse (``UserError``) a chunk of ``url`` whose longest text would take the
    worker reading it past its pause line once tokenised."""
    size, row = longest_text(table)
    if size < CHECK_FROM:
        return
    room = worker_room()
    if room is None or text_peak(size) <= room[1]:
        return
    limit, left, pause = room
    need = int((limit * pause - left + text_peak(size)) / pause)   # the limit whose pause line holds it
    text = next((table[c][row].as_py() for c in table.column_names if c != "label"
                 and pa.types.is_string(table[c].type) and table[c][row].is_valid), "") or ""
    raise UserError(
        f"{url}: a row whose text starts {text[:40]!r} is {format_size(size)} long, and tokenising it takes "
        f"about {format_size(text_peak(size))}: more than the {format_size(max(left, 0))} its Dask "
        f"worker (memory limit {format_size(limit)}) has left",
        f"give each worker a limit of {format_size(need)} or more (a larger {{cluster.memory_budget}}, or fewer "
        "{cluster.workers}), or split that text into rows")


__all__ = ["CHECK_FROM", "check_text_lengths", "longest_text", "text_peak", "worker_room"]
