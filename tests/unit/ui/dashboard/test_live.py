"""ui/dashboard/live.py: the dashboard renders every panel within the
terminal width, and handling an event only updates state."""
from __future__ import annotations

import io
import time

import pytest
from rich.cells import cell_len
from rich.console import Console

from lancetnic_flow.ui.dashboard import LiveDashboard, render

from ..events import record, script, state_after


@pytest.mark.parametrize("width", [80, 200])
def test_dashboard_renders_progress_model_and_memory_within_the_width(width):
    s = state_after(script(until_epoch=1))   # mid-epoch 2, after epoch 1's validation
    text, _ = record(render(s, width), width)
    for needle in ("lancetnic-flow", "planning", "fitting", "training epoch 2/2", "evaluating", "saving",
                   "fit", "featurise", "rows", "epochs", "/s", "ETA", "throughput", "rows/s", "tokens/s",
                   "MB/s read", "model", "train loss", "last val", "acc 0.9080", "F1 0.9050", "best",
                   "loss 0.3400", "memory", "trainer", "worker 0", "worker 1", "machine", "available",
                   "budget 6.0G = OS 1.5G + trainer 768M + 2 × 2.0G", "dask dashboard",
                   "http://127.0.0.1:8787/status", "spill at 70%", "pause at 80%", "warning:"):
        assert needle in text, (needle, text)
    assert "━" in text and "█" in text and "▒" in text and "░" in text and "┊" in text   # bars, segments, ticks
    assert "8,960/9,000" in text or "8,960" in text or "8.960" in text or "/9,000" in text
    lines = text.splitlines()
    assert all(cell_len(line) <= width for line in lines), max(lines, key=cell_len)
    if width >= 120:
        assert "managed" in text and "unmanaged" in text and "spilled" in text  # the wide worker legend in full
        assert any("lancetnic-flow" in line and "model" in line for line in lines)  # side by side
    else:
        assert not any("lancetnic-flow" in line and "model" in line for line in lines)


def test_event_handling_is_cheap():
    """The listener only updates state: many thousands of batch events a second."""
    dash = LiveDashboard(Console(file=io.StringIO(), force_terminal=True, width=120))
    e = {"epoch": 1, "rows": 0, "total_rows": 10**6, "loss": 0.5, "tokens": 5000}
    n, t0 = 20_000, time.perf_counter()
    for i in range(n):
        e["rows"], e["t"] = i * 256, t0 + i * 1e-3
        dash("batch", e)
    rate = n / (time.perf_counter() - t0)
    assert rate > 20_000, rate
    assert not dash.started   # a batch alone does not start the display


def test_the_live_view_ends_on_a_blank_line_where_a_ctrl_c_echo_cannot_wrap():
    """The terminal echoes "^C" at the cursor: after a full-width last line it
    wrapped to a new line, Rich's erase on stop came one line short and the
    dashboard's top border stayed on the screen above "interrupted"."""
    console = Console(file=io.StringIO(), force_terminal=True, width=80)
    dash = LiveDashboard(console, state=state_after(script(until_epoch=1)))
    frame = dash._renderable()
    assert frame.lines[-1].plain == ""
    assert all(cell_len(line.plain) <= 80 for line in frame.lines)
    assert frame.lines[-2].plain.startswith("╰") or frame.lines[-2].plain.startswith("warning:")


def test_a_frame_that_would_overflow_the_terminal_leaves_out_the_warnings_not_a_panel():
    s = state_after(script(until_epoch=1))   # at 80 columns 22 lines of panels and a warning
    panels = render(s, 80, height=23).lines
    assert not any(line.plain.startswith("warning:") for line in panels)
    assert len(panels) < 23 and panels[-1].plain.startswith("╰")   # the memory panel whole, the blank line below
    assert any(line.plain.startswith("warning:") for line in render(s, 80, height=24).lines)
    dash = LiveDashboard(Console(file=io.StringIO(), force_terminal=True, width=80, height=23), state=s)
    assert len(dash._renderable().lines) <= 23   # Rich cut a taller frame at its foot, with "..."
