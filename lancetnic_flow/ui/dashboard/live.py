"""The live terminal dashboard: progress, throughput, the model and memory.

Three layers, each testable alone:

* :class:`~.state.DashboardState` — pure data, updated by events;
* :func:`render` — a function from a state and a width to a Rich renderable
  (made of :mod:`.widgets`); :func:`~.summary.render_summary` — the final
  summary of a ``done`` event; :func:`~.summary.status_line` — the same facts
  as one plain line;
* :class:`LiveDashboard` — a Rich ``Live`` that redraws ``render(state)`` about
  three times a second from its own thread. Handling an event only updates the
  state, so a slow terminal never slows training.
"""
from __future__ import annotations

import threading
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.text import Text

from .state import DashboardState
from .summary import milestone, print_summary, rank_text
from .widgets import box, fit, memory_lines, model_lines, progress_lines, side_by_side, stage_line, throughput, wrap

WIDE = 120  # at this many columns and more, panels sit side by side
# Under this many columns the panels' borders and labels leave the figures no room: the lines go
# unboxed, each within the width (drawn at 40 there, every line the terminal wrapped broke the view).
BOXED = 40


def render(state: DashboardState, width: int = 80, now: float | None = None, height: int | None = None) -> "Frame":
    """The dashboard for ``state`` at ``width`` columns (a pure function of both); within ``height``
    lines, less its last, the warnings are left out (they print above the live view as they come)."""
    now = state.now() if now is None else now
    if width < BOXED:
        return _unboxed(state, now, max(1, width), height)
    wide = width >= WIDE
    lw = width * 3 // 5 if wide else width
    progress = [stage_line(state, now, lw - 4), *progress_lines(state, now, lw - 4), *throughput(state, now, lw - 4)]
    model = model_lines(state, (width - lw if wide else width) - 4)
    lines: list[Text] = []
    if wide:
        h = max(len(progress), len(model)) + 2
        lines += side_by_side(box("lancetnic-flow", progress, lw, "cyan", h),
                               box("model", model, width - lw, "blue", h), lw, width - lw)
    else:
        lines += box("lancetnic-flow", progress, width, "cyan") + box("model", model, width, "blue")
    lines += box("memory", memory_lines(state, width - 4, wide), width, "magenta")
    if state.ranks:
        ranks = [line for _, r in sorted(state.ranks.items()) for line in wrap(Text(rank_text(r)), width - 4, 2)]
        lines += box(f"ranks (--ddp {len(state.ranks)})", ranks, width, "green")
    warnings = [line for w in state.warnings for line in wrap(Text("warning: " + w, "yellow"), width, 2, (" ",))]
    # Taller than the terminal, the live view is cut at its foot: the memory or ranks panel, not these.
    return Frame(lines + warnings if height is None or len(lines) + len(warnings) < height else lines)


def _unboxed(state: DashboardState, now: float, width: int, height: int | None) -> "Frame":
    """:func:`render`'s lines without panels, for a terminal narrower than :data:`BOXED`:
    each broken at its separators, and cut at the edge where one piece is still too long."""
    parts = [stage_line(state, now, width), *progress_lines(state, now, width), *throughput(state, now, width),
             *model_lines(state, width), *memory_lines(state, width, False)]
    parts += [Text(rank_text(r)) for _, r in sorted(state.ranks.items())]
    lines = [fit(piece, width) if piece.cell_len > width else piece
             for line in parts for piece in wrap(line, width, min(2, width // 4), (" · ", "  ", " "))]
    warnings = [fit(piece, width) if piece.cell_len > width else piece for w in state.warnings
                for piece in wrap(Text("warning: " + w, "yellow"), width, min(2, width // 4), (" ",))]
    return Frame(lines + warnings if height is None or len(lines) + len(warnings) < height else lines)


class Frame:
    """Lines already cut to width: rendered as they are, with no wrapping or
    layout pass (that pass is most of the cost of a Rich frame)."""

    def __init__(self, lines: list[Text]):
        self.lines = lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        end = Segment.line()
        for line in self.lines:
            yield from line.render(console)
            yield end

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        w = max((line.cell_len for line in self.lines), default=0)
        return Measurement(w, w)

    @property
    def plain(self) -> str:
        return "\n".join(line.plain for line in self.lines)


class LiveDashboard:
    """A Rich ``Live`` over a :class:`DashboardState`.

    ``__call__`` (the event listener) only updates the state and, for a few
    milestone events, prints a line above the live area; Rich's own thread
    redraws ``render(state)`` ``refresh_per_second`` times a second."""

    def __init__(self, console: Console, state: DashboardState | None = None, refresh_per_second: float = 3):
        from rich.live import Live

        self.console = console
        self.state = state or DashboardState()
        self._last: Any = Text("")
        self._lock = threading.Lock()
        self.live = Live(console=console, get_renderable=self._renderable, auto_refresh=True,
                         refresh_per_second=refresh_per_second, transient=True,
                         redirect_stdout=True, redirect_stderr=True)
        self.started = False

    def _renderable(self) -> Any:
        try:
            # A blank last line holds the cursor: the terminal's "^C" echo lands there instead of
            # wrapping past a full-width line, which shifted the erase on stop and left a line behind.
            self._last = Frame(render(self.state, self.console.width, height=self.console.height).lines + [Text("")])
        except Exception:  # a half-updated state: show the last frame
            pass
        return self._last

    def start(self) -> None:
        with self._lock:
            if not self.started:
                self.live.start()
                self.started = True

    def stop(self) -> None:
        with self._lock:
            if self.started:
                self.started = False
                self.live.stop()

    def __call__(self, kind: str, e: dict[str, Any]) -> None:
        self.state.update(kind, e)
        if kind == "done":
            self.stop()
            print_summary(self.console, e)
            return
        if not self.started and kind in ("stage", "plan"):
            self.start()
        line = milestone(kind, e)
        if line is not None:
            # Lines quote paths, URLs and library errors: never markup.
            text = Text(line)
            if kind == "warning":
                text.stylize("yellow", 0, len("warning:"))
            self.console.print(text, highlight=False, soft_wrap=True)
