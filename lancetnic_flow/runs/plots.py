"""Plots and tables a person judges a model by, as PNG and CSV files.

Multi-label: loss and micro-F1 curves, per-label precision/recall/F1 (CSV
and bars) instead of a confusion matrix, rows per label.
Classification: loss and accuracy curves (train/val per epoch), a row-
normalised confusion matrix (readable with 50+ classes: annotations only
when there are few), per-class precision/recall/F1 (CSV and a bar chart),
the class distribution. Past 60 classes a chart draws the 30 that matter
most (the most confused, the largest) and says so in its title; the CSV
holds every class. Regression: loss curves, predicted-vs-true scatter
with the identity line, a residual histogram. Headless (Agg backend);
files go to any fsspec URL.
"""
from __future__ import annotations

import csv
import io
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..models.metrics import cells_of, confusion_cells, with_unseen_rows
from ..storage import join, write_bytes
from .folder import folder_options

#: Charts draw every class up to SHOW_ALL (readable at ~35 px each), past it the TOP_CLASSES
#: that matter most: a chart of 3,000 classes is neither readable nor quick. Tables hold every class.
SHOW_ALL, TOP_CLASSES = 60, 30


def preload() -> None:
    """Import matplotlib (a third of a second): a caller may do it early, off its critical path."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot  # noqa: F401


def _figure(width: float, height: float):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height), dpi=110)
    return plt, fig, ax


def _save(plt, fig, url: str, options: dict) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    write_bytes(url, buf.getvalue(), options)
    return url


def curves(history: list[dict], key: str, title: str, url: str, options: dict) -> str | None:
    """``train_<key>`` and ``val_<key>`` per epoch."""
    series = {s: [h.get(f"{s}_{key}") for h in history] for s in ("train", "val")}
    if not any(v is not None for vals in series.values() for v in vals):
        return None
    plt, fig, ax = _figure(6, 4)
    epochs = [h["epoch"] for h in history]
    for name, vals in series.items():
        pts = [(e, v) for e, v in zip(epochs, vals) if v is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=name)
    ax.set_xlabel("epoch")
    ax.set_ylabel(key)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(plt, fig, url, options)


def top_classes(score: np.ndarray, k: int, top: int) -> np.ndarray:
    """The ``top`` classes by ``score`` (highest first, ties by id), or every class up to :data:`SHOW_ALL`."""
    if k <= max(top, SHOW_ALL):
        return np.arange(k)
    return np.lexsort((np.arange(k), -np.asarray(score, np.float64)))[:top]


def _shown(n: int, k: int, by: str, noun: str = "class") -> str:
    """A title's note on which classes a chart shows, when it cannot show them all."""
    return f"top {n} of {k:,} {'classes' if noun == 'class' else noun + 's'} by {by}" if n < k else ""


def confusion_matrix(confusion, labels: list[str], url: str, options: dict, top: int | None = None) -> str:
    """A dense confusion matrix [true, predicted] drawn by :func:`confusion_chart`."""
    return confusion_chart(np.asarray(confusion_cells(confusion), np.int64).reshape(-1, 3), labels, url, options,
                           top)


def confusion_chart(cells: np.ndarray, labels: list[str], url: str, options: dict, top: int | None = None) -> str:
    """Rows normalised over every prediction of the true class. Past
    :data:`SHOW_ALL` classes only the ``top`` most confused are drawn (errors
    as the true class plus as the predicted one): a 3,000 × 3,000 image is
    neither readable nor small."""
    k = len(labels)
    t, p, n = (cells[:, i] for i in range(3))
    off = np.where(t != p, n, 0)
    errors = np.bincount(t, weights=off, minlength=k) + np.bincount(p, weights=off, minlength=k)
    support = np.bincount(t, weights=n, minlength=k)
    keep = top_classes(errors + support / (support.max() + 1), k, top or TOP_CLASSES)
    pos = np.full(k, -1)
    pos[keep] = np.arange(len(keep))
    inside = (pos[t] >= 0) & (pos[p] >= 0)
    c = np.zeros((len(keep), len(keep)))
    np.add.at(c, (pos[t[inside]], pos[p[inside]]), n[inside])
    norm = c / np.maximum(support[keep], 1)[:, None]
    names = [labels[i] for i in keep]
    m = len(keep)
    side = min(4 + 0.28 * m, 24)
    plt, fig, ax = _figure(side + 1, side)
    im = ax.imshow(norm, cmap="Blues", vmin=0, vmax=1)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="share of the true class")
    font = max(4, 10 - m // 8)
    ax.set_xticks(range(m), names, rotation=90, fontsize=font)
    ax.set_yticks(range(m), names, fontsize=font)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    shown = _shown(m, k, "errors")
    ax.set_title("confusion matrix (rows normalised)" + (f"\n{shown}" if shown else ""))
    if m <= 20:
        for i, j in zip(*np.nonzero(c)):
            ax.text(j, i, f"{norm[i, j]:.2f}", ha="center", va="center", fontsize=font,
                    color="white" if norm[i, j] > 0.5 else "black")
    return _save(plt, fig, url, options)


def per_class_table(per_class: dict, labels: list[str], url: str, options: dict,
                    unseen: dict[str, int] | None = None) -> str:
    """Every class, however many: a table costs a line each. Then each label of the rows
    that the run never had (``unseen``: its rows), which the macro averages count as a
    label scoring 0, as scikit-learn's report of the same predictions lists it."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["label", "precision", "recall", "f1", "support"])
    for i, name in enumerate(labels):
        w.writerow([name, f"{per_class['precision'][i]:.4f}", f"{per_class['recall'][i]:.4f}",
                    f"{per_class['f1'][i]:.4f}", per_class["support"][i]])
    for name, rows in (unseen or {}).items():
        w.writerow([name, "0.0000", "0.0000", "0.0000", rows])
    write_bytes(url, buf.getvalue().encode(), options)
    return url


def with_unseen_scores(per_class: dict, labels: list[str], unseen: dict[str, int] | None) -> tuple[dict, list[str]]:
    """The per-class scores with each label of the rows that the run never had after its
    classes (precision, recall, F1 0, its rows as support), as :func:`per_class_table` lists them."""
    names = list(unseen or {})
    if not names:
        return per_class, list(labels)
    zeros = [0.0] * len(names)
    return ({"precision": list(per_class["precision"]) + zeros, "recall": list(per_class["recall"]) + zeros,
             "f1": list(per_class["f1"]) + zeros, "support": list(per_class["support"]) + list(unseen.values())},
            list(labels) + names)


def per_class_chart(per_class: dict, labels: list[str], url: str, options: dict, noun: str = "class") -> str:
    """Precision, recall and F1 bars per class (or per label of a multilabel run), the worst F1 on top;
    past :data:`SHOW_ALL` classes the largest (by support) only."""
    k = len(labels)
    keep = top_classes(per_class["support"], k, TOP_CLASSES)
    order = keep[np.argsort(np.asarray(per_class["f1"])[keep], kind="stable")]
    m = len(order)
    plt, fig, ax = _figure(7, min(2 + 0.25 * m, 30))
    y = np.arange(m)
    for offset, key in ((-0.27, "precision"), (0.0, "recall"), (0.27, "f1")):
        ax.barh(y + offset, np.asarray(per_class[key])[order], height=0.27, label=key)
    ax.set_yticks(y, [labels[i] for i in order], fontsize=max(4, 10 - m // 8))
    ax.invert_yaxis()   # the worst class on top, where the eye starts
    ax.set_xlim(0, 1)
    shown = _shown(m, k, "support", noun)
    ax.set_title(f"per-{noun} precision, recall, F1 (worst F1 first)" + (f"\n{shown}" if shown else ""))
    # Outside the axes: bars reach to the right edge, a legend there hides them.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return _save(plt, fig, url, options)


def class_distribution(labels: list[str], counts: list[int], url: str, options: dict, noun: str = "class") -> str:
    """Training rows per class; past :data:`SHOW_ALL` classes the largest only."""
    k = len(labels)
    keep = top_classes(counts, k, TOP_CLASSES)
    m = len(keep)
    plt, fig, ax = _figure(min(4 + 0.25 * m, 24), 4)
    ax.bar(range(m), np.asarray(counts)[keep])
    ax.set_xticks(range(m), [labels[i] for i in keep], rotation=90, fontsize=max(4, 10 - m // 8))
    ax.set_ylabel("rows")
    shown = _shown(m, k, "rows", noun)
    ax.set_title(f"{noun} distribution (training rows)" + (f"\n{shown}" if shown else ""))
    return _save(plt, fig, url, options)


def regression(true: np.ndarray, pred: np.ndarray, scatter_url: str, residual_url: str,
               options: dict) -> list[str]:
    finite = np.isfinite(true) & np.isfinite(pred)   # a histogram of a nan has no range: draw what has one
    true, pred = true[finite], pred[finite]
    if not len(true):
        return []
    plt, fig, ax = _figure(5.5, 5)
    ax.scatter(true, pred, s=4, alpha=0.35)
    lo, hi = float(min(true.min(), pred.min())), float(max(true.max(), pred.max()))
    ax.plot([lo, hi], [lo, hi], color="black", lw=1, label="identity")
    ax.set_xlabel("true")
    ax.set_ylabel("predicted")
    ax.set_title(f"predicted vs true ({len(true):,} sampled rows)")
    ax.legend()
    out = [_save(plt, fig, scatter_url, options)]
    plt, fig, ax = _figure(6, 4)
    ax.hist(pred - true, bins=60)
    ax.axvline(0, color="black", lw=1)
    ax.set_xlabel("predicted − true")
    ax.set_ylabel("rows")
    ax.set_title("residuals")
    out.append(_save(plt, fig, residual_url, options))
    return out


@dataclass
class PlotJob:
    """One file (or two: the regression pair) of a run's plots, and how to write it.
    Planning decides every file before any is drawn, so a run can name its charts
    while they are still being drawn (:func:`draw_detached`)."""

    files: list[str]
    write: Callable[[], object]
    chart: bool   # a PNG drawn with matplotlib; else a CSV table


def plot_jobs(folder: str, *, history: list[dict] | None = None, metrics: dict | None = None,
              labels: list[str] | None = None, label_counts: list[int] | None = None,
              sample: tuple[np.ndarray, np.ndarray] | None = None, options: dict | None = None) -> list[PlotJob]:
    """Every plot and table that applies to what is given, in order, unwritten.
    ``options`` default to those ``folder`` carries when it is a run folder."""
    o = folder_options(folder, options)
    jobs: list[PlotJob] = []

    def add(name: str, fn: Callable[..., object], *args: Any, chart: bool = True, **kw: Any) -> None:
        url = join(folder, name)
        jobs.append(PlotJob([url], lambda: fn(*args, url, o, **kw), chart))

    def curve(key: str, title: str) -> None:
        if history and any(h.get(f"{s}_{key}") is not None for h in history for s in ("train", "val")):
            add(f"{key}.png", curves, history, key, title)

    m = metrics or {}
    if labels and m.get("per_label"):   # label sets: no confusion matrix has a meaning for them
        curve("loss", "loss per epoch")
        curve("accuracy", "accuracy per epoch")
        curve("micro_f1", "micro-F1 per epoch")
        add("per_label.csv", per_class_table, m["per_label"], labels, chart=False, unseen=m.get("unseen_labels"))
        add("per_label.png", per_class_chart, *with_unseen_scores(m["per_label"], labels, m.get("unseen_labels")),
            noun="label")
        if label_counts:
            add("label_distribution.png", class_distribution, labels, label_counts, noun="label")
        return jobs
    curve("loss", "loss per epoch")
    curve("accuracy", "accuracy per epoch")
    cells = cells_of(m) if labels else None
    if cells is not None:
        add("confusion_matrix.png", confusion_chart, *with_unseen_rows(cells, labels, m))
    if labels and m.get("per_class"):
        add("per_class.csv", per_class_table, m["per_class"], labels, chart=False, unseen=m.get("unseen_labels"))
        add("per_class.png", per_class_chart, *with_unseen_scores(m["per_class"], labels, m.get("unseen_labels")))
    if labels and label_counts:
        add("class_distribution.png", class_distribution, labels, label_counts)
    if sample is not None and len(sample[0]):
        true, pred = (np.asarray(v, np.float64) for v in sample)
        finite = np.isfinite(true) & np.isfinite(pred)   # a histogram of a nan has no range: draw what has one
        if finite.any():
            files = [join(folder, "regression_scatter.png"), join(folder, "residuals.png")]
            jobs.append(PlotJob(files, lambda: regression(true[finite], pred[finite], *files, o), True))
    return jobs


def write_jobs(jobs: list[PlotJob]) -> list[str]:
    """Write the jobs here, in order; returns their files."""
    for job in jobs:
        job.write()
    return [f for job in jobs for f in job.files]


#: The strongest terms' chart (top_terms.png, runs/explain.py) draws the first PLOT_CLASSES
#: classes (most training rows first), PLOT_TERMS terms each; top_terms.csv holds more.
PLOT_CLASSES, PLOT_TERMS = 12, 10


def top_terms_chart(rows: list[dict[str, Any]], url: str, options: dict, classes: int) -> str:
    """One small bar chart per class (the first :data:`PLOT_CLASSES`, :data:`PLOT_TERMS` terms each)."""
    names = list(dict.fromkeys(r["class"] for r in rows))[:PLOT_CLASSES]
    n = len(names)
    ncols = min(n, 3)
    nrows = -(-n // ncols)
    plt, fig, _ = _figure(4.6 * ncols, 0.32 * PLOT_TERMS * nrows + 1.2 * nrows)
    fig.clf()
    for j, name in enumerate(names):
        ax = fig.add_subplot(nrows, ncols, j + 1)
        mine = [r for r in rows if r["class"] == name][:PLOT_TERMS]
        labels = [r["terms"] if len(r["terms"]) <= 32 else r["terms"][:31] + "…" for r in mine]
        ax.barh(range(len(mine)), [r["weight"] for r in mine])
        ax.set_yticks(range(len(mine)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(str(name)[:40], fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    shown = f" (the first {n} of {classes:,}, most training rows first)" if n < classes else ""
    fig.suptitle(f"strongest terms per class{shown}", fontsize=10)
    return _save(plt, fig, url, options)


def write_plots(folder: str, *, history: list[dict] | None = None, metrics: dict | None = None,
                labels: list[str] | None = None, label_counts: list[int] | None = None,
                sample: tuple[np.ndarray, np.ndarray] | None = None, options: dict | None = None,
                charts: bool = True) -> list[str]:
    """Every plot that applies to what is given; returns the files written.
    ``charts=False`` writes the tables (CSV) alone: no matplotlib.
    ``options`` default to those ``folder`` carries when it is a run folder."""
    jobs = plot_jobs(folder, history=history, metrics=metrics, labels=labels, label_counts=label_counts,
                     sample=sample, options=options)
    return write_jobs([j for j in jobs if charts or not j.chart])


# What a detached drawing leaves in the run folder when a chart fails: the run itself is saved.
CHARTS_FAILED = "charts_failed.txt"


def can_detach() -> bool:
    """Whether charts can be drawn by a forked copy of this process (Linux: a
    fork is cheap, shares the trainer's pages and needs nothing re-read)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def draw_detached(folder: str, jobs: list[PlotJob], options: dict | None = None) -> int:
    """Draw the chart jobs in a detached process that outlives this one: the
    command can end as soon as the run is saved, the PNGs following a second
    or two later (matplotlib's import and drawing, on another core). A
    double fork: the intermediate child starts a session of its own (Ctrl-C
    in the shell does not reach the drawer), forks the drawer and exits at
    once, and is reaped here, so a long-lived caller (a workflow runner, a
    notebook) collects no zombie. The drawer leaves the caller's pipes at
    once (stdin, stdout and stderr become /dev/null); a chart that fails
    writes :data:`CHARTS_FAILED` in ``folder``, naming it. Returns the
    drawer's pid (0: none could be started, and the charts were drawn here)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write)
        with os.fdopen(read, "rb") as f:
            drawer = int(f.read() or 0)
        os.waitpid(pid, 0)
        if not drawer:   # no process could be started: draw here, as --wait-for-plots would
            write_jobs(jobs)
        return drawer
    code = 0
    try:   # the children: never return into the caller's code
        os.close(read)
        os.setsid()
        drawer = os.fork()
        if drawer:
            os.write(write, str(drawer).encode())
            os._exit(0)
        os.close(write)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        failed = []
        for job in jobs:
            try:
                job.write()
            except Exception as exc:   # one chart's failure does not cost the others
                failed.append(f"{', '.join(f.rsplit('/', 1)[-1] for f in job.files)}: {type(exc).__name__}: {exc}")
        if failed:
            write_bytes(join(folder, CHARTS_FAILED), ("\n".join(failed) + "\n").encode(),
                        folder_options(folder, options))
            code = 1
    except BaseException:
        code = 1
    finally:
        os._exit(code)
