"""training/tune.py: a search that could score no trial is refused before any work; each of its
lines is printed once; the final run is planned with what the search leaves in this process."""
from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest

from lancetnic_flow.config import DataConfig, TrainConfig
from lancetnic_flow.errors import UserError
from lancetnic_flow.training.tune import tune


def test_tune_without_validation_rows_is_refused_up_front_not_blamed_on_the_time_budget():
    # every trial "failed: stopped by the deadline", then "raise --time-budget": none could be scored
    cfg = TrainConfig(data=DataConfig(train=["x.csv"], val_fraction=0.0))
    with pytest.raises(UserError, match="tune scores each trial on validation rows") as e:
        tune(cfg, time_budget=1, trials=1)
    assert e.value.cli[0].startswith("tune scores") and "--val FILE" in e.value.cli[1]


def test_tune_of_a_continued_run_is_refused_up_front_not_after_a_search_from_fresh_weights():
    """tune(cfg) with init_from ran the whole search, every trial from fresh weights, then refused the
    final run's n-grams as a contradiction of the run's (or would train it on the run's weights)."""
    from lancetnic_flow.config import TrainingConfig

    cfg = TrainConfig(data=DataConfig(train=["x.csv"]), training=TrainingConfig(init_from="runs/jan"))
    with pytest.raises(UserError, match="tune trains every trial from fresh weights") as e:
        tune(cfg, time_budget=1, trials=1)
    # only Python and workflows reach it (the command line's tune has no --init-from): no flag in their words
    assert "init_from" in e.value.message and "--" not in e.value.message + e.value.hint
    assert "continue the run by training with init_from" in e.value.hint


def test_a_search_whose_trials_all_failed_names_the_failure_not_the_time_budget():
    from lancetnic_flow.training.tune import no_trial_finished

    failed = {"number": 0, "state": "failed", "error": "RuntimeError: worker lost", "seconds": None}
    stopped = {"number": 1, "state": "failed", "error": "stopped by the deadline before its first epoch ended",
               "seconds": 3.0}
    e = no_trial_finished([stopped, failed], 20.0)
    assert "trial 0 failed: RuntimeError: worker lost" in e.message and "--time-budget" not in e.hint
    skipped = {"number": 0, "state": "skipped", "error": "needs ~900 MiB, a worker thread has 300 MiB", "seconds": 0.0}
    assert "trial 0 skipped: needs ~900 MiB" in no_trial_finished([skipped], 20.0).message
    late = no_trial_finished([stopped], 20.0)
    assert "raise time_budget" in late.hint and "raise --time-budget" in late.cli[1]   # each caller's words


def _tune_lines(json_log: io.StringIO | None = None) -> list[str]:
    """The console lines (and, given a stream, the JSON log) of the events tune's stages emit
    through the wrappers it gives them: the first entry's fit, a second n-gram setting's, the
    final run's plan and its read of the cache entry."""
    from rich.console import Console

    from lancetnic_flow.events import Events
    from lancetnic_flow.training.tune import entry_events, final_events
    from lancetnic_flow.ui.jsonlog import JsonLog
    from lancetnic_flow.ui.report import PlainLog

    out = io.StringIO()
    events = Events()
    events.subscribe(PlainLog(Console(file=out, force_terminal=False, width=300)))
    if json_log is not None:
        events.subscribe(JsonLog(json_log))
    fitted = {"vocabulary": 524_288, "labels": 4, "docs": 5_397}
    plan = {"plan": {}, "text": "memory plan  budget 16.0 GiB", "dashboard": "http://127.0.0.1:8787/status"}
    def run(n: int) -> SimpleNamespace:
        return SimpleNamespace(cfg=SimpleNamespace(features=SimpleNamespace(ngrams=n)))

    for ev, n in ((entry_events(events, run(2)), 2), (entry_events(events, run(1), plan=False), 1)):
        ev.emit("plan", **plan)
        ev.emit("stage", stage="fitting", total=2)
        ev.emit("fitted", seconds=1.0 * n, **fitted)
    final = final_events(events)
    final.emit("plan", **{**plan, "text": "memory plan  trainer 0.9 GiB"})
    final.emit("fitted", cached=True, **fitted)
    return out.getvalue().splitlines()


def test_tune_prints_each_line_once_each_entrys_features_naming_its_ngram_setting():
    """Each n-gram setting's fit printed `features  524,288 inputs · …` alike, and the final run a
    third copy `(from cache)` with the dashboard's address again."""
    lines = _tune_lines()
    assert len(lines) == len(set(lines)), lines
    assert [x for x in lines if x.startswith("features")] == [
        "features  ngrams 2 · 524,288 inputs · 4 classes · 5,397 training rows (in 2.0s)",
        "features  ngrams 1 · 524,288 inputs · 4 classes · 5,397 training rows (in 1.0s)"]
    assert [x for x in lines if x.startswith("fitting")] == ["fitting features over 2 partitions (ngrams 2)",
                                                           "fitting features over 2 partitions (ngrams 1)"]
    assert [x for x in lines if x.startswith("memory plan")] == ["memory plan  budget 16.0 GiB",
                                                               "memory plan  trainer 0.9 GiB"]
    assert sum(x.startswith("dask dashboard") for x in lines) == 1


def test_tunes_json_log_tells_each_entrys_fit_apart_and_marks_the_final_runs_read_as_announced():
    log = io.StringIO()
    _tune_lines(log)
    events = [json.loads(x) for x in log.getvalue().splitlines()]
    fitted = [e for e in events if e["event"] == "fitted"]
    assert [(e.get("ngrams"), e.get("cached", False), e.get("announced", False)) for e in fitted] == [
        (2, False, False), (1, False, False), (None, True, True)]
    assert [bool(e.get("dashboard")) for e in events if e["event"] == "plan"] == [True, False]


def test_before_the_final_run_the_search_drops_its_data_and_says_what_the_process_still_holds():
    """The search's first entry (fitted features, feed, sample) stayed referenced by the cluster's
    context through the final run, and every entry's spec on the workers; the final run was then
    planned as if this process held nothing but a trainer's base."""
    import psutil

    from lancetnic_flow.dataflow.plan import TRAINER_BASE
    from lancetnic_flow.training.orchestrator import Training
    from lancetnic_flow.training.tune import Entry, release_search

    class Base:
        release_data = Training.release_data

    base = Base()
    base.features, base.feed, base.sample, base.cfg = object(), object(), object(), "kept"
    entry = Entry(spec="spec", remote=object(), featurised=True)
    entries = {2: entry}
    rss, held = release_search(base, entries)
    assert base.features is None and base.feed is None and base.sample is None and base.cfg == "kept"
    assert entries == {} and entry.remote is None   # each entry's features went, and its copy on the workers
    assert abs(rss - psutil.Process().memory_info().rss) < 64 * 2**20
    assert held == max(0, rss - TRAINER_BASE)


def test_tunes_refused_budget_and_trials_are_said_in_pythons_words_to_python_and_as_flags_to_the_command_line():
    """tune(cfg, time_budget="0s") was told `e.g. --time-budget 10m`, `--trials 20`: flags a Python caller never types."""
    from lancetnic_flow.cli.main import cli_words
    from lancetnic_flow.config import parse_duration
    from lancetnic_flow.errors import UserError
    from lancetnic_flow.training.tune import budget_seconds

    for call in (lambda: parse_duration("0s", "time_budget"), lambda: budget_seconds(0)):
        with pytest.raises(UserError) as e:
            call()
        assert e.value.hint.startswith("e.g. time_budget='10m'") and "--" not in str(e.value)
        said, hint = cli_words(e.value, "tune")
        assert said.startswith("--time-budget: ") and hint.startswith("e.g. --time-budget 10m")
