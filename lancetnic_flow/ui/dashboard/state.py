"""The dashboard's state: pure data, updated by events; no I/O, no Rich.

Times come from the events' ``"t"`` (or an injectable clock), so a recorded
run (a ``--json-log`` file) replays to the same state.
"""
from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable

from ...scores import lower_is_better


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


class RunningMean:
    """An exponentially weighted mean of the batches' losses, corrected for its start (as Adam
    corrects its moments): started at the first value, it read that value at weight 0.95^n, so a
    short epoch showed its first batch's loss (2.12 where the epoch's batches averaged 1.21)."""

    __slots__ = ("decay", "sum", "weight")

    def __init__(self, decay: float):
        self.decay, self.sum, self.weight = decay, 0.0, 0.0

    def add(self, value: float) -> float:
        """Count ``value``; the mean now."""
        self.sum = self.decay * self.sum + (1 - self.decay) * value
        self.weight = self.decay * self.weight + (1 - self.decay)
        return self.sum / self.weight


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
        self._loss_mean = RunningMean(0.95)
        self._rank_loss_mean = RunningMean(0.9)   # --ddp: a report per rank every few batches
        self.loss_history: deque = deque(maxlen=60)
        self._loss_t = -1e9
        self.fitted: dict | None = None
        self.last_epoch: dict | None = None
        self.monitor = "val_loss"              # the score --monitor names (the trainer's stage event says which)
        self.best: dict | None = None          # the best epoch by it
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
            self.monitor = e.get("monitor") or self.monitor
            epoch = e.get("epoch", 0)
            if epoch != self.epoch:   # --ddp announces an epoch again at each segment: the same epoch goes on
                self._new_epoch()
            self.epoch, self.epochs = epoch, e.get("epochs", 0)
            self.epochs_done = max(self.epochs_done, epoch - 1)   # a resumed run starts past its first epochs
            self.total_rows = e.get("total_rows") or 0
            self.source = e.get("source")

    def _new_epoch(self) -> None:
        """An epoch's meters and running loss start afresh: the last epoch's samples would count the
        validation pause between them as time spent on rows (a rate a fraction of the epoch's, for the
        meters' window), and its batches would blend into the new epoch's loss."""
        self.rows_before += self.rows
        self.rows = 0
        self.rows_meter, self.tokens_meter = Meter(5.0, 0.25), Meter(5.0, 0.25)
        self._loss_mean, self._rank_loss_mean = RunningMean(0.95), RunningMean(0.9)

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
        if e["done"] < self.feat_done:   # a new pass: without a cache every epoch featurises afresh
            self.feat_meter = Meter()
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
            self.loss = self._loss_mean.add(loss)
            if t - self._loss_t >= 0.5:
                self.loss_history.append(self.loss)
                self._loss_t = t

    def _on_epoch(self, e: dict, t: float) -> None:
        self.last_epoch = e
        if e.get("train_loss") is not None:   # a finished epoch shows its own figure, as its line and metrics.json
            self.loss = e["train_loss"]
        self.epochs_done = e.get("epoch", self.epochs_done)
        score = lower_is_better(e, self.monitor)
        if score is not None and (self.best is None or score < lower_is_better(self.best, self.monitor)):
            self.best = e

    def _on_start_scored(self, e: dict, t: float) -> None:
        """A continued run's starting weights, scored before its first step: epoch 0 of the best."""
        score = lower_is_better(e, self.monitor)
        if score is not None and (self.best is None or score < lower_is_better(self.best, self.monitor)):
            self.best = e

    def _on_resumed(self, e: dict, t: float) -> None:
        """A resumed run: the epochs its checkpoint had finished count for the last and best epoch."""
        self.monitor = e.get("monitor") or self.monitor
        for record in e.get("history") or []:
            self._on_epoch(record, t)

    def _on_rank(self, e: dict, t: float) -> None:
        """A --ddp rank's progress; the ranks' rows add up to the epoch's."""
        self.ranks[e["rank"]] = e
        epoch = max(r.get("epoch", 0) for r in self.ranks.values())
        if epoch != self.epoch:
            self._new_epoch()
            self.epoch = epoch
        self.epochs = e.get("epochs", self.epochs)
        self.rows = sum(r.get("rows", 0) for r in self.ranks.values() if r.get("epoch") == epoch)
        self.rows_meter.add(t, self.rows_before + self.rows)
        self.tokens += e.get("tokens", 0)   # each report's tokens are the rank's since its last one
        self.tokens_meter.add(t, self.tokens)
        if e.get("loss") is not None:
            self.loss = self._rank_loss_mean.add(e["loss"])

    def _on_early_stop(self, e: dict, t: float) -> None:
        self.early_stop = e

    def _on_memory(self, e: dict, t: float) -> None:
        self.memory = e
        # The monitor asks the scheduler every other sample only: an empty list it did not ask for keeps
        # the rows; the scheduler's own empty answer (every worker gone) clears them, or they lingered.
        if e.get("workers") or e.get("workers_asked"):
            self.workers = e["workers"]

    def _on_done(self, e: dict, t: float) -> None:
        self.done = e
        self.stage = "done"

    # derived
    def rows_rate(self, now: float | None = None) -> float | None:
        return self.rows_meter.rate(self.now() if now is None else now)


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
