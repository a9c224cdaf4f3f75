"""errors.py: a UserError prints its message and hint, survives pickling (as
Dask ships a worker's error back) with both, close matches suggest names, and an estimator
used before fit raises what scikit-learn catches."""
from __future__ import annotations

import pickle
import re

import pytest

from lancetnic_flow.errors import UserError, close_matches
from lancetnic_flow.storage import WriteError


def test_a_user_error_prints_its_message_then_its_hint():
    assert str(UserError("bad column 'txt'", "use --text text")) == "bad column 'txt'\n  hint: use --text text"
    assert str(UserError("no hint")) == "no hint"


def test_a_user_error_and_its_subclasses_keep_message_and_hint_through_pickle():
    for err in (UserError("m", "h"), WriteError("disk full at /x", "free space")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and (back.message, back.hint) == (err.message, err.hint)
    # A field's error keeps each reader's words: a worker's `lr` error still says `--lr` and `lr:`.
    err = UserError("lr: must be > 0", field="training.lr", cli=("--lr: must be > 0", None),
                    workflow=("lr: must be > 0", None))
    back = pickle.loads(pickle.dumps(err))
    assert (back.field, back.cli, back.workflow) == (err.field, err.cli, err.workflow)


def test_close_matches_suggest_the_nearest_names_or_nothing():
    assert close_matches("jsonl", ["csv", "json", "parquet"]) == " (did you mean 'json'?)"
    assert close_matches("zzz", ["csv", "json"]) == ""


def test_an_estimator_used_before_fit_raises_not_fitted_as_scikit_learn_expects():
    from sklearn.exceptions import NotFittedError as SklearnNotFitted
    from sklearn.utils.validation import check_is_fitted

    from lancetnic_flow import TextClassifier, TextRegressor
    from lancetnic_flow.errors import NotFittedError, UserError

    for est in (TextClassifier(), TextRegressor()):
        with pytest.raises(SklearnNotFitted) as e:
            est.predict(["a text"])
        assert isinstance(e.value, NotFittedError) and isinstance(e.value, UserError)
        assert isinstance(e.value, ValueError) and isinstance(e.value, AttributeError)
        assert "not fitted yet" in e.value.message and "fit(X, y)" in e.value.hint
        with pytest.raises(SklearnNotFitted):
            check_is_fitted(est)
        assert est.__sklearn_is_fitted__() is False


def test_a_user_error_naming_options_as_fields_is_read_in_each_callers_words():
    """`UserError("... {features.max_len}")` showed the placeholder raw to every reader: the Python
    API reads `max_len`, the command line `--max-len`, a workflow file `max_len`, through pickling too."""
    import lancetnic_flow.options  # noqa: F401  (it names the options; any run has it loaded)

    err = UserError("texts are longer than {features.max_len}", "raise {features.max_len} or {training.seed}")
    assert str(err) == "texts are longer than max_len\n  hint: raise max_len or random_state"
    assert err.said("cli") == ("texts are longer than --max-len", "raise --max-len or --seed")
    assert err.said("workflow") == ("texts are longer than max_len", "raise max_len or seed")
    back = pickle.loads(pickle.dumps(err))
    assert (back.message, back.said("cli")) == (err.message, err.said("cli"))
    assert UserError("label {x.y} of {name}").message == "label {x.y} of {name}"   # not an option: as written


# Errors only the command line can raise, which may name its flags: its parser and command
# handlers (cli/: a workflow's `--set` is the `run` command's own flag), and the commands no
# Python function or workflow runs (predict into files, evaluate, export, serve, --json-log).
COMMAND_LINE_ONLY = {
    "cli/": "the command line's parser and commands",
    "ui/jsonlog.py": "--json-log is a flag of the command line alone",
    "runs/outputs.py": "predict's and evaluate's --output, --plots and --keep: files written by the command line",
    "runs/evaluate.py": "evaluate is a command of the command line alone",
    "runs/export.py": "export is a command of the command line alone",
    "runs/serve.py": "serve is a command of the command line alone",
    "data/readers/lines.py:check_line_columns": "--keep is predict's, of files the command line predicts",
    "data/sources.py:missing_column_error": "prediction's --text-column, --keep and --numeric: a file that "
                                            "the command line predicts (a training option is said in words)",
    "data/sources.py:refuse_named_twice": "--keep is the default of the reader's own names (say)",
    "storage.py:refuse_existing_file": "--force is a flag of the command line's writers (make-data, predict, "
                                       "export, evaluate --plots) alone",
}
# Flags that name what only the command line has, wherever they are said: predict's file.
COMMAND_LINE_FLAGS = {"--output": "predict's output file (storage.WRITE_PLACES names a run's out and cache in words)"}
# A whole command to type (`lancetnic-flow train --resume RUN`, `dask worker --memory-limit`) names its flags.
_COMMAND = re.compile(r"`[^`]*`|lancetnic-flow [^;`]*")
_ERRORS = {"UserError", "NotFittedError", "UnknownParameter", "WriteError", "NotRegularFile", "LabelListError",
           "SynthError", "FileNotARun", "SchedulerLost", "RankWorkersGone", "not_fitted", "hinted", "bad"}


def _flags_in_errors() -> tuple[int, list[str]]:
    """Each error the package makes, through the functions, variables and constants its
    message and hint are built from: how many, and the flags named where no exemption holds."""
    import ast

    from .source_scan import package_index, reached

    trees, index = package_index()
    made, wrong = 0, []
    for rel, tree in trees.items():
        for scope in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name not in ("bad", "hinted")):
            if rel.startswith("cli/") or rel in COMMAND_LINE_ONLY or f"{rel}:{scope.name}" in COMMAND_LINE_ONLY:
                continue
            for call in ast.walk(scope):
                func = getattr(call, "func", None)
                if not isinstance(call, ast.Call) or getattr(func, "id", getattr(func, "attr", None)) not in _ERRORS:
                    continue
                made += 1
                texts = [a for a in call.args if not isinstance(a, ast.Starred)] + \
                        [k.value for k in call.keywords if k.arg in ("message", "hint")]
                wrong += [f"{where} ({scope.name}): {flag}" for a in texts
                          for where, text in reached(a, rel, scope, index)
                          for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", _COMMAND.sub("", text))
                          if flag not in COMMAND_LINE_FLAGS]
    return made, sorted(set(wrong))


def test_no_error_a_python_or_workflow_caller_can_meet_names_a_flag_it_never_typed():
    """`--memory-budget`, `--format`, `--ddp`, `--encoding` in errors reached train(cfg), the
    estimators and workflow runs, which type no flag: an error names an option as
    ``{section.field}``, which each reader reads in its own words (UserError.said). Scans every
    error the package makes outside what only the command line raises (COMMAND_LINE_ONLY)."""
    made, wrong = _flags_in_errors()
    assert made > 150
    assert not wrong, wrong


def test_an_error_built_on_another_keeps_each_readers_words():
    """A predict plan refused for the run's model, a stopped run's checkpoint, a label list's file:
    an error that added to another's `message` said the command line's part in Python's `memory_budget`."""
    import lancetnic_flow.options  # noqa: F401
    from lancetnic_flow.errors import reworded

    err = UserError("memory budget 1 GiB is too small", "use {cluster.memory_budget} 2GiB", field="cluster.memory_budget")
    more = reworded(err, lambda message, hint: (f"{message} (the model)", f"{hint}, or {{cluster.run_on}} process"))
    assert type(more) is UserError and more.field == "cluster.memory_budget"
    assert str(more) == "memory budget 1 GiB is too small (the model)\n  hint: use memory_budget 2GiB, or run_on process"
    assert more.said("cli")[1] == "use --memory-budget 2GiB, or --run-on process"
    assert more.said("workflow")[1] == "use memory_budget 2GiB, or run_on process"


def test_a_local_files_url_is_said_as_the_path_typed_in_the_working_folder_and_remote_ones_stay(tmp_path, monkeypatch):
    # a reader names the file it opened, file:///.../data/x.csv, where the user typed data/x.csv
    monkeypatch.chdir(tmp_path)
    here = str(tmp_path)
    exc = UserError(f"file://{here}/data/x.csv: no column 'label'; file://{here}-other/y.csv and file:///z/w.csv",
                    f"compare with s3://b/x.csv and file://{here}/data/y.csv")
    message, hint = exc.said("cli")
    assert message == f"data/x.csv: no column 'label'; {here}-other/y.csv and /z/w.csv"
    assert hint == "compare with s3://b/x.csv and data/y.csv"
    assert str(exc).startswith("data/x.csv: no column") and exc.said("python")[0] == message
    monkeypatch.setattr("os.getcwd", lambda: (_ for _ in ()).throw(FileNotFoundError("removed")))
    assert exc.said("cli")[0].startswith(f"{here}/data/x.csv: no column")   # a removed working folder: whole paths
