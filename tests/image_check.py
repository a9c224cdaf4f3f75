"""The background image check (scripts/check_image.sh) that conftest.py
starts once the session's tests are collected and test_image.py waits for."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check_image.sh"
# The check's whole budget: cold it takes about 5 minutes alone, 6 beside the suite on one
# process; beside two pytest-xdist workers (both cores busy) the niced build gets what is left.
WAIT = 45 * 60
CANNOT = 3              # the script's "this machine cannot run the check"


def setting() -> str:
    """LANCETNIC_FLOW_IMAGE_CHECK: 0 skips the check; install lets it apt-get
    podman, debootstrap and runc (what CI sets: .ci/run); anything else runs
    it with the tools the machine has."""
    return os.environ.get("LANCETNIC_FLOW_IMAGE_CHECK", "1").strip().lower()


def enabled() -> bool:
    return setting() not in ("0", "no", "false", "off")


@dataclass
class ImageCheck:
    """The background `check_image.sh`, its log, and what it ended with."""
    proc: subprocess.Popen | None      # None: started by another process (the pytest-xdist controller)
    log: Path
    started: float = field(default_factory=time.time)
    rc: int | None = None
    summary: str = ""

    @classmethod
    def start(cls, folder: Path | None = None) -> "ImageCheck":
        """Start the script; a thread writes its exit status to ``rc`` beside
        the log, so that another process (a pytest-xdist worker) can wait too."""
        folder = folder or Path(tempfile.mkdtemp(prefix="lancetnic-image-check-"))
        log = folder / "check.log"
        # Low priority: the suite's own tests keep their CPU and disk; the check
        # takes what they leave. nice and ionice rank the script and its build
        # steps on the host; CPU_SHARES ranks its containers, which run in
        # cgroups of their own (ionice is skipped where util-linux lacks it).
        cmd = ["nice", "-n", "19", *(["ionice", "-c", "2", "-n", "7"] if _have("ionice") else []),
               "bash", str(SCRIPT)]
        env = {**os.environ, "CPU_SHARES": os.environ.get("CPU_SHARES", "2"),
               "INSTALL": "1" if setting() == "install" else "0"}
        (folder / "started").write_text(repr(time.time()))
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        check = cls(proc, log)
        threading.Thread(target=check._record_rc, daemon=True).start()
        return check

    @classmethod
    def attach(cls, folder: Path) -> "ImageCheck | None":
        """The check another process started in ``folder`` (None if none was)."""
        if not (folder / "started").exists():
            return None
        return cls(None, folder / "check.log", started=float((folder / "started").read_text()))

    def _record_rc(self) -> None:
        rc = self.proc.wait()
        (self.log.parent / "rc.tmp").write_text(str(rc))
        os.replace(self.log.parent / "rc.tmp", self.log.parent / "rc")

    def finished_rc(self) -> int | None:
        """The script's exit status once it has ended, else None."""
        f = self.log.parent / "rc"
        return int(f.read_text()) if f.exists() else None

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + max(1.0, timeout)
        while (rc := self.finished_rc()) is None and time.monotonic() < deadline:
            time.sleep(1.0)
        if rc is None:
            self.stop()
            rc = -1
        self.rc = rc
        lines = self.text().strip().splitlines()
        verdicts = [x for x in lines if x.startswith(("PASS ", "FAIL", "CANNOT RUN HERE"))]
        self.summary = (verdicts or lines or ["(no output)"])[-1]
        return self.rc

    def elapsed(self) -> float:
        return time.time() - self.started

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        """Stop an unfinished check (an interrupted or narrowed session): the
        script's process group, then the containers it had started."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if _have("podman"):      # the script names its containers ck-<its pid>-...
            ids = subprocess.run(["podman", "ps", "-aq", "--filter", f"name=ck-{self.proc.pid}-"],
                                 capture_output=True, text=True).stdout.split()
            if ids:
                subprocess.run(["podman", "rm", "-f", "-t", "2", *ids], capture_output=True)
        shutil.rmtree(self.log.parent, ignore_errors=True)


def _have(cmd: str) -> bool:
    return shutil.which(cmd) is not None
