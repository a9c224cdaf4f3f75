"""``tune``: a time-bounded hyperparameter search, in the spirit of fastText's
autotune, then the final run trained with the best options.

    plan → cluster → fit (once per n-gram setting) → trials on the workers → train(best) → tune.json

The corpus is featurised once into the shard cache (one entry per n-gram
setting searched); every trial then reads the complete entry on a Dask
worker (:func:`.trial.run_trial`), at most one trial per worker thread, and
returns its validation metric. Optuna's TPE sampler (seeded by ``--seed``)
asks for options and is told their scores. Trial 0 trains the defaults, so
the result says what the search bought. No trial is asked for once the
budget would be spent; a running one stops at the deadline with its best
epoch so far. The final run is an ordinary :func:`.orchestrator.train` from
the same cache (no second featurisation); ``tune.json`` goes in its folder.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import psutil
import torch

from ..allocator import trim_allocator
from ..config import TrainConfig, argument_error, parse_duration, with_set_fields
from ..dataflow.cluster import memory_lines, workers_info
from ..dataflow.manifest import read_features
from ..dataflow.plan import DEFAULT_LINES, TRAINER_BASE
from ..errors import UserError
from ..options import bad
from ..events import Events, warnings_only
from ..models import registration
from ..models.tasks import Task
from ..reconnect import share
from ..resolve import idle_epoch_options, refuse_sizes_for_client
from ..runs.folder import write_json
from ..scores import BY_KEY
from ..sizes import format_size
from ..storage import join
from . import search
from .orchestrator import ROW_BYTES_ESTIMATE, Training, estimate_model_bytes, make_task, train
from .step import decided_at
from .trial import run_trial

GRACE_S = 60.0   # past the deadline, a trial that has not answered (a hung worker) is abandoned


@dataclass
class TuneResult:
    run: str            # the final run's folder
    metrics: dict       # its metrics.json
    trials: list        # every trial, as tune.json lists them
    best: dict          # the best trial
    defaults: dict | None   # trial 0: the defaults' options
    seconds: float      # the search's time (fit passes and trials), without the final run


def require_optuna() -> Any:
    """Optuna, or a UserError naming the extra that installs it."""
    try:
        import optuna
    except ImportError:
        raise UserError("tune needs Optuna, which is not installed",
                        "pip install 'lancetnic_flow[tune]' (or pip install optuna)") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def budget_seconds(time_budget: str | float | int) -> float:
    """``"10m"``, ``"90s"``, ``"1h"``, or seconds as a number → seconds (> 0)."""
    if isinstance(time_budget, (int, float)) and not isinstance(time_budget, bool):
        if time_budget <= 0:
            raise argument_error("time_budget", f"must be > 0, got {time_budget!r}", "{name} 10m",
                                 "{name}='10m' (or seconds: 600)")
        return float(time_budget)
    return parse_duration(time_budget, "time_budget")


@dataclass
class Entry:
    """One featurised cache entry (an n-gram setting): what a trial reads."""

    spec: Any           # FeedSpec
    remote: Any         # the same, scattered once (each worker fetches it once)
    featurised: bool    # this search fitted it (False: it was in the cache already)


def prepare_entry(cfg: TrainConfig, base: Training, events: Events) -> tuple[Training, Entry]:
    """Fit (and, for a fitted vocabulary, featurise) ``cfg``'s cache entry on
    ``base``'s cluster, so the entry is complete before any trial reads it."""
    run = base
    if cfg is not base.cfg:
        run = Training(cfg, events, None)
        run.events = entry_events(events, run, plan=False)
        run.plan(external=base.external)
        with run.cluster(base.client):   # the same client: nothing starts or closes
            pass
    cached = read_features(run.entry, run.cache_so) is not None
    run.fit()
    if not run.feed.complete:
        events.emit("stage", stage="featurising")
        for _ in run.feed.featurize():
            pass
    spec = run.feed.spec
    return run, Entry(spec, share(base.client, spec), not cached)


def entry_events(events: Events, run: Any, plan: bool = True) -> Events:
    """``events`` for ``run``, the fit of one cache entry: its fit's start and its features line
    name its n-gram setting (one entry per setting searched, whose lines read alike otherwise),
    as ``run`` has it then (``--analyzer auto`` decides it on the cluster); without ``plan``,
    less the memory plan's lines, which the first entry already showed."""
    out = Events(events.clock, events.words)

    def relay(kind: str, e: dict) -> None:
        if kind == "plan" and not plan:
            return
        if kind == "fitted" or (kind == "stage" and e.get("stage") == "fitting"):
            e = {**e, "ngrams": run.cfg.features.ngrams}
        events.emit(kind, **e)

    out.subscribe(relay)
    return out


def final_events(events: Events) -> Events:
    """``events`` for the final run, which trains on a cache entry and a cluster the search's
    lines already announced: its read of the entry is marked ``announced`` (no second features
    line), and its plan does not repeat the dashboard's address."""
    out = Events(events.clock, events.words)

    def relay(kind: str, e: dict) -> None:
        if kind == "fitted" and e.get("cached"):
            e = {**e, "announced": True}
        elif kind == "plan":
            e = {k: v for k, v in e.items() if k != "dashboard"}
        events.emit(kind, **e)

    out.subscribe(relay)
    return out


def worker_slots(client: Any) -> tuple[list[str], int | None]:
    """A worker address per worker thread (one trial each at a time), and the
    bytes a trial may take in the smallest worker (None: no limit)."""
    slots, room = [], []
    lines = memory_lines(client)
    for addr, w in sorted(workers_info(client).items()):
        n = max(1, int(w.get("nthreads") or 1))
        slots += [addr] * n
        limit = w.get("memory_limit") or 0
        if limit:
            # Below Dask's pause threshold, torch and the worker's own Python included.
            room.append(int((limit * lines.get(addr, DEFAULT_LINES).stops()[1] - TRAINER_BASE) / n))
    if not slots:
        raise UserError("the Dask cluster has no workers to run trials on", "start some, then retry")
    return slots, (min(room) if room else None)


def trial_bytes(cfg: TrainConfig, dim: int, classes: int) -> int:
    """What a trial holds in its worker: the model, its moments, the best copy, a shuffle buffer."""
    return estimate_model_bytes(cfg, dim, classes) + cfg.training.shuffle_buffer * ROW_BYTES_ESTIMATE


class Search:
    """The trials: asked from the sampler, run on the workers' threads, told back."""

    def __init__(self, client: Any, cfg: TrainConfig, space: list, entries: dict, slots: list[str],
                 room: int | None, classes: int, *, events: Events, deadline: float, max_trials: int | None,
                 study: Any):
        self.client, self.cfg, self.space, self.entries, self.slots, self.room = client, cfg, space, entries, slots, room
        self.classes, self.events, self.deadline, self.max_trials = classes, events, deadline, max_trials
        self.study = study
        self.records: list[dict] = []
        self.running: dict = {}   # future → (optuna trial, record, slot)
        self.asked = 0

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def may_ask(self) -> bool:
        """Another trial, if the cap allows and the time left holds at least the quickest one so far."""
        if self.max_trials is not None and self.asked >= self.max_trials:
            return False
        done = [r["seconds"] for r in self.records if r["state"] == "complete"]
        return self.left() > max(2.0, min(done) if done else 0.0) or self.asked == 0

    def run(self) -> list[dict]:
        free = list(self.slots)
        try:
            while True:
                while free and self.may_ask():
                    slot = free.pop(0)
                    if not self.submit(slot):
                        free.insert(0, slot)
                if not self.running:
                    return self.records
                for fut in self.wait():
                    free.append(self.finish(fut))
        finally:
            for fut in self.running:
                fut.cancel()

    def submit(self, slot: str) -> bool:
        """Ask the sampler for a trial and send it to ``slot``'s worker; False if it cannot run there."""
        trial = self.study.ask()
        self.asked += 1
        params = search.suggest(trial, self.space)
        rec = {"number": trial.number, "params": params, "defaults": trial.number == 0, "state": "running"}
        cfg = search.apply(self.cfg, params)
        entry = self.entries[cfg.features.ngrams]
        need = trial_bytes(cfg, entry.spec.features.dim, self.classes)
        if self.room is not None and need > self.room:
            rec.update(state="skipped", error=f"needs ~{need / 2**20:.0f} MiB, a worker thread has "
                                              f"{self.room / 2**20:.0f} MiB", seconds=0.0)
            self._close(trial, rec, None)
            return False
        if entry.remote.status != "finished":   # every worker holding it died: share it again
            entry.remote = share(self.client, entry.spec)
        fut = self.client.submit(run_trial, entry.remote, cfg, max(1.0, self.left()),
                                 model_entry=registration(cfg.model.name), workers=[slot],
                                 allow_other_workers=True, pure=False,
                                 key=f"lancetnic-tune-trial-{trial.number}-{os.urandom(4).hex()}")
        self.running[fut] = (trial, rec, slot)
        return True

    def wait(self) -> list:
        """The trials that finished (a second's wait); past the deadline and its grace, the rest are abandoned."""
        from distributed import wait

        with contextlib.suppress(TimeoutError):
            wait(list(self.running), timeout=1.0, return_when="FIRST_COMPLETED")
        done = [f for f in self.running if f.done()]
        if not done and self.left() < -GRACE_S:
            for fut, (trial, rec, slot) in list(self.running.items()):
                fut.cancel()
                rec.update(state="failed", error="no answer from its worker after the deadline", seconds=None)
                self._close(trial, rec, None)
                del self.running[fut]
        return done

    def finish(self, fut: Any) -> str:
        """A trial's answer, told to the sampler and reported; returns its slot."""
        trial, rec, slot = self.running.pop(fut)
        try:
            rec.update(fut.result())
        except Exception as exc:   # a trial's failure (a worker lost, a bad option) is the trial's, not the search's
            rec.update(state="failed", error=f"{type(exc).__name__}: {exc}", seconds=None)
            self._close(trial, rec, None)
            return slot
        rec["state"] = "complete" if rec["score"] is not None else "failed"
        if rec["score"] is None:
            rec["error"] = "stopped by the deadline before its first epoch ended"
        self._close(trial, rec, rec["score"])
        return slot

    def _close(self, trial: Any, rec: dict, score: float | None) -> None:
        from optuna.trial import TrialState

        if score is None:
            self.study.tell(trial, state=TrialState.FAIL)
        else:
            self.study.tell(trial, score)
        self.records.append(rec)
        best = best_of(self.records)
        t = self.cfg.training   # label sets: each trial's figure decides at margin 0 (or 0.5), as the epochs'
        self.events.emit("trial", **{k: v for k, v in rec.items() if k != "curve"}, monitor=t.monitor,
                         best_number=best["number"] if best else None, best_value=best["value"] if best else None,
                         left=max(0.0, self.left()), running=len(self.running),
                         decided_at=decided_at(Task(kind=t.task, class_loss=t.class_loss)))


def no_trial_finished(records: list[dict], budget: float) -> UserError:
    """Why no trial has a score: the failure of one (a worker lost, an option the data refuses), or the
    time (every trial stopped by the deadline before its first epoch ended)."""
    # A trial the deadline stopped has its seconds; one that failed or was skipped has none, or 0.
    failed = next((r for r in records if r["state"] == "skipped" or r["state"] == "failed"
                   and r.get("seconds") is None), None)
    if failed is not None:
        return UserError(f"no trial finished: trial {failed['number']} {failed['state']}: {failed.get('error')}",
                         "see each trial's error in tune.json's trials or the trial lines; a larger budget "
                         "would not help")
    said, kept = f"no trial finished an epoch within the time budget ({budget:.0f} s)", \
        " (the featurised cache is kept, so a rerun starts with the trials)"
    return UserError(said, "raise time_budget" + kept, cli=(said, "raise --time-budget" + kept))


def best_of(records: list[dict]) -> dict | None:
    """The finished trial with the lowest score (the monitored metric, turned so lower is better)."""
    done = [r for r in records if r.get("score") is not None]
    return min(done, key=lambda r: (r["score"], r["number"])) if done else None


def new_study(optuna: Any, seed: int, slots: int) -> Any:
    """A TPE study; with parallel trials, the running ones count as their worst
    (constant liar), so parallel asks spread out."""
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(10, 4 + slots), constant_liar=True)
    return optuna.create_study(direction="minimize", sampler=sampler)


def _search(base: Training, events: Events, deadline: float, max_trials: int | None, optuna: Any
            ) -> tuple[list, list, dict]:
    """Entries fitted, the space, the trials run: (space, records, entries)."""
    client = base.client
    _, first = prepare_entry(base.cfg, base, events)
    base.decide()   # the choices that need the counts, as train takes them: the trials train what it would
    cfg = base.cfg
    # The task's checks against the data (--class-loss bce with 4 classes), here once as train makes them,
    # rather than in every trial until the budget is spent.
    make_task(cfg, base.features, torch.device("cpu"))
    slots, room = worker_slots(client)
    features = base.features
    classes = len(features.labels) if cfg.training.task != "regress" else 0

    def fits(hidden: int) -> bool:
        # in a worker for the trials, and in the trainer's share for the final run that may train it
        c = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, hidden=hidden))
        return (room is None or trial_bytes(c, features.dim, classes) <= room) \
            and base.holds_model(c, classes)

    space = search.search_space(cfg, fits)
    entries = {cfg.features.ngrams: first}
    for p in space:
        for n in (p.choices if p.name == "ngrams" else ()):
            if n not in entries:
                entries[n] = prepare_entry(search.apply(cfg, {"ngrams": n}), base, events)[1]
    study = new_study(optuna, cfg.training.seed, len(slots))
    study.enqueue_trial(search.initial(cfg, space))
    events.emit("stage", stage="tuning")
    events.emit("tune_start", space=[p.to_dict() for p in space], slots=len(slots), left=deadline - time.monotonic(),
                monitor=cfg.training.monitor, trials=max_trials)
    run = Search(client, cfg, space, entries, slots, room, classes, events=events, deadline=deadline,
                 max_trials=max_trials, study=study)
    return space, run.run(), entries


def tune(cfg: TrainConfig, time_budget: str | float = "10m", trials: int | None = None, events: Events | None = None,
         client: Any = None) -> TuneResult:
    """Search ``cfg``'s model's options for ``time_budget`` (``"10m"``, or
    seconds), at most ``trials`` trials, on the Dask workers; then train the
    final run with the best options. Returns the run and every trial; the
    run folder holds ``tune.json``. ``events``: listeners of the search and
    the run; without them nothing is shown but the warnings, as
    :class:`~lancetnic_flow.errors.RunWarning`.

    ``client``: an existing ``distributed.Client`` (else a LocalCluster is
    started, or ``cfg.cluster.scheduler`` is used)."""
    events = events if events is not None else warnings_only()
    cfg = with_set_fields(cfg)   # a TrainConfig built in Python: the fields it sets are its given ones
    if cfg.training.init_from:   # the command line's tune has no --init-from; the API's must not search for nothing
        raise bad("training.init_from", "tune trains every trial from fresh weights and varies the n-grams and "
                  "hidden size a run continued with {name} keeps from its run",
                  "tune on the data without {name}, or continue the run by training with {name} (train(cfg), not tune)")
    if cfg.output.no_cache:   # every trial reads every epoch's shards on a worker
        raise bad("output.cache", "{name} none: tune's trials read the featurised shards from the cache, each "
                  "trial every epoch", "give {name} a URL, or leave it out (OUT/.cache)")
    if not cfg.data.val and not cfg.data.val_fraction:   # each trial is scored on the held-out rows
        raise bad("data.val_fraction", "tune scores each trial on validation rows, and {name} 0 without "
                  "{data.val} holds none out", "give {data.val} FILE, or a {name} above 0 (the default is 0.1)")
    optuna = require_optuna()
    budget = budget_seconds(time_budget)
    if trials is not None and trials < 1:
        raise argument_error("trials", f"must be ≥ 1, got {trials}", "{name} 20, or drop it to search until the "
                             "time budget is spent", "{name}=20, or drop it to search until the time budget is spent")
    t0 = time.monotonic()
    if cfg.cluster.train_on == "auto":
        # The trials train on the workers their own way; the final run trains here, as before (docs/cluster.md).
        cfg = dataclasses.replace(cfg, cluster=dataclasses.replace(cfg.cluster, train_on="client"))
    if client is not None:
        refuse_sizes_for_client(cfg)
    base = Training(cfg, events, None)   # resolves cfg; its decide() after the fit gives what the trials train
    if "training.epochs" in base.given.given:   # typed, it caps every trial's epochs (the monitor is the objective)
        for idle in idle_epoch_options(base.given, base.cfg, monitor=False):
            events.emit("warning", message=idle)
    base.events = entry_events(events, base)   # its fit is the first entry's
    base.needs_cluster = "tune's trials run on Dask workers"
    base.plan(external=client is not None)
    with ThreadPoolExecutor(1, thread_name_prefix="lancetnic-close") as closer, base.cluster(client, closer) as c:
        space, records, entries = _search(base, events, t0 + budget, trials, optuna)
        seconds = time.monotonic() - t0
        best = best_of(records)
        if best is None:
            raise no_trial_finished(records, budget)
        for r in records:
            r["best"] = r is best
        cfg = base.cfg   # decided: the final run trains the best trial's options exactly
        cache = cache_entries(entries)   # tune.json's record of them: all the search keeps of its entries
        rss, held = release_search(base, entries)
        events.emit("decided", what="final_plan", rss=rss, held=held, message=held_text(rss, held))
        # The search's own LocalCluster was planned from --memory-budget: so is the final run.
        result = train(search.apply(cfg, best["params"]), final_events(events), client=c, held_bytes=held,
                       own_cluster=not base.external, searched=True)
    defaults = next((r for r in records if r["defaults"]), None)
    doc = tune_document(cfg, budget, seconds, space, records, best, defaults, cache, result.metrics)
    write_json(join(result.run, "tune.json"), doc, base.out_so)
    events.emit("tuned", run=str(result.run), monitor=cfg.training.monitor, best=best, defaults=defaults,
                final=result.metrics.get(cfg.training.monitor), trials=len(records), seconds=seconds,
                final_seconds=result.metrics.get("seconds"),
                # label sets: where the figures judged decide a label, and the saved model's at its thresholds
                decided_at=result.metrics.get("val_decided_at"), at_thresholds=result.metrics.get("val_at_thresholds"))
    return TuneResult(result.run, result.metrics, records, best, defaults, seconds)


def cache_entries(entries: dict) -> dict:
    """``tune.json``'s ``cache_entries``: per n-gram setting, its cache key and whether this search featurised it."""
    return {str(n): {"key": e.spec.key, "featurised": e.featurised} for n, e in entries.items()}


def release_search(base: Training, entries: dict) -> tuple[int, int]:
    """Drop what the search holds that its final run does not need: the first entry's fitted
    features, feed and sample (the final run reads its entry again), and the entries (each
    one's fitted features, and its copy scattered to the workers); then hand the freed heap
    back. Returns this process's RSS and what of it is past a trainer's planned base, which
    the final run's plan then counts."""
    base.release_data()
    for entry in entries.values():
        entry.remote = None   # the workers drop their copy of the entry's spec
    entries.clear()
    gc.collect()   # the search's futures and trials sit in reference cycles
    trim_allocator()
    rss = psutil.Process().memory_info().rss
    return rss, max(0, rss - TRAINER_BASE)


def held_text(rss: int, held: int) -> str:
    """The line that says what the search left in this process for the final run's plan."""
    if not held:
        return f"the search left this process at {format_size(rss)} RSS, within a trainer's planned base"
    return (f"the search left this process at {format_size(rss)} RSS, {format_size(held)} past a trainer's "
            "planned base: the final run's plan counts it in the trainer's share")


def tune_document(cfg: TrainConfig, budget: float, seconds: float, space: list, records: list, best: dict,
                  defaults: dict | None, cache: dict, final: dict) -> dict:
    """``tune.json``: the search (budget, space, every trial with the best marked) and the final run's metric."""
    mon = cfg.training.monitor
    done = [r["seconds"] for r in records if r["state"] == "complete"]
    return {"monitor": mon, "higher_is_better": BY_KEY[mon].higher_is_better, "time_budget_s": budget,
            "search_seconds": seconds, "trainer_pid": os.getpid(), "sampler": "optuna TPE (constant liar)",
            "seed": cfg.training.seed, "space": [p.to_dict() for p in space],
            "cache_entries": cache,
            "trials": sorted(records, key=lambda r: r["number"]), "best": best["number"], "best_params": best["params"], "best_value": best["value"],
            "defaults_value": defaults.get("value") if defaults else None,
            "median_trial_seconds": statistics.median(done) if done else None,
            "final": {"value": final.get(mon), "seconds": final.get("seconds"), "best_epoch": final.get("best_epoch")}}
