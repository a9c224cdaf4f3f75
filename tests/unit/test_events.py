"""events.py: every subscriber gets each event with its kind and a time from
the bus' clock (unless the event brings its own), and a listener that fails
is detached without stopping the run or the other listeners."""
from __future__ import annotations

import itertools

from lancetnic_flow.events import Events


def test_subscribers_get_every_event_in_order_with_a_time():
    clock = itertools.count(1.0)
    bus = Events(clock=lambda: next(clock))
    seen, also = [], []
    bus.subscribe(lambda kind, e: seen.append((kind, dict(e))))
    bus.subscribe(lambda kind, e: also.append(kind))
    bus.emit("stage", stage="fitting")
    bus.emit("batch", rows=5, t=9.5)
    assert seen == [("stage", {"stage": "fitting", "t": 1.0}), ("batch", {"rows": 5, "t": 9.5})]
    assert also == ["stage", "batch"]


def test_a_failing_listener_is_detached_and_the_others_keep_receiving(capsys):
    bus = Events(clock=lambda: 0.0)
    calls, seen = [], []

    def broken(kind, e):
        calls.append(kind)
        raise RuntimeError("view crashed")

    bus.subscribe(broken)
    bus.subscribe(lambda kind, e: seen.append(kind))
    bus.emit("a")
    bus.emit("b")
    assert calls == ["a"] and seen == ["a", "b"]
    assert "view crashed" in capsys.readouterr().err


def test_a_run_that_shows_nothing_still_raises_each_warning_it_emits_as_a_run_warning():
    import warnings

    from lancetnic_flow.errors import RunWarning
    from lancetnic_flow.events import warnings_only

    events = warnings_only()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events.emit("epoch", epoch=1)                       # not a warning: nothing
        events.emit("warning", message="12 rows skipped (empty_text)")
    assert [(w.category, str(w.message)) for w in caught] == [(RunWarning, "12 rows skipped (empty_text)")]
    assert issubclass(RunWarning, UserWarning)


def test_a_run_that_shows_nothing_warns_of_the_rows_it_skipped_which_the_command_lines_summary_shows():
    # with progress=False 30 missing labels and 20 nan targets were dropped with no word (docs/python.md promises one)
    import warnings

    from lancetnic_flow.errors import RunWarning
    from lancetnic_flow.events import warnings_only

    events = warnings_only()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events.emit("done", run="r", metrics={"rows": {"read": 60, "skipped": {"missing_label": 30, "empty_text": 5}}})
        events.emit("done", run="r", metrics={"rows": {"read": 60, "skipped": {}}})   # none skipped: no warning
        events.emit("done", run="r", metrics={"rows": {"read": 60, "skipped": {"empty_text": 1}}})
    assert [str(w.message) for w in caught if w.category is RunWarning] == [
        "35 rows skipped (30 missing_label, 5 empty_text; rows.skipped in metrics.json and metrics_)",
        "1 row skipped (1 empty_text; rows.skipped in metrics.json and metrics_)"]


def test_an_events_message_and_hint_name_options_as_its_caller_typed_them():
    """A run's warnings said `--max-len` to a Python caller, who gave `max_len=`, and to a workflow,
    whose file holds `max_len:`: each reader now reads the option in its own words."""
    said = {}
    for words in ("cli", "python", "workflow"):
        events = Events(words=words)
        events.subscribe(lambda kind, e, words=words: said.__setitem__(words, (e["message"], e["hint"])))
        events.emit("warning", message="raise {features.max_len}; label {x.y} and {name}", hint="{training.lr}")
    assert said["cli"] == ("raise --max-len; label {x.y} and {name}", "--lr")
    assert said["python"] == ("raise max_len; label {x.y} and {name}", "lr")
    assert said["workflow"][0].startswith("raise max_len;")
    assert Events().words == "python"


def test_no_warning_a_run_emits_names_a_flag_its_python_or_workflow_caller_never_typed():
    """`--max-len`, `--numeric`, `--early-stopping N`, `--init-from` in a run's warnings reached
    train(cfg), the estimators and workflow runs, which type no flag: a warning names an option as
    ``{section.field}``, which Events says in its caller's words. Scans every
    ``emit("warning", message=...)`` of the package, through the functions, variables and
    constants its message is built from."""
    import ast
    import re

    from .source_scan import package_index, reached

    trees, index = package_index()
    wrong, emits = [], 0
    for rel, tree in trees.items():
        for scope in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            for call in ast.walk(scope):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "emit"
                        and call.args and getattr(call.args[0], "value", None) == "warning"):
                    continue
                emits += 1
                for kw in (k for k in call.keywords if k.arg == "message"):
                    wrong += [f"{where}: {flag}" for where, text in reached(kw.value, rel, scope, index)
                              for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)]
    assert emits > 20
    assert not wrong, sorted(set(wrong))


def test_a_warning_names_a_local_file_as_the_path_typed_not_its_file_url(tmp_path, monkeypatch):
    # "skipped 3 malformed rows in file:///.../data/x.csv" where the user typed data/x.csv
    monkeypatch.chdir(tmp_path)
    got = []
    events = Events(words="cli")
    events.subscribe(lambda kind, e: got.append((e["message"], e["hint"])))
    events.emit("warning", message=f"rows skipped in file://{tmp_path}/data/x.csv", hint="see s3://b/y.csv")
    assert got == [("rows skipped in data/x.csv", "see s3://b/y.csv")]
