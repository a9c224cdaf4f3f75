"""The dashboard's facts as text: the final summary of a run, milestone
lines (plan, warnings, features, epochs, early stop, resume) and a one-line
status for logs that are not a terminal."""
from __future__ import annotations

import shlex

from rich.columns import Columns
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ...scores import SCORES
from ...temporary_runs import is_temporary_run
from ..tune_lines import TUNE_MILESTONES
from .state import DashboardState
from .widgets import count, duration, features_text, short_size, val_parts
from ...plurals import counted


def rank_text(r: dict) -> str:
    """One --ddp rank: where it runs, how far it is, how fast."""
    loss = f" · loss {r['loss']:.4f}" if r.get("loss") is not None else ""
    done = " · epoch done" if r.get("done") else ""
    return (f"rank {r['rank']}  {r.get('worker', '?')}  epoch {r.get('epoch', 0)}/{r.get('epochs', 0)} · "
            f"rows {r.get('rows', 0):,} · {r.get('rows_per_s') or 0:,.0f} rows/s{loss}{done}")


def status_line(s: DashboardState, now: float | None = None) -> str:
    """The dashboard's facts as one line, for logs that are not a terminal."""
    now = s.now() if now is None else now
    out = [f"[{duration(s.elapsed(now))}]"]
    if s.stage == "fitting":
        rate = s.fit_meter.rate(now)
        out.append(f"fitting {s.fit_done}/{s.fit_total} partitions" + (f" ({rate:.1f}/s)" if rate else ""))
    elif s.stage == "training":
        # Rounded down: 99.6 % of an epoch is not "100%" until its last row.
        pct = f" ({100 * s.rows // s.total_rows}%)" if s.total_rows else ""
        out.append(f"training epoch {s.epoch}/{s.epochs} · rows {s.rows:,}/{s.total_rows:,}{pct}")
        if s.feat_total and s.source in ("live", "fresh"):
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
        mem = f"memory trainer {short_size(m.get('trainer_rss'))}"
        if plan.get("trainer"):
            mem += f"/{short_size(plan['trainer'])}"
        if s.workers:
            mem += " · workers " + " ".join(
                f"{short_size(w.get('rss'))}/{short_size(w.get('limit'))}" + (f"(spilled {short_size(w['spilled'])})" if w.get("spilled") else "")
                for w in s.workers)
        elif m.get("workers_rss"):
            mem += f" · workers {short_size(m['workers_rss'])}"
        mem += f" · available {short_size(m.get('available'))}"
        out.append(mem)
    return " · ".join(out)


# The summary's scores: every one the run has, the loss last.
_SUMMARY = [sc for sc in SCORES if sc.name != "loss"] + [sc for sc in SCORES if sc.name == "loss"]


def _kv(title: str) -> Table:
    t = Table(title=title, title_justify="left", title_style="bold", show_header=False, box=None,
              padding=(0, 1), expand=False)
    t.add_column(no_wrap=True, style="cyan")
    t.add_column(no_wrap=True, justify="right")
    t.add_column(no_wrap=True, style="grey50", overflow="ellipsis")
    return t


def _add_scores(metrics: Table, m: dict) -> None:
    """The validation figures of ``m`` (metrics.json's) into ``metrics``: a label set run's at its saved
    thresholds first, what the saved model decides (predict, evaluate), then the kept epoch's."""
    at = m.get("val_at_thresholds") or {}
    for key, name in (("micro_f1", "micro-F1"), ("macro_f1", "macro-F1"), ("subset_accuracy", "subset accuracy")):
        if at.get(key) is not None:
            metrics.add_row(f"{name} at the saved thresholds", f"{at[key]:.4f}")
    # Label sets' epoch figures decide each label at margin 0 (or 0.5), as --monitor judged them: said so.
    decided = f" at {m['val_decided_at']}" if m.get("val_decided_at") else ""
    for sc in _SUMMARY:
        if m.get(sc.key) is not None:
            metrics.add_row(sc.long + (decided if sc.name != "loss" else ""), sc.shown(m[sc.key]))


def render_summary(done: dict, width: int = 80) -> Group:
    """The final summary of a ``done`` event: metrics, rows, time, memory, run."""
    m, run = done["metrics"], done["run"]
    metrics = _kv("result")
    _add_scores(metrics, m)
    calibrated = (m.get("calibration") or {}).get("val_loss")
    if calibrated is not None:   # a margin model: its scores' loss above, its probabilities' here
        metrics.add_row("loss, calibrated", f"{calibrated:.4f}")
    if m.get("kept") == "start":   # a continued run that no epoch improved: its old run's weights
        metrics.add_row("kept", "its start (no epoch beat it)")
    elif m.get("best_epoch") and m.get("kept") == "last":
        metrics.add_row("kept epoch", f"{m['best_epoch']} (the last)")
    elif m.get("best_epoch"):
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
    # The rows add up to the total: starting (the model's kernels, reading the run's options), planning
    # and the steps between stages took 8 s of a 19 s run that its rows did not name. --ddp's ranks
    # calibrate within its train time: not counted twice.
    ranks = m.get("trained_on") == "cluster"
    rest = (m.get("seconds") or 0) - sum(v for k, v in stage_s.items() if not (ranks and k == "calibrate"))
    if stage_s and rest >= 0.05:
        times.add_row("other", f"{rest:.1f}s", "start, planning, between stages")
    if m.get("seconds") is not None:
        epochs = counted(len(m.get('epochs') or []), 'epoch')
        if m.get("resumed"):   # the times are this command's: the run's first part ran before its checkpoint
            epochs += f", this command's from epoch {m['resumed']['epoch']} (resumed)"
        times.add_row("total", f"{m['seconds']:.1f}s", epochs)

    mem = _kv("peak memory")
    mm = m.get("memory") or {}
    plan = mm.get("plan") or {}
    tp, wp = mm.get("trainer_peak_rss_bytes"), mm.get("workers_peak_bytes")
    share = plan.get("trainer")
    mem.add_row("trainer", short_size(tp), f"{tp / share:.0%} of its {short_size(share)}" if share and tp else "")
    same = (plan.get("worker_limit") or 0) * (plan.get("workers") or 0)
    # an existing cluster's workers may differ: the smallest limit times the workers is not theirs
    wlimit = plan.get("workers_total") or same
    of = (f"{plan.get('workers')} × {short_size(plan.get('worker_limit'))}" if wlimit == same else
          f"{short_size(wlimit)} ({counted(plan.get('workers') or 0, 'worker')})")
    if not plan.get("in_process"):   # featurised in the trainer's process: no workers to show
        mem.add_row("workers", short_size(wp), f"{wp / wlimit:.0%} of {of}" if wlimit and wp is not None else "")
    if mm.get("budget_bytes"):
        # At its peak the trainer and the workers together held peak_rss_bytes (runs before it: the two peaks).
        tot = mm.get("peak_rss_bytes") or (tp or 0) + (wp or 0)
        mem.add_row("budget", short_size(mm["budget_bytes"]), f"{tot / mm['budget_bytes']:.0%} used at peak")

    body = Columns([metrics, rows, times, mem], padding=(1, 4))  # side by side where they fit
    return Group(Panel(body, title="[bold green]training finished", title_align="left",
                       border_style="green"), run_footer(run, done.get("charts")))


def run_footer(run: str, charts: dict | None) -> Text:
    """The lines under the summary: the run folder, its charts, and how to predict with it."""
    # Never wrapped: a path cut at the width would be copied as two broken lines (print_summary).
    foot = Text(no_wrap=True, overflow="ignore")
    foot.append("run      ", "bold")
    temporary = is_temporary_run(run)
    foot.append(run + (" (temporary: it goes with the estimator; its save(PATH) keeps a copy)" if temporary else "")
                + "\n")
    if charts:
        foot.append("charts   ", "bold")
        foot.append(f"{len(charts['files'])} drawing in the background, pid {charts['pid']} (--wait-for-plots waits)\n")
    foot.append("predict  ", "bold")
    # Quoted for the shell, so a path with spaces can be copied as it is; a temporary folder
    # is gone by the time a command could read it, so the estimator's own calls are named.
    foot.append("the estimator's predict(texts), or lancetnic-flow predict PATH after its save(PATH)" if temporary
                else f"lancetnic-flow predict {shlex.quote(run)} --text '...'")
    return foot


def print_summary(console: Console, done: dict) -> None:
    """Print the final summary of a ``done`` event on ``console``: the panel within its
    width, the run's path and the predict command whole, however long, so they copy as typed."""
    console.print(render_summary(done, console.width), crop=False)


def fitted_line(e: dict) -> str | None:
    """The features line; none for a read that a line already announced (tune's final run
    on a searched entry). Each of tune's entries names its n-gram setting."""
    if e.get("announced"):
        return None
    src = "from cache" if e.get("cached") else f"in {e.get('seconds', 0):.1f}s"
    setting = f"ngrams {e['ngrams']} · " if e.get("ngrams") else ""
    return f"features  {setting}{features_text(e)} ({src})"


def epoch_line(e: dict) -> str:
    parts = val_parts(e)
    val = (" · val " + " · ".join(parts)) if parts else ""
    rate = f" · {e['rows_per_s']:,.0f} rows/s" if e.get("rows_per_s") else ""
    return f"epoch {e['epoch']}  train loss {e['train_loss']:.4f}{val}{rate}"


def start_line(e: dict) -> str:
    """A continued run's starting weights, scored: the epochs to come must beat them to be saved."""
    parts = val_parts(e)
    return f"start    --init-from's weights · val {' · '.join(parts)} (an epoch must beat them to be kept)"


def resumed_line(e: dict) -> str:
    skip = f", replaying its first {counted(e['batches'], 'batch')} without training on them" if e.get("batches") else ""
    return f"resuming {e['run']} at epoch {e['epoch']}{skip}"


def early_stop_line(e: dict) -> str:
    return (f"early stop after epoch {e['epoch']}: {e['monitor']} last improved in epoch {e['best_epoch']} "
            "(its weights are kept)")


def ddp_line(e: dict) -> str:
    """Where the model trains on the cluster: one trainer task, or --ddp's ranks."""
    workers = ", ".join(e.get("workers") or [])
    if e.get("ranks") == 1:
        return f"training on the cluster: one trainer task on {workers} ({e.get('device', 'cpu')})"
    line = f"training on the cluster: {e['ranks']} ranks on {workers} ({e.get('backend')}, {e.get('device')})"
    return f"{line}; {e['sync']}" if e.get("sync") else line


_MILESTONES = {"plan": lambda e: e["text"], "ddp": ddp_line, "warning": lambda e: f"warning: {e['message']}",
               "decided": lambda e: f"decided  {e['message']}", "waiting": lambda e: f"waiting  {e['message']}",
               "fitted": fitted_line, "start_scored": start_line, "epoch": epoch_line, "early_stop": early_stop_line, "resumed": resumed_line,
               **TUNE_MILESTONES}   # `tune`: the search's start, each finished trial, the outcome


def milestone(kind: str, e: dict) -> str | None:
    """The line a milestone event prints (above the live view, or in a plain log); None for other events."""
    line = _MILESTONES.get(kind)
    return line(e) if line is not None else None
