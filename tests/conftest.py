"""Session hooks for the whole suite (tests/unit, tests/integration,
tests/test_layout.py): the order files run in, and the image check that runs
beside the suite. The integration fixtures (a real LocalCluster, corpora, a
trained run) are in integration/conftest.py; tests/unit needs none.
"""
from __future__ import annotations

import signal
from pathlib import Path

import pytest

# The Ctrl-C tests send SIGINT to runs as a terminal does to a foreground command. A suite started in
# the background (`make test &`, nohup in a script) inherits SIGINT ignored, and so would every run it
# starts: Python then installs no KeyboardInterrupt handler, and a Ctrl-C before training went unseen.
# A handler here (not SIG_IGN) is reset to the default in each child, as in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# ---------------------------------------------------------------- order, and the image check
# `make test` runs the suite on two pytest-xdist workers, a file at a time
# (--dist loadfile), handed out in collection order. The order is computed from
# what was collected, nothing stored: the integration files first, those with
# more `slow` tests (marked in the test files) before those with fewer, then
# those with more tests on a LocalCluster fixture, then those with more tests;
# the fast files (tests/unit, tests/test_layout.py) after
# them, where their short files fill the end of the run on both workers; the
# image check's test last (integration/test_image.py).
UNIT = Path(__file__).resolve().parent / "unit"
CLUSTER_FIXTURES = {"client", "own_cluster", "trained_run"}


def _weights(items) -> dict[Path, tuple[int, ...]]:
    """Per file: (slow tests, tests on a cluster fixture, tests), each negated to sort first when larger."""
    weights: dict[Path, list[int]] = {}
    for item in items:
        w = weights.setdefault(item.path, [0, 0, 0])
        w[0] -= item.get_closest_marker("slow") is not None
        w[1] -= bool(CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())))
        w[2] -= 1
    return {path: tuple(w) for path, w in weights.items()}


def _fast(path: Path) -> bool:
    return path.is_relative_to(UNIT) or path.parent == UNIT.parent


# The image check runs beside the suite: started once collection is final
# (after -k/-m deselection), its test moved to the end to collect the result.
# Under pytest-xdist the controller starts it (once) in a folder whose name
# every worker gets, and the worker that runs test_image.py waits on the
# status file the check leaves there (tests/image_check.py).


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    weights = _weights(items)

    def order(item) -> tuple:
        return (item.get_closest_marker("image") is not None, _fast(item.path), *weights[item.path])

    items.sort(key=order)   # stable: files keep their order within a weight, tests within a file


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
