"""Shared fixtures: one real LocalCluster per session, small generated corpora.

Everything runs on real Dask worker processes and real files; no mocks.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from lancetnic_flow.config import (ClusterConfig, DataConfig, FeatureConfig, ModelConfig, OutputConfig,
                                   TrainConfig, TrainingConfig)
from lancetnic_flow.synth import write_corpus

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


# ---------------------------------------------------------------- the image check (tests/test_image.py)
# It runs beside the suite: started once collection is final (after -k/-m
# deselection), its test moved to the end to collect the result.


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.get_closest_marker("image") is not None)   # stable: the rest keep their order


def pytest_collection_finish(session):
    from test_image import ImageCheck, enabled

    if session.config.option.collectonly:
        return
    if enabled() and any(item.get_closest_marker("image") for item in session.items):
        session.config._image_check = ImageCheck.start()


def pytest_terminal_summary(terminalreporter, config):
    check = getattr(config, "_image_check", None)
    if check is not None and check.rc is not None:
        terminalreporter.write_line(f"image check (scripts/check_image.sh, exit {check.rc}): {check.summary}")


def pytest_unconfigure(config):
    check = getattr(config, "_image_check", None)
    if check is not None:
        check.stop()


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


def make_config(train, tmp: Path, *, val=None, epochs=3, seed=0, blocksize=None, cache=None,
                storage_options=None, val_fraction=0.1, **features) -> TrainConfig:
    """A small, fast training config writing its run (and cache) under ``tmp``."""
    return TrainConfig(
        data=DataConfig(train=[str(t) for t in (train if isinstance(train, (list, tuple)) else [train])],
                        val=[str(v) for v in (val or [])], val_fraction=val_fraction,
                        storage_options=dict(storage_options or {})),
        features=FeatureConfig(**{"max_features": 20_000, **features}),
        model=ModelConfig(hidden=32, layers=1, dropout=0.1),
        training=TrainingConfig(epochs=epochs, batch_size=128, lr=5e-3, seed=seed, shuffle_buffer=2_000),
        cluster=ClusterConfig(blocksize=blocksize),
        output=OutputConfig(out=str(tmp / "runs"), cache=str(cache) if cache else str(tmp / "cache")),
    )


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
    from lancetnic_flow.trainer import train

    tmp = tmp_path_factory.mktemp("trained")
    res = train(make_config(corpus4, tmp, epochs=3), client=client)
    return res


# ---------------------------------------------------------------- tasks run on the workers
# They live here because Dask pickles functions by reference: a worker imports the
# defining module, and this one is light (no torch, no scikit-learn).


def timed_task(i: int, seconds: float, log_dir: str) -> int:
    """Sleep, recording wall-clock start and stop in a file the test reads."""
    import os
    import time

    t0 = time.time()
    time.sleep(seconds)
    t1 = time.time()
    with open(os.path.join(log_dir, f"{i:03d}"), "w") as f:
        f.write(f"{t0} {t1} {os.getpid()}")
    return i


def worker_hashes(strings: list[str]) -> list[int]:
    import pyarrow as pa

    from lancetnic_flow.features.hashing import hash_strings

    return [int(h) for h in hash_strings(pa.array(strings))]


def transform_in_worker(features, texts: list[str]):
    import pyarrow as pa

    return features.transform_texts(pa.array(texts))
