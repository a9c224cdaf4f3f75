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
def test_a_json_log_file_that_holds_data_is_refused_and_kept_whole_and_an_earlier_log_is_replaced(tmp_path):
    # `train --json-log data.csv` took the data for the log's name and emptied it before reading a row
    import pytest

    from lancetnic_flow.cli.main import main
    from lancetnic_flow.errors import UserError
    from lancetnic_flow.ui.jsonlog import check_log_file

    data = tmp_path / "data.csv"
    data.write_text("text,label\nhello there,a\n")
    config = tmp_path / "config.json"
    config.write_text('{\n  "data": {}\n}\n')
    for held in (data, config):
        with pytest.raises(UserError, match="holds no JSON log"):
            check_log_file(str(held))
    assert main(["train", "--json-log", str(data)]) == 2
    assert data.read_text() == "text,label\nhello there,a\n"
    earlier = tmp_path / "events.jsonl"
    log = JsonLog(open(earlier, "w"), close=True)
    log("stage", {"stage": "reading"})
    log.close()
    (tmp_path / "empty.jsonl").write_text("")
    for fine in (earlier, tmp_path / "empty.jsonl", tmp_path / "new.jsonl"):
        check_log_file(str(fine))


def test_a_json_log_that_is_also_the_commands_output_file_is_refused():
    # predict --output p.jsonl --json-log p.jsonl: the predictions renamed over the log, every event lost
    import os

    import pytest

    from lancetnic_flow.errors import UserError
    from lancetnic_flow.ui.jsonlog import check_log_file

    here = os.path.join(os.getcwd(), "p.jsonl")
    for flag, url in (("--output", "p.jsonl"), ("--output", f"file://{here}"), ("--onnx", "./p.jsonl")):
        with pytest.raises(UserError, match=f"is also {flag}"):
            check_log_file("p.jsonl", {flag: url})
    check_log_file("p.jsonl", {"--output": "q.jsonl", "--onnx": None})


def test_a_json_log_to_a_pipe_or_device_is_written_without_reading_it_first(tmp_path):
    # the check for a file holding something else read the pipe: it waited for a writer
    # (--json-log /dev/stdout, a FIFO a reader holds: a hang) or swallowed what was in it
    import os

    from lancetnic_flow.ui.jsonlog import check_log_file

    path = str(tmp_path / "pipe")
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(fd, b"id,text\n")
        check_log_file(path)
        assert os.read(fd, 100) == b"id,text\n"
    finally:
        os.close(fd)
    check_log_file("/dev/null")
