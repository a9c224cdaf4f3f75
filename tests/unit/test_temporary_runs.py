"""temporary_runs.py: an estimator's temporary run folder, and telling one from a run
folder the user keeps."""
from __future__ import annotations

import os
import shutil
import tempfile

from lancetnic_flow.temporary_runs import is_temporary_run, new_temporary_parent


def test_a_run_in_an_estimators_temporary_folder_is_told_and_a_kept_run_is_not(tmp_path):
    parent = new_temporary_parent()
    try:
        assert is_temporary_run(os.path.join(parent, "20260101-000000"))
        assert is_temporary_run(os.path.join(parent, "20260101-000000") + "/")
    finally:
        shutil.rmtree(parent)
    for kept in ("runs/first", str(tmp_path / "lancetnic-flow-runs-x" / "r"),   # the prefix outside the temp folder
                 os.path.join(tempfile.gettempdir(), "r"), "s3://bucket/lancetnic-flow-runs-x/r"):
        assert not is_temporary_run(kept), kept
