"""The Dockerfile builds, and its image works as Dask scheduler, Dask worker
and trainer: `scripts/check_image.sh` (= `make image-check`) run for real.

The check takes minutes (a Debian base made with debootstrap, the image build,
then a scheduler, two workers and a trainer in their own containers on
loopback, with a `--ddp 2` run), most of it waiting on downloads and disk. So
conftest.py starts it in the background, at low CPU and I/O priority, as soon
as the session's tests are collected, and moves this test to the end of the
run, where it waits for the result: the check overlaps the rest of the suite
instead of adding to it.

Where the machine cannot run it (not root, podman or debootstrap missing, no
container runtime that starts, no Debian mirror, under 5 GB free for podman),
the script exits 3 and this test is skipped with the script's reason. The
test installs nothing unless `LANCETNIC_FLOW_IMAGE_CHECK=install` (what CI
sets) lets the script apt-get the missing tools; `LANCETNIC_FLOW_IMAGE_CHECK=0`
skips the check on purpose. Anything else that fails (the build, a role, a result)
fails the test with the end of the script's log.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from image_check import CANNOT, WAIT, ImageCheck, enabled


@pytest.mark.slow
@pytest.mark.image
def test_the_dockerfile_builds_an_image_that_runs_as_scheduler_workers_and_trainer(request):
    if not enabled():
        pytest.skip("LANCETNIC_FLOW_IMAGE_CHECK=0")
    check: ImageCheck | None = getattr(request.config, "_image_check", None)
    shared = getattr(request.config, "workerinput", {}).get("lancetnic_image_dir")
    if check is None and shared:  # a pytest-xdist worker: the controller started it
        check = ImageCheck.attach(Path(shared))
    if check is None:            # run on its own, not through the session's early start
        check = request.config._image_check = ImageCheck.start()
    rc = check.wait(WAIT - check.elapsed())
    log = check.text()
    if rc == CANNOT:
        pytest.skip(f"the image check cannot run on this machine: {check.summary}")
    assert rc == 0, f"scripts/check_image.sh exited {rc} (-1: still running after {WAIT} s):\n{log[-6000:]}"
    # What the script promises on success, read back from its log.
    assert "workers in the scheduler: ['w1', 'w2']" in log, log[-3000:]
    assert "ddp: 2 ranks on" in log and "gloo" in log, log[-3000:]
    assert check.summary.startswith("PASS "), check.summary
    if check.proc is not None:   # attached: the controller removes the folder when the session ends
        shutil.rmtree(check.log.parent, ignore_errors=True)
