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


def test_nan_inside_tuples_and_numpy_values_is_written_as_null_and_the_log_goes_on():
    import numpy as np

    out = io.StringIO()
    log = JsonLog(out)
    log("epoch", {"t": 0.0, "pair": (float("nan"), 1.0), "array": np.array([np.nan, 2.0]),
                  "f32": np.float32("nan"), "i64": np.int64(7), "inf": float("inf")})
    log("done", {"t": 1.0, "run": "r"})
    first, last = (json.loads(line) for line in out.getvalue().splitlines())
    assert (first["pair"], first["array"], first["f32"], first["i64"], first["inf"]) == (
        [None, 1.0], [None, 2.0], None, 7, None)
    assert last["event"] == "done"
