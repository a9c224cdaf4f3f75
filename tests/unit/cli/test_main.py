"""cli/main.py: a known failure's hint says only what works."""
from __future__ import annotations

from lancetnic_flow.cli.main import known_failure


class RankWorkersGone(RuntimeError):   # known by its name, as Dask's own errors are
    pass


def test_a_ddp_run_whose_workers_are_gone_is_told_to_resume_on_more_workers_not_fewer_ranks():
    message, hint = known_failure(RankWorkersGone("worker tcp://w:1 left during --ddp training"))
    assert "--resume RUN" in hint and "lower --ddp" not in hint


def test_a_workflow_run_is_told_of_its_files_keys_the_command_line_of_its_flags():
    """`run WORKFLOW` with `idf: false` and an --init-from run said `--idf False`: flags the file never held.
    A field's error now speaks as the reader gave the value: the file's keys under `run`."""
    from lancetnic_flow.cli.main import cli_words
    from lancetnic_flow.options import bad

    err = bad("features.idf", lambda say: f"{say.setting('features.idf', False)}: ids are unweighted", "drop {name}")
    assert cli_words(err, "run") == ("idf: false: ids are unweighted", "drop idf")
    assert cli_words(err, "train") == ("--no-idf: ids are unweighted", "drop --idf")
    assert str(err) == "idf=False: ids are unweighted\n  hint: drop idf"


def test_a_refused_command_line_is_an_error_event_in_a_json_log_on_stdout(capsys):
    """With --json-log to stdout the console view is off: a misspelled flag printed its error on
    stderr alone, and a reader of the log got no line at all, where every other error is an event."""
    import json

    import pytest

    from lancetnic_flow.cli.main import main

    with pytest.raises(SystemExit) as done:
        main(["evaluate", "runs/r", "d.csv", "--jsn", "--json-log"])
    assert done.value.code == 2
    out, err = capsys.readouterr()
    event = json.loads(out)
    assert event["event"] == "error" and event["status"] == 2 and "no option '--jsn'" in event["message"]
    assert "no option '--jsn'" in err
    with pytest.raises(SystemExit):
        main(["train", "d.csv", "--epochs", "x", "--json-log", "events.jsonl"])   # a FILE: not opened for this
    assert capsys.readouterr().out == ""


def _failing(monkeypatch, command: str, exc: Exception) -> None:
    import importlib

    cli_main = importlib.import_module("lancetnic_flow.cli.main")

    def fail(a, report):
        raise exc

    monkeypatch.setitem(cli_main.COMMANDS, command, fail)


def test_an_error_naming_an_option_as_a_field_is_said_in_the_words_of_each_command(monkeypatch, capsys):
    """An error whose text named an option `{features.max_len}` reached the command line raw: the
    command line now reads `--max-len`, a workflow run `max_len`, whether the error was made with the
    placeholder, had it added after it was made, or is not a UserError at all."""
    from lancetnic_flow.cli.main import main
    from lancetnic_flow.errors import UserError

    made = UserError("texts are longer than {features.max_len}", "raise {features.max_len}")
    added = UserError("texts are long", "raise it")
    added.message += " ({features.max_len})"
    for command, args, flag in (("train", ["train", "d.csv"], "--max-len"), ("run", ["run", "w.yaml"], "max_len")):
        for exc in (made, added):
            _failing(monkeypatch, command, exc)
            assert main(args) == 2
            err = capsys.readouterr().err
            assert flag in err and "{features.max_len}" not in err
        _failing(monkeypatch, command, RuntimeError("lost {training.ddp} ranks"))
        assert main(args) == 1
        assert f"lost {'--ddp' if command == 'train' else 'ddp'} ranks" in capsys.readouterr().err
    assert "--max-len" not in str(made) and "raise max_len" in str(made) and "(max_len)" in str(added)


def test_an_error_with_braces_that_name_no_option_keeps_its_leading_field_said_as_a_flag():
    """A text in braces (a JSON value, a label) names no option: the error is said as it was,
    its leading field still named as the command line's flag."""
    from lancetnic_flow.cli.main import cli_words
    from lancetnic_flow.errors import UserError

    err = UserError("max_features: got {'a': 1}", "give a number")
    assert err.cli is None and cli_words(err, "train") == ("--max-features: got {'a': 1}", "give a number")


def test_a_json_log_that_is_also_make_datas_out_is_refused_before_either_is_written(tmp_path, capsys):
    # make-data d.csv --json-log d.csv: the log made the file, then make-data refused it as existing
    # (or, --force, renamed the corpus over the log)
    from lancetnic_flow.cli.main import main

    out = tmp_path / "d.csv"
    assert main(["make-data", str(out), "--rows", "5", "--force", "--json-log", str(out)]) == 2
    assert f"--json-log {out} is also OUT" in capsys.readouterr().err and not out.exists()


def test_a_stdout_pipe_whose_reader_closed_is_told_and_then_writes_nowhere(monkeypatch):
    import os

    from lancetnic_flow.cli.main import stdout_reader_gone

    read, write = os.pipe()
    out = os.fdopen(write, "w")
    monkeypatch.setattr("sys.stdout", out)
    try:
        assert not stdout_reader_gone()          # its reader is still there
        os.close(read)
        assert stdout_reader_gone()              # `| head -1` has stopped reading
        out.write("more\n" * 10_000)
        out.flush()                              # now /dev/null: no BrokenPipeError at the last flush
    finally:
        out.close()


def test_a_stdout_that_is_no_pipe_is_never_taken_for_a_closed_one(monkeypatch, tmp_path):
    with open(tmp_path / "out.txt", "w") as out:
        monkeypatch.setattr("sys.stdout", out)
        from lancetnic_flow.cli.main import stdout_reader_gone

        assert not stdout_reader_gone()
