"""Events: how the pipeline tells the world what it is doing.

The pipeline calls :meth:`Events.emit`; the dashboard, the JSON log and the
tests subscribe. The pipeline never imports a view, and a slow or failing
subscriber never stops training (its error is reported once, then it is
dropped).
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable

from .errors import local_paths
from .options import said
from .plurals import counted

Listener = Callable[[str, dict[str, Any]], None]


class Events:
    """A tiny synchronous event bus with an injectable clock.

    ``words``: how the caller names options (``cli``, ``python``, ``workflow``:
    :class:`~lancetnic_flow.options.Words`). An event's message and hint name
    options as ``{section.field}`` (``{features.max_len}``), and each listener
    reads them as its caller typed them: ``--max-len``, ``max_len``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, words: str = "python"):
        self.clock = clock
        self.words = words
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def emit(self, kind: str, **data: Any) -> None:
        data.setdefault("t", self.clock())
        for key in ("message", "hint"):
            if isinstance(data.get(key), str):
                data[key] = local_paths(said(data[key], self.words))   # a file named as typed, as errors name it
        for listener in list(self._listeners):
            try:
                listener(kind, data)
            except Exception as exc:  # a broken view must not stop a run
                self._listeners.remove(listener)
                print(f"lancetnic-flow: event listener {listener!r} failed and was detached: {exc}", file=sys.stderr)


NULL_EVENTS = Events()


def warnings_only() -> Events:
    """Events for a run from Python that shows nothing: each ``warning`` it
    emits (what the command line prints as ``warning:``) becomes a Python
    warning of class :class:`~lancetnic_flow.errors.RunWarning`, never lost."""
    events = Events()
    events.subscribe(_as_python_warning)
    return events


def _as_python_warning(kind: str, data: dict[str, Any]) -> None:
    import warnings

    from .errors import RunWarning

    if kind == "warning":
        warnings.warn(data["message"], RunWarning, stacklevel=3)
    elif kind == "done":   # rows skipped, which the command line's summary shows
        message = skipped_rows_message((data.get("metrics") or {}).get("rows") or {})
        if message:
            warnings.warn(message, RunWarning, stacklevel=3)


def skipped_rows_message(rows: dict[str, Any]) -> str | None:
    """``30 rows skipped (30 missing_label; rows.skipped in metrics_)``, or None."""
    skipped = rows.get("skipped") or {}
    if not sum(skipped.values()):
        return None
    why = ", ".join(f"{n:,} {k}" for k, n in sorted(skipped.items(), key=lambda kv: -kv[1]))
    return f"{counted(sum(skipped.values()), 'row')} skipped ({why}; rows.skipped in metrics.json and metrics_)"

