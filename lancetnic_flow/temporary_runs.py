"""The temporary folder a Python estimator fitted without ``out`` trains its run
into, and how a run's summary knows one: such a folder is removed when the
estimator goes, so the summary names the estimator's calls, not a command on
a path that will not be there."""
from __future__ import annotations

import os
import tempfile

PREFIX = "lancetnic-flow-runs-"


def new_temporary_parent() -> str:
    """A new, empty folder under the system's temporary folder for one estimator's runs."""
    return tempfile.mkdtemp(prefix=PREFIX)


def is_temporary_run(run: str) -> bool:
    """Whether ``run`` lies directly in a folder :func:`new_temporary_parent` made."""
    parent = os.path.dirname(os.path.normpath(run))
    return (os.path.basename(parent).startswith(PREFIX)
            and os.path.dirname(parent) == os.path.normpath(tempfile.gettempdir()))
