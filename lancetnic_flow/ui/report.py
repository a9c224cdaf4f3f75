"""Console output of a run: views over events, never drivers of them.

:class:`ConsoleReport` is what the CLI subscribes to a run's events. It
picks the human view by where the output goes:

* a terminal: the live dashboard (:class:`~.dashboard.live.LiveDashboard`);
* anything else (a pipe, CI, ``nohup``): :class:`PlainLog`, a line at each
  stage and epoch and a status line every ``interval`` seconds;
* ``quiet``: only the final summary.

All human output goes to stderr. With ``json_log`` every event is also
written as one JSON object per line (:class:`JsonLog`): ``"-"`` means
stdout, and then the human view is off (errors still go to stderr);
a file path keeps the human view and writes the log to the file.
"""
from __future__ import annotations

import io
import math
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

from .dashboard.live import LiveDashboard
from .dashboard.state import DashboardState
from .dashboard.summary import milestone, print_summary, status_line
from ..storage import open_special, special_kind
from .jsonlog import JsonLog
from ..plurals import counted


class PlainLog:
    """Plain lines for logs: milestones as they happen, a status line every
    ``interval`` seconds (driven by events; the memory sampler ticks twice a
    second), the summary at the end."""

    def __init__(self, console: Console, interval: float = 5.0, state: DashboardState | None = None):
        self.console, self.interval = console, interval
        self.state = state or DashboardState()
        self._last = -math.inf

    def _print(self, text: str) -> None:
        self.console.print(text, highlight=False, soft_wrap=True, markup=False)

    def __call__(self, kind: str, e: dict[str, Any]) -> None:
        s = self.state
        now = e.get("t", s.now())
        if kind == "stage" and s.stage == "training" and e["stage"] == "training" and e.get("epoch") == s.epoch:
            s.update(kind, e)   # --ddp's next segment after a checkpoint: the same epoch goes on, no new header
            return
        if kind == "stage" and s.stage == "training":
            self._print(status_line(s, now))  # where the stage that ends got to
        s.update(kind, e)
        if kind == "stage":
            stage = e["stage"]
            if stage == "training":
                src = {"live": " (featurising live)", "cache": " (from the shard cache)",
                       "fresh": " (featurising afresh: no cache)"}.get(e.get("source"), "")
                self._print(f"training epoch {e['epoch']}/{e['epochs']}{src}")
            elif stage == "fitting":
                setting = f" (ngrams {e['ngrams']})" if e.get("ngrams") else ""   # tune: one fit per setting
                self._print(f"fitting features over {counted(e.get('total', 0), 'partition')}{setting}")
            elif stage in ("evaluating", "saving"):
                self._print(f"{stage}" + (f" epoch {e['epoch']}/{e['epochs']}" if e.get("epoch") else ""))
            self._last = now
        elif milestone(kind, e) is not None:
            self._print(milestone(kind, e))
            if kind == "plan" and e.get("dashboard"):
                self._print(f"dask dashboard  {e['dashboard']}")
        elif kind == "done":
            print_summary(self.console, e)
        elif now - self._last >= self.interval and s.stage in ("fitting", "training"):
            self._print(status_line(s, now))
            self._last = now


class SummaryOnly:
    """``--quiet``: the final summary, nothing else."""

    def __init__(self, console: Console):
        self.console = console

    def __call__(self, kind: str, e: dict[str, Any]) -> None:
        if kind == "done":
            print_summary(self.console, e)


class ConsoleReport:
    """The CLI's listener: a human view (by output kind) and an optional JSON log."""

    def __init__(self, console: Console | None = None, quiet: bool = False, json_log: str | None = None,
                 interval: float = 5.0, live: bool | None = None):
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self.json: JsonLog | None = None
        if json_log == "-":
            self.json = JsonLog(sys.stdout)
        elif json_log and special_kind(json_log) is not None:   # a pipe no process reads: refused, not a wait
            self.json = JsonLog(io.TextIOWrapper(open_special(json_log), encoding="utf-8"), close=True)
        elif json_log:
            self.json = JsonLog(open(json_log, "w", encoding="utf-8"), close=True)
        live = self.console.is_terminal if live is None else live
        self.view: Any
        if json_log == "-":
            self.view = None
        elif quiet:
            self.view = SummaryOnly(self.console)
        elif live:
            self.view = LiveDashboard(self.console)
        else:
            self.view = PlainLog(self.console, interval)
        self.live = isinstance(self.view, LiveDashboard)
        self.saved_run: str | None = None   # a run saved whole (its ``done``): what a Ctrl-C after it leaves

    def __call__(self, kind: str, e: dict[str, Any]) -> None:
        if kind == "done" and e.get("run"):
            self.saved_run = str(e["run"])
        if self.json is not None:
            self.json(kind, e)
        if self.view is not None:
            self.view(kind, e)

    def say(self, text: str, **print_options: Any) -> None:
        """A command's result line on the console; none with ``--json-log`` to
        stdout, where the console view is off and the line's event says it."""
        if self.view is None and self.json is not None:
            return
        self.console.print(text, **print_options)

    def error(self, message: str, hint: str | None = None, status: int = 2, label: str = "error") -> None:
        """An error after which the command exits: on stderr, and as an ``error`` event in the JSON log."""
        self.close()
        # Messages quote paths, URLs and library errors ("[/pair.cc:152]"): never markup.
        self.console.print(f"[bold red]{label}:[/] {escape(message)}", highlight=False, soft_wrap=True)
        if hint:
            self.console.print(f"  [dim]hint:[/] {escape(hint)}", highlight=False, soft_wrap=True)
        if self.json is not None:
            self.json("error", {"message": message, "hint": hint, "status": status, "kind": label})

    def close(self) -> None:
        """Stop the live display (idempotent); errors and tracebacks print after it."""
        if isinstance(self.view, LiveDashboard):
            self.view.stop()

    def finish(self) -> None:
        self.close()
        if self.json is not None:
            self.json.close()
