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


def test_train_of_a_python_config_refuses_storage_options_with_only_local_paths(tmp_path):
    """The command line refuses --storage-option where every path is local; train(cfg) ran with them."""
    from lancetnic_flow.api.progress import train
    from lancetnic_flow.config import DataConfig, OutputConfig, TrainConfig
    from lancetnic_flow.errors import UserError

    (tmp_path / "d.csv").write_text("text,label\na b,x\nc d,y\n")
    cfg = TrainConfig(data=DataConfig(train=[str(tmp_path / "d.csv")], storage_options={"anon": True}),
                      output=OutputConfig(out=str(tmp_path / "runs")))
    with pytest.raises(UserError, match="storage_options anon opens remote storage"):
        train(cfg, progress=False)
    assert not (tmp_path / "runs").exists()
