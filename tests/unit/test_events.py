"""events.py: every subscriber gets each event with its kind and a time from
the bus' clock (unless the event brings its own), and a listener that fails
is detached without stopping the run or the other listeners."""
from __future__ import annotations

import itertools

from lancetnic_flow.events import Events


def test_subscribers_get_every_event_in_order_with_a_time():
    clock = itertools.count(1.0)
    bus = Events(clock=lambda: next(clock))
    seen, also = [], []
    bus.subscribe(lambda kind, e: seen.append((kind, dict(e))))
    bus.subscribe(lambda kind, e: also.append(kind))
    bus.emit("stage", stage="fitting")
    bus.emit("batch", rows=5, t=9.5)
    assert seen == [("stage", {"stage": "fitting", "t": 1.0}), ("batch", {"rows": 5, "t": 9.5})]
    assert also == ["stage", "batch"]


def test_a_failing_listener_is_detached_and_the_others_keep_receiving(capsys):
    bus = Events(clock=lambda: 0.0)
    calls, seen = [], []

    def broken(kind, e):
        calls.append(kind)
        raise RuntimeError("view crashed")

    bus.subscribe(broken)
    bus.subscribe(lambda kind, e: seen.append(kind))
    bus.emit("a")
    bus.emit("b")
    assert calls == ["a"] and seen == ["a", "b"]
    assert "view crashed" in capsys.readouterr().err


def test_a_run_that_shows_nothing_still_raises_each_warning_it_emits_as_a_run_warning():
    import warnings

    from lancetnic_flow.errors import RunWarning
    from lancetnic_flow.events import warnings_only

    events = warnings_only()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events.emit("epoch", epoch=1)                       # not a warning: nothing
        events.emit("warning", message="12 rows skipped (empty_text)")
    assert [(w.category, str(w.message)) for w in caught] == [(RunWarning, "12 rows skipped (empty_text)")]
    assert issubclass(RunWarning, UserWarning)


def test_a_run_that_shows_nothing_warns_of_the_rows_it_skipped_which_the_command_lines_summary_shows():
    # with progress=False 30 missing labels and 20 nan targets were dropped with no word (docs/python.md promises one)
    import warnings

    from lancetnic_flow.errors import RunWarning
    from lancetnic_flow.events import warnings_only

    events = warnings_only()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events.emit("done", run="r", metrics={"rows": {"read": 60, "skipped": {"missing_label": 30, "empty_text": 5}}})
        events.emit("done", run="r", metrics={"rows": {"read": 60, "skipped": {}}})   # none skipped: no warning
        events.emit("done", run="r", metrics={"rows": {"read": 60, "skipped": {"empty_text": 1}}})
    assert [str(w.message) for w in caught if w.category is RunWarning] == [
        "35 rows skipped (30 missing_label, 5 empty_text; rows.skipped in metrics.json and metrics_)",
        "1 row skipped (1 empty_text; rows.skipped in metrics.json and metrics_)"]
