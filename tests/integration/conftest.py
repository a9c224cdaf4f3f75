"""Fixtures of the integration tests: one real LocalCluster per session, small
generated corpora, one trained run. Helpers (functions, not fixtures) are in
helpers.py, the loopback S3 and HTTP servers in servers.py; the session hooks
(file order, the image check) in ../conftest.py.

Everything runs on real Dask worker processes and real files; no mocks.
"""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from lancetnic_flow.data.synth import write_corpus

from helpers import make_config


@pytest.fixture(scope="session")
def client():
    """ONE LocalCluster (2 worker processes × 1 thread) shared by the session."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="1.5GiB",
                           dashboard_address=":0", silence_logs=logging.ERROR)
    c = Client(cluster)
    c.wait_for_workers(2, timeout=60)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("corpora")


@pytest.fixture(scope="session")
def corpus4(data_dir) -> Path:
    """4 classes, 8,000 rows (~2 MB of CSV)."""
    p = data_dir / "c4.csv"
    write_corpus(str(p), 8000, classes=4, seed=1)
    return p


@pytest.fixture(scope="session")
def corpus2(data_dir) -> Path:
    """2 classes, 4,000 rows."""
    p = data_dir / "c2.csv"
    write_corpus(str(p), 4000, classes=2, seed=2)
    return p


@pytest.fixture(scope="session")
def small_corpus(data_dir) -> Path:
    """4 classes, 2,000 rows: for CLI subprocesses and quick runs."""
    p = data_dir / "small.csv"
    write_corpus(str(p), 2000, classes=4, seed=3)
    return p


@pytest.fixture
def own_cluster():
    """A LocalCluster of its own (2 worker processes × 1 thread), for tests that kill a worker."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="1.5GiB",
                           dashboard_address=":0", silence_logs=logging.ERROR)
    c = Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


@pytest.fixture(scope="session")
def trained_run(client, corpus4, tmp_path_factory):
    """One trained run (4 classes) shared by the predictor/artifact tests."""
    from lancetnic_flow.training.orchestrator import train

    tmp = tmp_path_factory.mktemp("trained")
    res = train(make_config(corpus4, tmp, epochs=3), client=client)
    return res
