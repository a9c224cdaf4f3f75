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


def _package_functions(trees):
    import ast

    found: dict[str, list] = {}
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                found.setdefault(node.name, []).append((rel, node))
    return found


def _assigned(scope, name: str):
    """The values ``scope`` gives ``name``: assigned, added to, or appended to it."""
    import ast

    for a in ast.walk(scope):
        if isinstance(a, (ast.Assign, ast.AugAssign)):
            targets = [a.target] if isinstance(a, ast.AugAssign) else a.targets
            if any(isinstance(t, ast.Name) and t.id == name for tt in targets for t in ast.walk(tt)):
                yield a.value
        elif isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and a.func.attr == "append" \
                and isinstance(a.func.value, ast.Name) and a.func.value.id == name:
            yield from a.args


def _reached(expr, rel, scope, index, seen):
    """Every string a message expression can hold: its literals, the returns of the package's
    functions it calls by name, its variables' and module constants' values."""
    import ast

    functions, constants = index
    for n in ast.walk(expr):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            yield f"{rel}:{n.lineno}", n.value
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            for frel, f in functions.get(n.func.id, []):
                if (frel, f.name) not in seen:
                    seen.add((frel, f.name))
                    for r in ast.walk(f):
                        if isinstance(r, ast.Return) and r.value is not None:
                            yield from _reached(r.value, frel, f, index, seen)
        elif isinstance(n, ast.Name) and (rel, n.id) in constants and (rel, n.id) not in seen:
            seen.add((rel, n.id))
            yield from _reached(constants[(rel, n.id)], rel, scope, index, seen)
        elif isinstance(n, ast.Name) and scope is not None and (id(scope), n.id) not in seen:
            seen.add((id(scope), n.id))
            for value in _assigned(scope, n.id):
                yield from _reached(value, rel, scope, index, seen)


def test_no_warning_a_run_emits_names_a_flag_its_python_or_workflow_caller_never_typed():
    """`--max-len`, `--numeric`, `--early-stopping N`, `--init-from` in a run's warnings reached
    train(cfg), the estimators and workflow runs, which type no flag: a warning names an option as
    ``{section.field}``, which Events says in its caller's words. Scans every
    ``emit("warning", message=...)`` of the package, through the functions, variables and
    constants its message is built from."""
    import ast
    import pathlib
    import re

    import lancetnic_flow

    root = pathlib.Path(lancetnic_flow.__file__).parent
    trees = {str(p.relative_to(root)): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(root.rglob("*.py"))}
    constants = {(rel, t.id): node.value for rel, tree in trees.items() for node in tree.body
                 if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
    index, wrong, emits = (_package_functions(trees), constants), [], 0
    for rel, tree in trees.items():
        for scope in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            for call in ast.walk(scope):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "emit"
                        and call.args and getattr(call.args[0], "value", None) == "warning"):
                    continue
                emits += 1
                for kw in (k for k in call.keywords if k.arg == "message"):
                    wrong += [f"{where}: {flag}" for where, text in _reached(kw.value, rel, scope, index, set())
                              for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)]
    assert emits > 20
    assert not wrong, sorted(set(wrong))
