"""What ``tune`` shows: a line when the search starts, one per finished trial
(its options, its metric, the best so far, the time left), the outcome
against the defaults, and a table of the trials."""
from __future__ import annotations

from typing import Any

from ..scores import BY_KEY
from ..plurals import counted

SHORT = {"sparse_lr": "sparse_lr", "lr": "lr", "hidden": "hidden", "epochs": "epochs", "batch_size": "batch",
         "dropout": "dropout", "ngrams": "ngrams"}


# The table's column names: narrow, so it fits 80 columns.
COLUMN = {"sparse_lr": "s_lr", "hidden": "hid", "epochs": "ep", "batch_size": "batch", "dropout": "drop",
          "ngrams": "ngr"}


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def options_text(params: dict) -> str:
    """``sparse_lr 2.5 · lr 0.01 · hidden 64 …``"""
    return " · ".join(f"{SHORT.get(k, k)} {_num(v)}" for k, v in params.items())


def _value(v: Any, monitor: str) -> str:
    return "—" if v is None else BY_KEY[monitor].shown(v) if monitor in BY_KEY else format(v, ".4f")


def _clock(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def tune_start_line(e: dict) -> str:
    names = ", ".join(p["name"] for p in e["space"])
    cap = f", at most {counted(e['trials'], 'trial')}" if e.get("trials") else ""
    return (f"tuning {names} by {e['monitor']}: {counted(e['slots'], 'trial')} at a time on the workers, "
            f"{_clock(e['left'])} left{cap}")


def trial_line(e: dict) -> str:
    mon = e["monitor"]
    tag = " (defaults)" if e.get("defaults") else ""
    if e["state"] != "complete":
        what = f"{e['state']}: {e.get('error')}"
    else:
        stop = " · cut at the deadline" if e.get("stopped") else ""
        at = f" at {e['decided_at']}" if e.get("decided_at") else ""
        what = (f"{mon} {_value(e['value'], mon)}{at} (epoch {e['best_epoch']} of {e['epochs_run']}) · "
                f"{e['seconds']:.1f}s on {e['worker']}{stop}")
    best = f"best {_value(e['best_value'], mon)} (trial {e['best_number']})" if e.get("best_number") is not None \
        else "no best yet"
    return f"trial {e['number']}{tag}  {options_text(e['params'])} → {what} · {best} · {_clock(e['left'])} left"


def tuned_line(e: dict) -> str:
    mon, best, d = e["monitor"], e["best"], e.get("defaults")
    vs = ""
    if d is not None and d.get("value") is not None:
        vs = f" vs defaults (trial {d['number']}) {_value(d['value'], mon)}"
    return (f"tuned in {_clock(e['seconds'])}, {counted(e['trials'], 'trial')}: best trial {best['number']} "
            f"{mon} {_value(best['value'], mon)}{vs}; final run {_value(e.get('final'), mon)}{_saved_figure(e)} "
            f"in {e['run']}\n"
            f"best options  {options_text(best['params'])}")


def _saved_figure(e: dict) -> str:
    """`` (at margin 0; the saved model at its thresholds: micro-F1 0.7680)``: where a label set run's
    judged figures decide a label, and what its saved model gives; nothing for other runs."""
    at = e.get("at_thresholds") or {}
    if not e.get("decided_at"):
        return ""
    saved = f"; the saved model at its thresholds: micro-F1 {at['micro_f1']:.4f}" if at.get("micro_f1") is not None \
        else ""
    return f" (at {e['decided_at']}{saved})"


TUNE_MILESTONES = {"tune_start": tune_start_line, "trial": trial_line, "tuned": tuned_line}


def trials_table(trials: list[dict], monitor: str, limit: int = 10) -> Any:
    """A Rich table of the best ``limit`` trials (and the defaults' trial), best first."""
    from rich import box
    from rich.table import Table

    done = sorted((t for t in trials if t.get("score") is not None), key=lambda t: t["score"])
    shown = done[:limit] + [t for t in done[limit:] if t.get("defaults")]
    names = list(trials[0]["params"]) if trials else []
    short = BY_KEY[monitor].short or monitor if monitor in BY_KEY else monitor
    # A table of the best only says so: "(30 of 30 finished)" over 10 rows read as every trial.
    cut = f"; the best {limit}{' and the defaults' if len(shown) > limit else ''} shown, all in tune.json" \
        if len(done) > limit else ""
    table = Table(title=f"trials by {monitor}, best first ({len(done)} of {len(trials)} finished{cut})",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ["trial", "", short, *(COLUMN.get(n, n) for n in names), "s"]:
        table.add_column(col, justify="right", no_wrap=True)
    for t in shown:
        mark = "best" if t.get("best") else ("defaults" if t.get("defaults") else "")
        table.add_row(str(t["number"]), mark, _value(t["value"], monitor), *(_num(t["params"][n]) for n in names),
                      f"{t['seconds']:.0f}")
    return table
