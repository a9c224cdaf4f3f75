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
