"""What a Python caller sees while a run trains.

The same views as the command line (:class:`~lancetnic_flow.ui.report.ConsoleReport`):
the live dashboard in a terminal; plain milestone and status lines
elsewhere, which is also what a Jupyter notebook shows (Rich renders them
in the cell's output); with ``progress=False`` nothing but the run's
warnings, each as a :class:`~lancetnic_flow.errors.RunWarning`.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from ..events import Events, warnings_only


@contextlib.contextmanager
def progress_events(progress: bool | Events = True) -> Iterator[Events]:
    """Events for one run: a console view subscribed when ``progress`` is True,
    the caller's own :class:`Events` when one is given, none when False."""
    if isinstance(progress, Events):
        yield progress
        return
    if not progress:   # no view: what the run warns of still reaches the caller, as Python warnings
        yield warnings_only()
        return
    from ..ui.report import ConsoleReport

    report = ConsoleReport()
    events = Events()
    events.subscribe(report)
    try:
        yield events
    finally:
        report.finish()


def train(config: Any, events: Events | None = None, *, progress: bool = True, client: Any = None,
          resume: str | None = None):
    """Train as ``config`` (a :class:`~lancetnic_flow.config.TrainConfig`) says and
    return a :class:`~lancetnic_flow.training.orchestrator.TrainResult`.

    Shows progress as the command line does unless ``progress=False`` (or
    ``events`` is given: then only its listeners see the run). ``client``:
    an existing ``distributed.Client`` instead of a LocalCluster. A ``config`` that
    names no field given has the fields set off their defaults counted as given
    (:func:`~lancetnic_flow.config.with_set_fields`): what the command line refuses
    typed, this refuses set."""
    from ..config import with_set_fields
    from ..training.orchestrator import train as run_training

    if resume is None:   # a resumed run's configuration is its config.json's, checked against it
        config = with_set_fields(config)
    with progress_events(events if events is not None else progress) as ev:
        return run_training(config, ev, client=client, resume=resume)   # resolved there, as given


__all__ = ["progress_events", "train"]
