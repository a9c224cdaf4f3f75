"""api/progress.py: a Python caller's run speaks its words."""
from __future__ import annotations

import pytest

from lancetnic_flow.api.progress import progress_events
from lancetnic_flow.errors import RunWarning


@pytest.mark.parametrize("progress", [False, True])
def test_a_python_callers_run_warnings_name_its_parameters_not_the_command_lines_flags(progress):
    """train(cfg) and the estimators were told `raise --max-len`: they give `max_len=`."""
    with progress_events(progress) as events:
        assert events.words == "python"
        seen = []
        events.subscribe(lambda kind, e: seen.append(e["message"]))
        with pytest.warns(RunWarning) if not progress else _nothing():
            events.emit("warning", message="raise {features.max_len}")
    assert seen == ["raise max_len"]


def _nothing():
    import contextlib

    return contextlib.nullcontext()
