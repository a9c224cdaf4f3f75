"""Console output of a run: a view over events, never a driver of them.

On a terminal it shows Rich progress bars; elsewhere it prints a plain line
per stage and epoch. ``quiet`` prints only the final result.
"""
from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from .sizes import format_size


class ConsoleReport:
    def __init__(self, console: Console | None = None, quiet: bool = False):
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self.progress: Progress | None = None
        self.task = None
        self.live = self.console.is_terminal and not quiet

    def __call__(self, kind: str, e: dict[str, Any]) -> None:
        handler = getattr(self, f"on_{kind}", None)
        if handler and not (self.quiet and kind != "done"):
            handler(e)

    def _bar(self, description: str, total: float | None) -> None:
        self._close_bar()
        if not self.live:
            return
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                                 console=self.console, transient=False)
        self.progress.start()
        self.task = self.progress.add_task(description, total=total, info="")

    def _close_bar(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def on_plan(self, e: dict) -> None:
        self.console.print(e["text"], highlight=False, soft_wrap=True)
        if e.get("dashboard"):
            self.console.print(f"dask dashboard  {e['dashboard']}")

    def on_early_stop(self, e: dict) -> None:
        self.console.print(f"early stop after epoch {e['epoch']}: {e['monitor']} last improved in epoch "
                           f"{e['best_epoch']} (its weights are kept)")

    def on_warning(self, e: dict) -> None:
        self.console.print(f"[yellow]warning:[/] {e['message']}", soft_wrap=True)

    def on_stage(self, e: dict) -> None:
        stage = e["stage"]
        if stage == "fitting":
            self._bar("fitting partitions", e.get("total"))
        elif stage == "training":
            self._bar(f"epoch {e['epoch']}/{e['epochs']} rows", e.get("total_rows"))
            if not self.live:
                self.console.print(f"training epoch {e['epoch']}/{e['epochs']}")
        elif stage in ("evaluating", "saving"):
            self._close_bar()

    def on_progress(self, e: dict) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=e["done"], total=e["total"])

    def on_fitted(self, e: dict) -> None:
        self._close_bar()
        src = "from cache" if e.get("cached") else f"in {e.get('seconds', 0):.1f}s"
        self.console.print(f"features  {e['vocabulary']:,} inputs · {e['labels']} classes · "
                           f"{e['docs']:,} training rows ({src})")

    def on_batch(self, e: dict) -> None:
        if self.progress is not None:
            total = e.get("total_rows")
            self.progress.update(self.task, completed=e["rows"], total=max(total or 0, e["rows"]) or None,
                                 info=f"loss {e['loss']:.4f}")

    def on_epoch(self, e: dict) -> None:
        self._close_bar()
        val = f" · val loss {e['val_loss']:.4f}" if e.get("val_loss") is not None else ""
        if e.get("val_accuracy") is not None:
            val += f" · acc {e['val_accuracy']:.4f} · macro-F1 {e['val_macro_f1']:.4f}"
        if e.get("val_rmse") is not None:
            val += f" · MAE {e['val_mae']:.4g} · RMSE {e['val_rmse']:.4g} · R² {e['val_r2']:.4f}"
        rate = f" · {e['rows_per_s']:,.0f} rows/s" if e.get("rows_per_s") else ""
        self.console.print(f"epoch {e['epoch']}  train loss {e['train_loss']:.4f}{val}{rate}", soft_wrap=True)

    def on_done(self, e: dict) -> None:
        self._close_bar()
        m = e["metrics"]
        t = Table(title="result", show_header=False, box=None, padding=(0, 2))
        for k in ("val_accuracy", "val_macro_f1", "val_mae", "val_rmse", "val_baseline_rmse", "val_r2", "val_loss"):
            if m.get(k) is not None:
                t.add_row(k, f"{m[k]:.4f}")
        rows = m["rows"]
        skipped = ", ".join(f"{k} {v:,}" for k, v in sorted(rows["skipped"].items())) or "none"
        t.add_row("rows", f"read {rows['read']:,} · trained {rows['trained']:,} · validated {rows['validated']:,}"
                          f" · skipped {sum(rows['skipped'].values()):,} ({skipped})")
        mem = m["memory"]
        t.add_row("peak memory", f"trainer {format_size(mem['trainer_peak_rss_bytes'])} · workers "
                                 f"{format_size(mem['workers_peak_bytes'])}"
                                 + (f" · budget {format_size(mem['budget_bytes'])}" if mem['budget_bytes'] else ""))
        t.add_row("time", f"{m['seconds']:.1f}s")
        t.add_row("run", e["run"])
        t.add_row("predict", f"lancetnic-flow predict {e['run']} --text \"...\"")
        self.console.print(t)
