"""``--json-log``: every event as one JSON object per line."""
from __future__ import annotations

import datetime
import json
import math
import threading
import time
from typing import IO, Any

from ..errors import UserError
from ..storage import special_kind


def _jsonable(o: Any) -> Any:
    """numpy scalars and arrays, paths, sets: whatever events may carry."""
    if hasattr(o, "item") and getattr(o, "ndim", 1) == 0:
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def _finite(o: Any) -> Any:
    """``o`` with NaN and infinities as None, also inside tuples and numpy values: json.dumps
    refuses them (allow_nan=False) and the log, its listener detached, would lose every later event."""
    if hasattr(o, "tolist") and not isinstance(o, (str, bytes)):   # numpy scalars and arrays
        o = o.tolist()
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def check_log_file(path: str, outputs: dict[str, str | None] | None = None) -> None:
    """Refuse a ``--json-log FILE`` that would replace a file holding something else, or
    that a file the command writes (``outputs``: flag → URL) would replace: the log was
    emptied by the predictions renamed over it, every event lost.

    Opening the log empties the file: a data file, a run's JSON or any other
    file whose first line is no event of an earlier log would be lost before
    the command reads a row (``train --json-log data.csv`` takes the data for
    the log's name, as ``--json-log`` takes an optional FILE)."""
    import os

    for flag, url in (outputs or {}).items():
        if url and "://" not in url.removeprefix("file://") and \
                os.path.realpath(url.removeprefix("file://")) == os.path.realpath(path):
            raise UserError(f"--json-log {path} is also {flag}: the file written there would replace the log",
                            f"give the log a name of its own, e.g. --json-log {path}.events")
    if special_kind(path) is not None:
        return   # a pipe, /dev/stdout, /dev/null holds nothing to lose, and reading one waits for a writer
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return   # nothing to lose; a place that cannot be written is the opening's error
    first = head.split(b"\n", 1)[0].strip()
    if not first or first.startswith(b'{"event": '):
        return
    shown = first[:60].decode("utf-8", "replace") + ("…" if len(first) > 60 else "")
    raise UserError(f"--json-log {path}: that file exists and holds no JSON log (it starts {shown!r}); writing "
                    "the log would empty it", f"name a new file (--json-log=events.jsonl), or give --json-log "
                    f"alone to log to stdout and put {path} where the command reads it")


class JsonLog:
    """One JSON object per event: ``{"event": kind, "time": ISO, "elapsed": s, ...data}``.

    ``elapsed`` counts seconds from the first event (the event's monotonic
    ``t`` is not written); NaN and infinities become ``null``."""

    def __init__(self, stream: IO[str], close: bool = False):
        self.stream, self._close = stream, close
        self.t0: float | None = None
        self._lock = threading.Lock()

    def __call__(self, kind: str, e: dict[str, Any]) -> None:
        data = dict(e)
        t = data.pop("t", None)
        if t is None:   # an event a command wrote itself (predicted, exported): its time is now
            t = time.monotonic()
        if self.t0 is None:
            self.t0 = t
        rec = {"event": kind, "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds"),
               "elapsed": round(t - self.t0, 4) if t is not None and self.t0 is not None else None, **data}
        line = json.dumps(_finite(rec), default=_jsonable, ensure_ascii=False, allow_nan=False)
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self._close:
            self.stream.close()
