"""The live terminal dashboard: progress, throughput, the model and memory.

Three layers, each testable alone:

* :class:`DashboardState` — pure data, updated by events (``state.update(kind,
  data)``); times come from the events' ``"t"`` (or an injectable clock), so a
  recorded run replays to the same state.
* :func:`render` — a function from a state and a width to a Rich renderable
  (the dashboard), :func:`render_summary` — the final summary of a ``done``
  event, :func:`status_line` — the same facts as one plain line.
* :class:`LiveDashboard` — a Rich ``Live`` that redraws ``render(state)`` about
  three times a second from its own thread. Handling an event only updates the
  state, so a slow terminal never slows training.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.panel import Panel
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from .cluster import THRESHOLDS

STAGES = ("planning", "fitting", "training", "evaluating", "saving")
SPARK = "▁▂▃▄▅▆▇█"
WIDE = 120  # at this many columns and more, panels sit side by side


# ---------------------------------------------------------------- formatting

def size(n: float | None) -> str:
    """Bytes, short: ``438M``, ``2.0G``."""
    if n is None:
        return "–"
    n = float(n)
    for unit in ("B", "K", "M", "G", "T"):
        if abs(n) < 1024 or unit == "T":
            return f"{n:.0f}{unit}" if unit in ("B", "K", "M") else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}T"


def count(n: float | None) -> str:
    """``6,512`` below 100k, ``1.2M`` above."""
    if n is None:
        return "–"
    if abs(n) >= 1e9:
        return f"{n / 1e9:.1f}G"
    if abs(n) >= 1e6:
        return f"{n / 1e6:.1f}M"
    if abs(n) >= 1e5:
        return f"{n / 1e3:.0f}k"
    return f"{n:,.0f}"


def rate_text(r: float | None, unit: str) -> str:
    if r is None:
        return ""
    return f"{r:.1f}{unit}" if r < 10 else f"{count(r)}{unit}"


def duration(s: float | None) -> str:
    if s is None or s != s or s < 0 or s > 365 * 86400:
        return "–:––"
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def mem_style(frac: float) -> str:
    """Colour of a worker's memory as it nears Dask's thresholds."""
    if frac >= THRESHOLDS["pause"]:
        return "bold red"
    if frac >= THRESHOLDS["spill"]:
        return "dark_orange"
    if frac >= THRESHOLDS["target"]:
        return "yellow"
    return "green"


# --------------------------------------------------------------------- state

class Meter:
    """A rate over a sliding window of a cumulative counter; O(1) per update."""

    __slots__ = ("window", "every", "samples", "last")

    def __init__(self, window: float = 10.0, every: float = 0.5):
        self.window, self.every = window, every
        self.samples: deque = deque(maxlen=int(window / every) + 2)
        self.last: tuple[float, float] | None = None

    def add(self, t: float, value: float) -> None:
        self.last = (t, value)
        if not self.samples or t - self.samples[-1][0] >= self.every:
            self.samples.append((t, value))

    def rate(self, now: float) -> float | None:
        """Per second over the window ending ``now`` (falls to 0 when it stalls)."""
        if self.last is None:
            return None
        base = None
        for t, v in list(self.samples):
            if t >= now - self.window:
                base = (t, v)
                break
        if base is None:  # nothing in the window: stalled
            return 0.0
        dt = now - base[0]
        if dt <= 0.2 or base == self.last and dt < 1.0:
            return None
        return max(0.0, (self.last[1] - base[1]) / dt)


class DashboardState:
    """Everything the views show, updated by events; no I/O, no Rich."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.t0: float | None = None
        self.events = 0
        self.stage = "starting"
        self.stage_t: float | None = None
        self.stages_seen: list[str] = []
        self.epoch = 0
        self.epochs = 0
        self.epochs_done = 0
        self.source: str | None = None        # "live" or "cache" featurisation in this epoch
        self.plan: dict | None = None
        self.plan_text = ""
        self.dask_dashboard: str | None = None
        self.fit_done = self.fit_total = 0
        self.fit_cached = False
        self.feat_done = self.feat_total = 0
        self.rows = 0
        self.total_rows = 0
        self.rows_before = 0                   # rows of earlier epochs, for the cumulative meters
        self.tokens = 0
        self.bytes_read = 0
        self.fit_meter, self.feat_meter = Meter(), Meter()
        self.rows_meter, self.tokens_meter, self.bytes_meter = Meter(5.0, 0.25), Meter(5.0, 0.25), Meter()
        self.loss: float | None = None         # running (EWMA) train loss
        self.loss_history: deque = deque(maxlen=60)
        self._loss_t = -1e9
        self.fitted: dict | None = None
        self.last_epoch: dict | None = None
        self.best: dict | None = None          # the epoch with the lowest val loss
        self.early_stop: dict | None = None
        self.memory: dict | None = None
        self.workers: list[dict] = []
        self.ranks: dict[int, dict] = {}       # --ddp: the last report of each training rank
        self.warnings: deque = deque(maxlen=3)
        self.done: dict | None = None

    # time
    def now(self) -> float:
        return self.clock()

    def elapsed(self, now: float | None = None) -> float:
        return 0.0 if self.t0 is None else (self.now() if now is None else now) - self.t0

    # updates
    def update(self, kind: str, e: dict[str, Any]) -> None:
        t = e.get("t")
        if t is None:
            t = self.clock()
        if self.t0 is None:
            self.t0 = t
        self.events += 1
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(e, t)

    __call__ = update  # a state is itself an event listener

    def _on_stage(self, e: dict, t: float) -> None:
        self.stage, self.stage_t = e["stage"], t
        if self.stage not in self.stages_seen:
            self.stages_seen.append(self.stage)
        if self.stage == "fitting":
            self.fit_total, self.fit_done = e.get("total") or 0, 0
        elif self.stage == "training":
            self.rows_before += self.rows
            self.epoch, self.epochs = e.get("epoch", 0), e.get("epochs", 0)
            self.rows, self.total_rows = 0, e.get("total_rows") or 0
            self.source = e.get("source")

    def _on_plan(self, e: dict, t: float) -> None:
        self.plan, self.plan_text, self.dask_dashboard = e.get("plan"), e.get("text", ""), e.get("dashboard")

    def _on_warning(self, e: dict, t: float) -> None:
        self.warnings.append(e.get("message", ""))

    def _on_progress(self, e: dict, t: float) -> None:
        self.fit_done, self.fit_total = e["done"], e["total"]
        self.fit_meter.add(t, self.fit_done)
        self._count_bytes(e, t)

    def _on_fitted(self, e: dict, t: float) -> None:
        self.fitted = e
        self.fit_cached = bool(e.get("cached"))

    def _on_featurized(self, e: dict, t: float) -> None:
        self.feat_done, self.feat_total = e["done"], e["total"]
        self.feat_meter.add(t, self.feat_done)
        self._count_bytes(e, t)

    def _count_bytes(self, e: dict, t: float) -> None:
        # Both passes read the input, so MB/s counts bytes from either.
        self.bytes_read += e.get("bytes_read", 0)
        self.bytes_meter.add(t, self.bytes_read)

    def _on_batch(self, e: dict, t: float) -> None:
        self.rows = e["rows"]
        if e.get("total_rows"):
            self.total_rows = e["total_rows"]
        self.tokens += e.get("tokens", 0)
        self.rows_meter.add(t, self.rows_before + self.rows)
        self.tokens_meter.add(t, self.tokens)
        loss = e.get("loss")
        if loss is not None:
            self.loss = loss if self.loss is None else 0.95 * self.loss + 0.05 * loss
            if t - self._loss_t >= 0.5:
                self.loss_history.append(self.loss)
                self._loss_t = t

    def _on_epoch(self, e: dict, t: float) -> None:
        self.last_epoch = e
        self.epochs_done = e.get("epoch", self.epochs_done)
        vl = e.get("val_loss")
        if vl is not None and (self.best is None or vl < self.best["val_loss"]):
            self.best = e

    def _on_rank(self, e: dict, t: float) -> None:
        """A --ddp rank's progress; the ranks' rows add up to the epoch's."""
        self.ranks[e["rank"]] = e
        epoch = max(r.get("epoch", 0) for r in self.ranks.values())
        if epoch != self.epoch:
            self.rows_before += self.rows
            self.epoch, self.rows = epoch, 0
        self.epochs = e.get("epochs", self.epochs)
        self.rows = sum(r.get("rows", 0) for r in self.ranks.values() if r.get("epoch") == epoch)
        self.rows_meter.add(t, self.rows_before + self.rows)
        if e.get("loss") is not None:
            self.loss = e["loss"] if self.loss is None else 0.9 * self.loss + 0.1 * e["loss"]

    def _on_early_stop(self, e: dict, t: float) -> None:
        self.early_stop = e

    def _on_memory(self, e: dict, t: float) -> None:
        self.memory = e
        if e.get("workers"):  # the monitor asks the scheduler every other sample only
            self.workers = e["workers"]

    def _on_done(self, e: dict, t: float) -> None:
        self.done = e
        self.stage = "done"

    # derived
    def rows_rate(self, now: float | None = None) -> float | None:
        return self.rows_meter.rate(self.now() if now is None else now)


# ------------------------------------------------------------------- widgets
#
# The dashboard is composed as lines of Text of exactly the right width, boxes
# drawn by hand: Rich's nested Table/Panel layout costs ~25-40 ms a frame,
# this costs ~1-2 ms (docs/dashboard.md, "Overhead").

GREY = "grey42"
TRACK = "grey23"


def _fit(t: Text, width: int) -> Text:
    t.no_wrap = True
    t.truncate(max(0, width), overflow="ellipsis", pad=True)
    return t


def _bar(frac: float | None, width: int, style: str = "cyan", done_style: str = "green") -> Text:
    """A progress bar like Rich's: ━ done, ╸ a half step, ━ dim track."""
    text = Text(no_wrap=True)
    if width <= 0:
        return text
    if frac is None:
        text.append("━" * width, TRACK)
        return text
    frac = min(max(frac, 0.0), 1.0)
    halves = int(frac * width * 2)
    full, half = divmod(halves, 2)
    style = done_style if frac >= 1 else style
    text.append("━" * full, style)
    if half and full < width:
        text.append("╸", style)
        full += 1
    text.append("━" * (width - full), TRACK)
    return text


def _segments(segments: list[tuple[float, str, str]], total: float, width: int, ticks: tuple[float, ...] = ()) -> Text:
    """Coloured segments against ``total`` with ┊ ticks at threshold fractions."""
    text = Text(no_wrap=True)
    used, total = 0, total or 1
    for value, char, style in segments:
        n = min(width - used, int(round(width * max(value, 0) / total)))
        if n > 0:
            text.append(char * n, style)
            used += n
    ticks_at = {min(width - 1, int(width * f)) for f in ticks}
    run = []
    for i in range(used, width):
        if i in ticks_at:
            if run:
                text.append("".join(run), TRACK)
                run = []
            text.append("┊", "grey50")
        else:
            run.append("─")
    if run:
        text.append("".join(run), TRACK)
    return text


def _box(title: str, lines: list[Text], width: int, style: str, height: int | None = None) -> list[Text]:
    """A rounded box of exactly ``width`` cells around ``lines``."""
    inner = width - 4
    title = title[: max(0, width - 6)]
    top = Text("╭─ ", style, no_wrap=True)
    top.append(title, "bold")
    top.append(" " + "─" * max(0, width - 5 - cell_len(title)) + "╮", style)
    out = [top]
    body = list(lines) + [Text("")] * max(0, (height or 0) - 2 - len(lines))
    for line in body:
        row = Text("│ ", style, no_wrap=True)
        row.append_text(_fit(line, inner))
        row.append(" │", style)
        out.append(row)
    out.append(Text("╰" + "─" * (width - 2) + "╯", style, no_wrap=True))
    return out


def _side_by_side(left: list[Text], right: list[Text], lw: int, rw: int) -> list[Text]:
    n = max(len(left), len(right))
    out = []
    for i in range(n):
        row = left[i].copy() if i < len(left) else Text(" " * lw)
        row.append_text(right[i] if i < len(right) else Text(" " * rw))
        out.append(row)
    return out


def _stage_line(s: DashboardState, now: float, width: int) -> Text:
    text = Text(no_wrap=True)
    current = s.stage
    for i, name in enumerate(STAGES):
        if i:
            text.append(" → ", GREY)
        label = name
        if name == "training" and s.epochs:
            label = f"training epoch {s.epoch}/{s.epochs}"
        if name == "fitting" and s.fit_cached:
            label = "fitting (cached)"
        if name == current:
            text.append(label, "bold reverse cyan")
        elif name in s.stages_seen or current == "done" or (name == "fitting" and s.fit_cached):
            text.append(label, "green")
        else:
            text.append(label, GREY)
    clock = duration(s.elapsed(now))
    _fit(text, width - len(clock) - 1)
    text.append(" " + clock, "bold")
    return text


def _progress_lines(s: DashboardState, now: float, width: int) -> list[Text]:
    rows: list[tuple[str, float | None, str, str, str]] = []   # name, fraction, counts, rate, note

    def row(name: str, done: float, total: float, rate: float | None, unit: str, note: str = "",
            bar: float | None = None) -> None:
        finished = bool(total) and done >= total
        rate = None if finished else rate
        eta = (total - done) / rate if rate and total and done < total else None
        counts = f"{count(done)}/{count(total)}" if total else count(done)
        right = note or (("ETA " + duration(eta)) if eta is not None else ("done" if finished else ""))
        frac = (done if bar is None else bar) / total if total else None
        rows.append((name, frac, counts, rate_text(rate, unit), right))

    if s.fit_cached:
        rows.append(("fit", 1.0, "cached", "", ""))
    elif s.fit_total:
        row("fit", s.fit_done, s.fit_total, s.fit_meter.rate(now), "/s")
    if s.feat_total:
        note = "cached" if s.source == "cache" and s.feat_done >= s.feat_total else ""
        row("featurise", s.feat_done, s.feat_total, s.feat_meter.rate(now) if s.source != "cache" else None, "/s",
            note)
    elif s.source == "cache":
        rows.append(("featurise", 1.0, "cached", "", ""))
    if s.epochs:
        rate = s.rows_meter.rate(now) if s.stage == "training" else None
        row("rows", s.rows, max(s.total_rows, s.rows), rate, "/s", "evaluating" if s.stage == "evaluating" else "")
        part = min(1.0, s.rows / s.total_rows) if s.stage == "training" and s.total_rows else 0.0
        row("epochs", s.epochs_done, s.epochs, None, "", bar=s.epochs_done + part)
    if not rows:
        return []
    cw = max(len(r[2]) for r in rows)
    rw = max(8, max(len(r[3]) for r in rows))
    nw = max(8, max(len(r[4]) for r in rows))
    bw = max(4, width - 10 - cw - rw - nw - 4)
    out = []
    for name, frac, counts, rate, note in rows:
        t = Text(f"{name:<10}", "bold", no_wrap=True)
        t.append_text(_bar(frac, bw))
        t.append(f" {counts:>{cw}} {rate:>{rw}} ")
        t.append(f"{note:>{nw}}", "green" if note == "done" else "")
        out.append(_fit(t, width))
    return out


def _throughput(s: DashboardState, now: float) -> Text:
    rr = s.rows_meter.rate(now) if s.stage == "training" else None
    tr = s.tokens_meter.rate(now) if s.stage == "training" else None
    br = s.bytes_meter.rate(now)
    text = Text(no_wrap=True)
    text.append("throughput ", "bold")
    text.append(f"{count(rr)} rows/s" if rr is not None else "– rows/s")
    text.append(" · ", GREY)
    text.append(f"{count(tr)} tokens/s" if tr is not None else "– tokens/s")
    text.append(" · ", GREY)
    text.append(f"{br / 1e6:.1f} MB/s read" if br is not None else "– MB/s read")
    text.append(f"  ({size(s.bytes_read)} so far)", GREY)
    return text


def _spark(values: list[float], width: int) -> str:
    values = values[-width:]
    if len(values) < 2:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    return "".join(SPARK[min(7, int((v - lo) / span * 7.999))] for v in values)


# Validation scores as shown in the model panel and the epoch lines.
_VAL_SHOWN = (("val_loss", "loss", ".4f"), ("val_accuracy", "acc", ".4f"), ("val_macro_f1", "F1", ".4f"),
              ("val_mae", "MAE", ".4g"), ("val_rmse", "RMSE", ".4g"), ("val_r2", "R²", ".4f"))


def val_parts(e: dict) -> list[str]:
    """``["loss 0.34", "acc 0.91", ...]`` for the validation scores the event has."""
    return [f"{label} {e[key]:{fmt}}" for key, label, fmt in _VAL_SHOWN if e.get(key) is not None]


def _val_text(e: dict | None) -> Text:
    if not e:
        return Text("–", GREY)
    parts = val_parts(e)
    text = Text(" · ".join(parts) or "no validation rows", no_wrap=True)
    text.append(f"  (epoch {e.get('epoch')})", GREY)
    return text


def _model_lines(s: DashboardState, width: int) -> list[Text]:
    def kv(name: str, value: Text) -> Text:
        t = Text(f"{name:<11}", "bold", no_wrap=True)
        t.append_text(value)
        return t

    loss = Text(no_wrap=True)
    if s.loss is not None:
        loss.append(f"{s.loss:.4f}")
        spark = _spark(list(s.loss_history), max(0, min(30, width - 11 - 8 - 2)))
        if spark:
            loss.append("  " + spark, "cyan")
    elif s.last_epoch:
        loss.append(f"{s.last_epoch['train_loss']:.4f}")
    else:
        loss.append("–", GREY)
    lines = [kv("train loss", loss), kv("last val", _val_text(s.last_epoch)), kv("best", _val_text(s.best))]
    if s.fitted:
        f = s.fitted
        lines.append(kv("features", Text(f"{f.get('vocabulary', 0):,} inputs · {f.get('labels', 0)} classes · "
                                         f"{f.get('docs', 0):,} training rows")))
    if s.early_stop:
        lines.append(kv("early stop", Text(f"after epoch {s.early_stop['epoch']} "
                                           f"(best {s.early_stop['best_epoch']})")))
    return lines


def _memory_lines(s: DashboardState, width: int, wide: bool) -> list[Text]:
    m, plan = s.memory or {}, s.plan or {}
    ticks = (THRESHOLDS["spill"], THRESHOLDS["pause"])
    rows: list[tuple[str, list, float, tuple, Text]] = []   # label, segments, total, ticks, info
    trainer, share = m.get("trainer_rss"), plan.get("trainer")
    if trainer is not None:
        frac = trainer / share if share else 0
        style = "green" if frac < 0.8 else ("yellow" if frac < 1 else "bold red")
        info = f"{size(trainer)}/{size(share)} ({frac:.0%})" if share else size(trainer)
        info += f" · peak {size(m.get('trainer_peak'))}" if wide else ""
        rows.append(("trainer", [(trainer, "█", style)], share or trainer, (), Text(info)))
    for w in s.workers:
        limit, rss = w.get("limit") or 0, w.get("rss") or 0
        managed = min(w.get("managed") or 0, rss)
        spilled = w.get("spilled") or 0
        frac = rss / limit if limit else 0
        style = mem_style(frac)
        if wide:
            info = (f"managed {size(managed)} · unmanaged {size(rss - managed)} · spilled {size(spilled)} "
                    f"/ {size(limit)} ({frac:.0%})")
        else:
            info = f"{size(rss)}/{size(limit)} {frac:.0%}" + (f" ⤓{size(spilled)}" if spilled else "")
        rows.append((f"worker {w.get('name', '?')}", [(managed, "█", style), (rss - managed, "▒", style),
                                                      (spilled, "░", "blue")], limit or rss or 1, ticks,
                     Text(info, style if frac >= THRESHOLDS["spill"] else "")))
    if not s.workers and m.get("workers_rss"):
        limit = (plan.get("worker_limit") or 0) * (plan.get("workers") or 0)
        frac = m["workers_rss"] / limit if limit else 0
        rows.append(("workers", [(m["workers_rss"], "█", mem_style(frac))], limit or m["workers_rss"], ticks,
                     Text(f"{size(m['workers_rss'])}/{size(limit)}" if limit else size(m["workers_rss"]))))
    out = []
    if rows:
        lw = min(14, max(len(r[0]) for r in rows))
        iw = max(len(r[4]) for r in rows)
        bw = max(6, width - lw - iw - 2)
        iw = min(iw, max(0, width - lw - bw - 2))
        for label, segs, total, tk, info in rows:
            t = Text(f"{label[:lw]:<{lw}} ", "bold", no_wrap=True)
            t.append_text(_segments(segs, total, bw, tk))
            t.append(" ")
            t.append_text(_fit(info, iw))
            out.append(t)
    foot = Text(no_wrap=True)
    if m.get("available") is not None:
        foot.append("machine ", "bold")
        foot.append(f"{size(m['available'])} available")
    if plan:
        foot.append("  budget ", "bold")
        if plan.get("external"):
            foot.append(f"trainer {size(plan['trainer'])} · existing cluster {plan['workers']} × "
                        f"{size(plan['worker_limit'])}")
        else:
            foot.append(f"{size(plan['budget'])} = OS {size(plan['reserve'])} + trainer {size(plan['trainer'])} + "
                        f"{plan['workers']} × {size(plan['worker_limit'])}")
        if wide:
            foot.append(f" · partition {size(plan['partition'])} · {plan['in_flight']} in flight", GREY)
    if len(foot):
        out.append(foot)
    if s.workers:
        legend = Text("█ managed ▒ unmanaged ", GREY, no_wrap=True)
        legend.append("░ spilled", "blue")
        legend.append(f" ┊ spill at {THRESHOLDS['spill']:.0%}, pause at {THRESHOLDS['pause']:.0%}", GREY)
        out.append(legend)
    if s.dask_dashboard:
        out.append(Text.assemble(("dask dashboard ", "bold"), (s.dask_dashboard, "underline")))
    return out or [Text("waiting for the first sample…", GREY)]


def render(state: DashboardState, width: int = 80, now: float | None = None) -> "Frame":
    """The dashboard for ``state`` at ``width`` columns (a pure function of both)."""
    now = state.now() if now is None else now
    width = max(40, width)
    wide = width >= WIDE
    lw = width * 3 // 5 if wide else width
    progress = [_stage_line(state, now, lw - 4), *_progress_lines(state, now, lw - 4), _throughput(state, now)]
    model = _model_lines(state, (width - lw if wide else width) - 4)
    lines: list[Text] = []
    if wide:
        h = max(len(progress), len(model)) + 2
        lines += _side_by_side(_box("lancetnic-flow", progress, lw, "cyan", h),
                               _box("model", model, width - lw, "blue", h), lw, width - lw)
    else:
        lines += _box("lancetnic-flow", progress, width, "cyan") + _box("model", model, width, "blue")
    lines += _box("memory", _memory_lines(state, width - 4, wide), width, "magenta")
    if state.ranks:
        lines += _box(f"ranks (--ddp {len(state.ranks)})", [_fit(Text(rank_text(r), no_wrap=True), width - 4)
                                                           for _, r in sorted(state.ranks.items())], width, "green")
    for w in state.warnings:
        lines.append(_fit(Text("warning: " + w, "yellow"), width))
    return Frame(lines)


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


def rank_text(r: dict) -> str:
    """One --ddp rank: where it runs, how far it is, how fast."""
    loss = f" · loss {r['loss']:.4f}" if r.get("loss") is not None else ""
    done = " · epoch done" if r.get("done") else ""
    return (f"rank {r['rank']}  {r.get('worker', '?')}  epoch {r.get('epoch', 0)}/{r.get('epochs', 0)} · "
            f"rows {r.get('rows', 0):,} · {r.get('rows_per_s') or 0:,.0f} rows/s{loss}{done}")


# ------------------------------------------------------------------ plain text

def status_line(s: DashboardState, now: float | None = None) -> str:
    """The dashboard's facts as one line, for logs that are not a terminal."""
    now = s.now() if now is None else now
    out = [f"[{duration(s.elapsed(now))}]"]
    if s.stage == "fitting":
        rate = s.fit_meter.rate(now)
        out.append(f"fitting {s.fit_done}/{s.fit_total} partitions" + (f" ({rate:.1f}/s)" if rate else ""))
    elif s.stage == "training":
        pct = f" ({s.rows / s.total_rows:.0%})" if s.total_rows else ""
        out.append(f"training epoch {s.epoch}/{s.epochs} · rows {s.rows:,}/{s.total_rows:,}{pct}")
        if s.feat_total and s.source == "live":
            out.append(f"featurised {s.feat_done}/{s.feat_total}")
        rr, tr = s.rows_meter.rate(now), s.tokens_meter.rate(now)
        if rr is not None:
            eta = (s.total_rows - s.rows) / rr if rr and s.total_rows > s.rows else None
            out.append(f"{rr:,.0f} rows/s" + (f" · ETA {duration(eta)}" if eta is not None else ""))
        if tr is not None:
            out.append(f"{count(tr)} tokens/s")
        if s.loss is not None:
            out.append(f"loss {s.loss:.4f}")
        if s.ranks:
            out.append("ranks " + " ".join(f"{k}:{r.get('rows', 0):,}" for k, r in sorted(s.ranks.items())))
    else:
        out.append(s.stage)
    br = s.bytes_meter.rate(now)
    if br:
        out.append(f"{br / 1e6:.1f} MB/s read")
    m, plan = s.memory or {}, s.plan or {}
    if m:
        mem = f"memory trainer {size(m.get('trainer_rss'))}"
        if plan.get("trainer"):
            mem += f"/{size(plan['trainer'])}"
        if s.workers:
            mem += " · workers " + " ".join(
                f"{size(w.get('rss'))}/{size(w.get('limit'))}" + (f"(spilled {size(w['spilled'])})" if w.get("spilled") else "")
                for w in s.workers)
        elif m.get("workers_rss"):
            mem += f" · workers {size(m['workers_rss'])}"
        mem += f" · available {size(m.get('available'))}"
        out.append(mem)
    return " · ".join(out)


# ------------------------------------------------------------------- summary

_METRICS = (("val_accuracy", "accuracy"), ("val_macro_f1", "macro-F1"), ("val_precision", "macro precision"),
            ("val_recall", "macro recall"), ("val_mae", "MAE"), ("val_rmse", "RMSE"),
            ("val_baseline_rmse", "baseline RMSE"), ("val_r2", "R²"), ("val_loss", "loss"))


def _kv(title: str) -> Table:
    t = Table(title=title, title_justify="left", title_style="bold", show_header=False, box=None,
              padding=(0, 1), expand=False)
    t.add_column(no_wrap=True, style="cyan")
    t.add_column(no_wrap=True, justify="right")
    t.add_column(no_wrap=True, style="grey50", overflow="ellipsis")
    return t


def render_summary(done: dict, width: int = 80) -> Group:
    """The final summary of a ``done`` event: metrics, rows, time, memory, run."""
    m, run = done["metrics"], done["run"]
    metrics = _kv("result")
    for key, name in _METRICS:
        if m.get(key) is not None:
            metrics.add_row(name, f"{m[key]:.4f}")
    if m.get("best_epoch"):
        metrics.add_row("best epoch", f"{m['best_epoch']} ({m.get('monitor', 'val_loss')})")
    if m.get("model"):
        metrics.add_row("model", f"{m['model']}")
    if m.get("vocabulary"):
        metrics.add_row("inputs", f"{m['vocabulary']:,}")

    rows = _kv("rows")
    r = m.get("rows") or {}
    read = r.get("read", 0) or 0
    pct = lambda n: (f"{n / read:.1%}" if n == 0 or n / read >= 0.001 else f"{n / read:.3%}") if read else ""  # noqa: E731
    rows.add_row("read", f"{read:,}", "")
    rows.add_row("trained", f"{r.get('trained', 0):,}", pct(r.get("trained", 0)))
    rows.add_row("validated", f"{r.get('validated', 0):,}", pct(r.get("validated", 0)))
    skipped = r.get("skipped") or {}
    rows.add_row("skipped", f"{sum(skipped.values()):,}", pct(sum(skipped.values())) if skipped else "")
    for reason, n in sorted(skipped.items()):
        rows.add_row(f"  {reason}", f"{n:,}", pct(n))

    times = _kv("time")
    stage_s = dict(m.get("stage_seconds") or {})
    names = {"cluster_start": "cluster start", "fit": "fit", "train": "train + evaluate", "save": "save"}
    for key, secs in stage_s.items():
        times.add_row(names.get(key, key), f"{secs:.1f}s", "")
    if m.get("seconds") is not None:
        times.add_row("total", f"{m['seconds']:.1f}s", f"{len(m.get('epochs') or [])} epoch(s)")

    mem = _kv("peak memory")
    mm = m.get("memory") or {}
    plan = mm.get("plan") or {}
    tp, wp = mm.get("trainer_peak_rss_bytes"), mm.get("workers_peak_bytes")
    share = plan.get("trainer")
    mem.add_row("trainer", size(tp), f"{tp / share:.0%} of its {size(share)}" if share and tp else "")
    wlimit = (plan.get("worker_limit") or 0) * (plan.get("workers") or 0)
    mem.add_row("workers", size(wp), f"{wp / wlimit:.0%} of {plan.get('workers')} × {size(plan.get('worker_limit'))}"
                if wlimit and wp is not None else "")
    if mm.get("budget_bytes"):
        tot = (tp or 0) + (wp or 0)
        mem.add_row("budget", size(mm["budget_bytes"]), f"{tot / mm['budget_bytes']:.0%} used at peak")

    from rich.columns import Columns

    body = Columns([metrics, rows, times, mem], padding=(1, 4))  # side by side where they fit
    foot = Text()
    foot.append("run      ", "bold")
    foot.append(run + "\n")
    foot.append("predict  ", "bold")
    foot.append(f"lancetnic-flow predict {run} --text \"...\"")
    return Group(Panel(body, title="[bold green]training finished", title_align="left",
                       border_style="green"), foot)


def replay(lines: Any, until: float | None = None, state: DashboardState | None = None) -> DashboardState:
    """A state rebuilt from a ``--json-log`` file's lines, up to ``until``
    seconds into the run; its clock stands at the last event replayed."""
    import json

    now = [0.0]
    state = state or DashboardState(clock=lambda: now[0])
    for line in lines:
        if not line.strip():
            continue
        rec = json.loads(line)
        t = rec.pop("elapsed", None) or 0.0
        if until is not None and t > until:
            break
        kind = rec.pop("event")
        rec.pop("time", None)
        now[0] = rec["t"] = t
        state.update(kind, rec)
    return state


# ---------------------------------------------------------------------- live

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
            self._last = render(self.state, self.console.width)
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
            self.console.print(render_summary(e, self.console.width))
            return
        if not self.started and kind in ("stage", "plan"):
            self.start()
        if kind == "plan":
            self.console.print(e["text"], highlight=False, soft_wrap=True, markup=False)
        elif kind == "warning":
            self.console.print(f"[yellow]warning:[/] {escape(e['message'])}", soft_wrap=True, highlight=False)
        elif kind == "fitted":
            self.console.print(fitted_line(e), highlight=False, markup=False)
        elif kind == "epoch":
            self.console.print(epoch_line(e), highlight=False, soft_wrap=True, markup=False)
        elif kind == "early_stop":
            self.console.print(early_stop_line(e), highlight=False, markup=False)
        elif kind == "resumed":
            self.console.print(resumed_line(e), highlight=False, soft_wrap=True, markup=False)


def fitted_line(e: dict) -> str:
    src = "from cache" if e.get("cached") else f"in {e.get('seconds', 0):.1f}s"
    return (f"features  {e['vocabulary']:,} inputs · {e['labels']} classes · {e['docs']:,} training rows ({src})")


def epoch_line(e: dict) -> str:
    parts = val_parts(e)
    val = (" · val " + " · ".join(parts)) if parts else ""
    rate = f" · {e['rows_per_s']:,.0f} rows/s" if e.get("rows_per_s") else ""
    return f"epoch {e['epoch']}  train loss {e['train_loss']:.4f}{val}{rate}"


def resumed_line(e: dict) -> str:
    skip = f", replaying its first {e['batches']:,} batches without training on them" if e.get("batches") else ""
    return f"resuming {e['run']} at epoch {e['epoch']}{skip}"


def early_stop_line(e: dict) -> str:
    return (f"early stop after epoch {e['epoch']}: {e['monitor']} last improved in epoch {e['best_epoch']} "
            "(its weights are kept)")
