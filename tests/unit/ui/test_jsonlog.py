"""ui/jsonlog.py: one JSON object a line, with seconds since the first event."""
from __future__ import annotations

import io
import json

from lancetnic_flow.ui.jsonlog import JsonLog


def test_an_event_without_a_clock_reading_still_gets_its_elapsed_seconds():
    # predict's and export's own events ("predicted", "exported") were written with "elapsed": null
    out = io.StringIO()
    log = JsonLog(out)
    log("stage", {"t": 1e9, "stage": "reading"})   # an Events emit: its monotonic t
    log("predicted", {"rows_read": 3})              # written by the command itself: no t
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["elapsed"] == 0 and isinstance(second["elapsed"], float) and second["rows_read"] == 3
    alone = io.StringIO()
    JsonLog(alone)("exported", {"onnx": "m.onnx"})
    assert json.loads(alone.getvalue())["elapsed"] == 0
