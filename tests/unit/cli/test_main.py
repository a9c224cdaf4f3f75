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
