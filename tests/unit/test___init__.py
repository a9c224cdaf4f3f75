"""lancetnic_flow/__init__.py: what importing the package sets up."""
from __future__ import annotations

import importlib
import os

import lancetnic_flow
from lancetnic_flow.dataflow.plan import WORKER_ENV


def test_importing_the_package_makes_openmp_threads_sleep_while_they_wait(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    importlib.reload(lancetnic_flow)
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert WORKER_ENV["OMP_WAIT_POLICY"] == "PASSIVE"   # workers started by hand get it too (docs/memory.md)


def test_a_wait_policy_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    importlib.reload(lancetnic_flow)
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
