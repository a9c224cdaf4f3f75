"""The unit layer: each test calls the package's functions directly on small
real inputs (arrays, files under tmp_path, memory:// paths) in this process.

No test here may start a Dask cluster, a client or a subprocess: those tests
belong in tests/integration. This guard fails a test that tries, so the layer
stays fast (`make test-unit`).
"""
from __future__ import annotations

import multiprocessing.process
import subprocess

import pytest

# Matplotlib lists the system's fonts (fc-list, a subprocess) the first time it
# runs on a machine; that happens here, once, before the guard below.
import matplotlib
matplotlib.use("Agg")
import matplotlib.font_manager  # noqa: E402,F401


class OutOfUnitLayer(AssertionError):
    pass


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise OutOfUnitLayer(f"a unit test started {what}: move it to tests/integration")
    return refuse


@pytest.fixture(autouse=True)
def _no_cluster_or_subprocess(monkeypatch):
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("a subprocess"))
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", _refuse("a process"))
    try:
        import distributed
        from distributed.deploy.spec import SpecCluster
    except ImportError:   # pragma: no cover - distributed is a dependency
        return
    monkeypatch.setattr(SpecCluster, "__init__", _refuse("a Dask cluster"))
    monkeypatch.setattr(distributed.Client, "__init__", _refuse("a Dask client"))
