"""The dashboard's pieces: number formats, bars and boxes drawn as lines of
``Text`` of exactly the right width, and the panels made of them (stages,
progress, throughput, the model, memory).

Boxes are drawn by hand: Rich's nested Table/Panel layout costs ~25-40 ms a
frame, this costs ~1-2 ms (docs/dashboard.md, "Overhead").
"""
from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text

from ...dataflow.plan import THRESHOLDS, lines_text
from ...scores import SCORES
from ...sizes import format_size
from .state import DashboardState
from ...plurals import counted

STAGES = ("planning", "fitting", "training", "evaluating", "saving")
SPARK = "▁▂▃▄▅▆▇█"


def short_size(n: float | None) -> str:
    """Bytes, short: ``438M``, ``2.0G``."""
    return "–" if n is None else format_size(n, short=True)


def count(n: float | None) -> str:
    """``6,512`` below 100k, ``1.2M`` above."""
    if n is None:
        return "–"
    # Each unit from where the one below would round up into four digits (999,600 is 1.0M, not 1000k).
    if abs(n) >= 999.95e6:
        return f"{n / 1e9:.1f}G"
    if abs(n) >= 999.5e3:
        return f"{n / 1e6:.1f}M"
    if abs(n) >= 99_999.5:
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


def mem_style(frac: float, lines: dict | None = None) -> str:
    """Colour of a worker's memory as it nears its lines (``lines``: the plan's; Dask's defaults)."""
    th = {**THRESHOLDS, **(lines or {})}
    for name, style in (("pause", "bold red"), ("spill", "dark_orange"), ("target", "yellow")):
        if th.get(name) and frac >= th[name]:
            return style
    return "green"


GREY = "grey42"
TRACK = "grey23"


def fit(t: Text, width: int) -> Text:
    t.no_wrap = True
    t.truncate(max(0, width), overflow="ellipsis", pad=True)
    return t


def tail(name: str, width: int) -> str:
    """``name`` in exactly ``width`` cells; a longer one keeps its end, where workers' names differ
    (``…0.0.5:38111``): cut at its start, every worker of a cluster read ``worker tcp://1``."""
    if cell_len(name) <= width:
        return name + " " * (width - cell_len(name))
    kept = ""
    for ch in reversed(name):
        if cell_len(ch + kept) > width - 1:
            break
        kept = ch + kept
    return "…" + kept + " " * (width - 1 - cell_len(kept))


def worker_label(w: dict) -> str:
    """``worker 0`` for a local worker; a worker named by its address (an existing cluster's), the
    address without its scheme, which tells the workers apart where ``worker tcp://`` did not."""
    name = str(w.get("name", "?"))
    return f"worker {name}" if len(name) <= 6 else name.split("://")[-1]


def wrap(line: Text, width: int, indent: int = 0, seps: tuple[str, ...] = (" · ",)) -> list[Text]:
    """``line`` as it is where it fits; else broken after its separators into lines of at most
    ``width`` cells, each after the first indented by ``indent``. Cut at the edge instead, a narrow
    terminal lost the figures past it without a word (the F1 and epoch of "last val", the MB/s read)."""
    if line.cell_len <= width:
        return [line]
    plain = line.plain
    # After a separator's last space: " (" breaks before its parenthesis.
    cuts = sorted({i + sep.rfind(" ") + 1 for sep in seps for i in range(len(plain)) if plain.startswith(sep, i)})
    out, cur = [], Text(no_wrap=True)
    for piece in line.divide(cuts):
        if cur.plain.strip() and cur.cell_len + cell_len(piece.plain.rstrip()) > width:
            cur.rstrip()
            out.append(cur)
            cur = Text(" " * indent, no_wrap=True)
        cur.append_text(piece)
    cur.rstrip()
    return [fit(t, width) for t in out + [cur]]


def bar(frac: float | None, width: int, style: str = "cyan", done_style: str = "green") -> Text:
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


def segments(segments: list[tuple[float, str, str]], total: float, width: int, ticks: tuple[float, ...] = ()) -> Text:
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


def box(title: str, lines: list[Text], width: int, style: str, height: int | None = None) -> list[Text]:
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
        row.append_text(fit(line, inner))
        row.append(" │", style)
        out.append(row)
    out.append(Text("╰" + "─" * (width - 2) + "╯", style, no_wrap=True))
    return out


def side_by_side(left: list[Text], right: list[Text], lw: int, rw: int) -> list[Text]:
    n = max(len(left), len(right))
    out = []
    for i in range(n):
        row = left[i].copy() if i < len(left) else Text(" " * lw)
        row.append_text(right[i] if i < len(right) else Text(" " * rw))
        out.append(row)
    return out


def stage_line(s: DashboardState, now: float, width: int) -> Text:
    """The stages, the current one highlighted, and the run's clock at the right edge; where they do
    not fit, the current stage alone (cut, the line ended at "training …", the stage and epoch lost)."""
    text, current = Text(no_wrap=True), None
    for i, name in enumerate(STAGES):
        if i:
            text.append(" → ", GREY)
        label = name
        if name == "training" and s.epochs:
            label = f"training epoch {s.epoch}/{s.epochs}"
        if name == "fitting" and s.fit_cached:
            label = "fitting (cached)"
        if name == s.stage:
            text.append(label, "bold reverse cyan")
            current = Text(label, "bold reverse cyan", no_wrap=True)
            current.append(f" stage {i + 1}/{len(STAGES)}", GREY)
        elif name in s.stages_seen or s.stage == "done" or (name == "fitting" and s.fit_cached):
            text.append(label, "green")
        else:
            text.append(label, GREY)
    clock = duration(s.elapsed(now))
    if text.cell_len + len(clock) + 1 > width:
        text = current or Text(s.stage, "bold", no_wrap=True)
    fit(text, width - len(clock) - 1)
    text.append(" " + clock, "bold")
    return text


def progress_lines(s: DashboardState, now: float, width: int) -> list[Text]:
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
        # The epoch's rows count until its record: evaluating them, the bar stood back at its start.
        going = s.stage in ("training", "evaluating") and s.epochs_done < s.epoch and s.total_rows
        part = min(1.0, s.rows / s.total_rows) if going else 0.0
        row("epochs", s.epochs_done, s.epochs, None, "", bar=s.epochs_done + part)
    if not rows:
        return []
    cw = max(len(r[2]) for r in rows)
    rw = max(8, max(len(r[3]) for r in rows))
    nw = max(8, max(len(r[4]) for r in rows))
    bw = width - 10 - cw - rw - nw - 4
    if bw < 4:   # too narrow for one line: the bar on one, its figures under it, none cut off
        return progress_lines_narrow(rows, width)
    out = []
    for name, frac, counts, rate, note in rows:
        t = Text(f"{name:<10}", "bold", no_wrap=True)
        t.append_text(bar(frac, bw))
        t.append(f" {counts:>{cw}} {rate:>{rw}} ")
        t.append(f"{note:>{nw}}", "green" if note == "done" else "")
        out.append(fit(t, width))
    return out


def progress_lines_narrow(rows: list[tuple[str, float | None, str, str, str]], width: int) -> list[Text]:
    """Each progress row as two lines: its name and bar, then its count, rate and note."""
    cw, rw = max(len(r[2]) for r in rows), max(len(r[3]) for r in rows)
    out = []
    for name, frac, counts, rate, note in rows:
        t = Text(f"{name:<10}", "bold", no_wrap=True)
        t.append_text(bar(frac, width - 10))
        figures = Text(f"  {counts:>{cw}} {rate:>{rw}} ", no_wrap=True)
        figures.append(note, "green" if note == "done" else "")
        out += [t, fit(figures, width)]
    return out


def throughput(s: DashboardState, now: float, width: int) -> list[Text]:
    """Rows/s and tokens/s of training, MB/s read; over several lines where narrow."""
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
    # In the rate's own unit: "0.8 MB/s read (15M so far)" put mebibytes beside megabytes (16.0 MB read).
    text.append(f" ({s.bytes_read / 1e6:,.1f} MB so far)", GREY)
    return wrap(text, width, 11 if width >= 60 else 2, (" · ", "read "))


def spark(values: list[float], width: int) -> str:
    values = values[-width:]
    if len(values) < 2:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    return "".join(SPARK[min(7, int((v - lo) / span * 7.999))] for v in values)


def val_parts(e: dict) -> list[str]:
    """``["loss 0.34", "acc 0.91", ...]`` for the validation scores the event has; label sets'
    with where they decide a label (``at margin 0``): not the saved model's thresholds."""
    parts = [f"{s.short} {s.shown(e[s.key])}" for s in SCORES if s.short and e.get(s.key) is not None]
    return parts + [f"at {e['val_decided_at']}"] if parts and e.get("val_decided_at") else parts


def val_text(e: dict | None) -> Text:
    if not e:
        return Text("–", GREY)
    parts = val_parts(e)
    text = Text(" · ".join(parts) or "no validation rows", no_wrap=True)
    text.append("  (the start: --init-from's weights)" if e.get("epoch") == 0 else f"  (epoch {e.get('epoch')})", GREY)
    return text


def features_text(f: dict) -> str:
    """``19,951 inputs · 4 classes · 54,027 training rows``; a run with no classes (regression) names none."""
    classes = f" · {counted(f['labels'], 'class')}" if f.get("labels") else ""
    return f"{f.get('vocabulary', 0):,} inputs{classes} · {counted(f.get('docs', 0), 'training row')}"


def model_lines(s: DashboardState, width: int) -> list[Text]:
    def kv(name: str, value: Text) -> Text:
        t = Text(f"{name:<11}", "bold", no_wrap=True)
        t.append_text(value)
        return t

    loss = Text(no_wrap=True)
    if s.loss is not None:
        loss.append(f"{s.loss:.4f}")
        line = spark(list(s.loss_history), max(0, min(30, width - 11 - 8 - 2)))
        if line:
            loss.append("  " + line, "cyan")
    elif s.last_epoch:
        loss.append(f"{s.last_epoch['train_loss']:.4f}")
    else:
        loss.append("–", GREY)
    lines = [kv("train loss", loss), kv("last val", val_text(s.last_epoch)), kv("best", val_text(s.best))]
    if s.fitted:
        f = s.fitted
        lines.append(kv("features", Text(features_text(f))))
    if s.early_stop:
        lines.append(kv("early stop", Text(f"after epoch {s.early_stop['epoch']} "
                                           f"(best {s.early_stop['best_epoch']})")))
    indent = 11 if width >= 60 else 2   # under its value where there is room; else room for the figures
    return [part for line in lines for part in wrap(line, width, indent, (" · ", "  "))]


def memory_lines(s: DashboardState, width: int, wide: bool) -> list[Text]:
    m, plan = s.memory or {}, s.plan or {}
    th = {**THRESHOLDS, **(plan.get("lines") or {})}   # an existing cluster's own lines
    ticks = tuple(th[n] for n in ("spill", "pause") if th.get(n))
    rows: list[tuple[str, list, float, tuple, Text]] = []   # label, segments, total, ticks, info
    trainer, share = m.get("trainer_rss"), plan.get("trainer")
    if trainer is not None:
        frac = trainer / share if share else 0
        style = "green" if frac < 0.8 else ("yellow" if frac < 1 else "bold red")
        info = f"{short_size(trainer)}/{short_size(share)} ({frac:.0%})" if share else short_size(trainer)
        info += f" · peak {short_size(m.get('trainer_peak'))}" if wide else ""
        rows.append(("trainer", [(trainer, "█", style)], share or trainer, (), Text(info)))
    for w in s.workers:
        limit, rss = w.get("limit") or 0, w.get("rss") or 0
        managed = min(w.get("managed") or 0, rss)
        spilled = w.get("spilled") or 0
        frac = rss / limit if limit else 0
        style = mem_style(frac, th)
        if wide:
            info = (f"managed {short_size(managed)} · unmanaged {short_size(rss - managed)} · spilled {short_size(spilled)} "
                    f"/ {short_size(limit)} ({frac:.0%})")
        else:
            info = f"{short_size(rss)}/{short_size(limit)} {frac:.0%}" + (f" ⤓{short_size(spilled)}" if spilled else "")
        rows.append((worker_label(w), [(managed, "█", style), (rss - managed, "▒", style),
                                                      (spilled, "░", "blue")], limit or rss or 1, ticks,
                     Text(info, style if frac >= (th.get("spill") or th.get("pause") or 1.0) else "")))
    if not s.workers and m.get("workers_rss"):
        # an existing cluster's limits may differ: their total, not the smallest times the workers
        limit = plan.get("workers_total") or (plan.get("worker_limit") or 0) * (plan.get("workers") or 0)
        frac = m["workers_rss"] / limit if limit else 0
        rows.append(("workers", [(m["workers_rss"], "█", mem_style(frac, th))], limit or m["workers_rss"], ticks,
                     Text(f"{short_size(m['workers_rss'])}/{short_size(limit)}" if limit else short_size(m["workers_rss"]))))
    out = []
    if rows:
        iw = max(len(r[4]) for r in rows)
        # The names give way to the figures: a long name cut "400M/768M (52%)" to "(52…" at 40 columns.
        lw = max(7, min(24 if wide else 14, width - iw - 8, max(cell_len(r[0]) for r in rows)))
        bw = max(6, width - lw - iw - 2)
        iw = min(iw, max(0, width - lw - bw - 2))
        for label, segs, total, tk, info in rows:
            t = Text(tail(label, lw) + " ", "bold", no_wrap=True)
            t.append_text(segments(segs, total, bw, tk))
            t.append(" ")
            t.append_text(fit(info, iw))
            out.append(t)
    foot = Text(no_wrap=True)
    if m.get("available") is not None:
        foot.append("machine ", "bold")
        foot.append(f"{short_size(m['available'])} available")
    if plan:
        foot.append("  budget ", "bold")
        if plan.get("in_process"):
            foot.append(f"{short_size(plan['budget'])} = OS {short_size(plan['reserve'])} + trainer "
                        f"{short_size(plan['trainer'])} (featurising here, no workers)")
        elif plan.get("external"):
            total, same = plan.get("workers_total") or 0, plan["workers"] * plan["worker_limit"]
            each = (f"{plan['workers']} × {short_size(plan['worker_limit'])}" if not total or total == same else
                    f"{counted(plan['workers'], 'worker')}, {short_size(total)} in all")
            foot.append(f"trainer {short_size(plan['trainer'])} · existing cluster {each}")
        else:
            foot.append(f"{short_size(plan['budget'])} = OS {short_size(plan['reserve'])} + trainer {short_size(plan['trainer'])} + "
                        f"{plan['workers']} × {short_size(plan['worker_limit'])}")
        if wide:
            foot.append(f" · partition {short_size(plan['partition'])} · {plan['in_flight']} in flight", GREY)
    if len(foot):
        out += wrap(foot, width, 2, ("  ", " · ", " + ", " = ", " ("))
    if s.workers:
        legend = Text("█ managed ▒ unmanaged ", GREY, no_wrap=True)
        legend.append("░ spilled", "blue")
        legend.append(f" ┊ {lines_text(th).replace(' · ', ', ')}", GREY)
        out += wrap(legend, width, 2, ("unmanaged ", "spilled ", "% "))
    if s.dask_dashboard:
        address = Text.assemble(("dask dashboard ", "bold"), (s.dask_dashboard, "underline"))
        out += wrap(address, width, 2, ("dashboard ",))
    return out or [Text("waiting for the first sample…", GREY)]
