"""cli/main.py: a known failure's hint says only what works."""
from __future__ import annotations

from lancetnic_flow.cli.main import known_failure


class RankWorkersGone(RuntimeError):   # known by its name, as Dask's own errors are
    pass


def test_a_ddp_run_whose_workers_are_gone_is_told_to_resume_on_more_workers_not_fewer_ranks():
    message, hint = known_failure(RankWorkersGone("worker tcp://w:1 left during --ddp training"))
    assert "--resume RUN" in hint and "lower --ddp" not in hint
