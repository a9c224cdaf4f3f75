"""Fixtures: one real LocalCluster per session, small generated corpora, one
trained run; and the hooks that run the image check beside the suite.
Helpers (functions, not fixtures) are in helpers.py.

Everything runs on real Dask worker processes and real files; no mocks.
"""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from lancetnic_flow.data.synth import write_corpus

from helpers import make_config

# ---------------------------------------------------------------- order, and the image check (tests/test_image.py)
# `make test` runs the suite on two pytest-xdist workers, a file at a time
# (--dist loadfile), handed out in collection order. The longest files go
# first so that no long file starts last and runs alone; measured with
# --durations, in seconds on two cores with both workers busy.
LONG_FILES = {"test_cli_models.py": 150, "test_chaos.py": 125, "test_output_errors.py": 150, "test_ddp.py": 130,
              "test_resume.py": 110, "test_remote.py": 120, "test_multihost.py": 75, "test_scheduler.py": 90,
              "test_values_encodings.py": 90, "test_tasks.py": 90, "test_tune.py": 50, "test_tls.py": 35,
              "test_bad_input.py": 70, "test_api.py": 60, "test_predict_rows.py": 60, "test_many_classes.py": 45}


def _order(item) -> tuple:
    image = item.get_closest_marker("image") is not None
    return image, -LONG_FILES.get(item.path.name, 0)


# The image check runs beside the suite: started once collection is final
# (after -k/-m deselection), its test moved to the end to collect the result.
# Under pytest-xdist the controller starts it (once) in a folder whose name
# every worker gets, and the worker that runs test_image.py waits on the
# status file the check leaves there.


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    items.sort(key=_order)   # stable: files keep their order within a weight, tests within a file


def pytest_collection_finish(session):
    from image_check import ImageCheck, enabled

    if session.config.option.collectonly or hasattr(session.config, "workerinput"):
        return
    if enabled() and any(item.get_closest_marker("image") for item in session.items):
        session.config._image_check = ImageCheck.start()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    from image_check import enabled

    config = node.config
    if enabled():
        if getattr(config, "_image_dir", None) is None:
            import tempfile

            config._image_dir = tempfile.mkdtemp(prefix="lancetnic-image-check-")
        node.workerinput["lancetnic_image_dir"] = config._image_dir


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    from image_check import ImageCheck

    config = node.config
    if getattr(config, "_image_dir", None) and getattr(config, "_image_check", None) is None \
            and any("test_image.py" in i for i in ids) and not config.option.collectonly:
        config._image_check = ImageCheck.start(Path(config._image_dir))


def pytest_terminal_summary(terminalreporter, config):
    check = getattr(config, "_image_check", None)
    if check is not None and check.rc is None and check.finished_rc() is not None:
        check.wait(1)
    if check is not None and check.rc is not None:
        terminalreporter.write_line(f"image check (scripts/check_image.sh, exit {check.rc}): {check.summary}")


def pytest_unconfigure(config):
    check = getattr(config, "_image_check", None)
    if check is not None:
        check.stop()
    folder = getattr(config, "_image_dir", None)
    if folder is not None:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


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
