"""The live terminal dashboard: :mod:`.state` (events → data), :mod:`.widgets`
(data → lines of text), :mod:`.summary` (the final summary, milestone and
status lines) and :mod:`.live` (the Rich ``Live`` that redraws it)."""
from .live import Frame, LiveDashboard, render
from .state import DashboardState, Meter, replay
from .summary import milestone, rank_text, render_summary, status_line
from .widgets import mem_style

__all__ = ["DashboardState", "Frame", "LiveDashboard", "Meter", "mem_style", "milestone", "rank_text", "render",
           "render_summary", "replay", "status_line"]
