"""The background image check (scripts/check_image.sh) that conftest.py
starts once the session's tests are collected and test_image.py waits for."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check_image.sh"
WAIT = 20 * 60          # the check's whole budget; cold it takes about 5 minutes alone, 6 beside the suite
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
    proc: subprocess.Popen
    log: Path
    started: float = field(default_factory=time.monotonic)
    rc: int | None = None
    summary: str = ""

    @classmethod
    def start(cls) -> "ImageCheck":
        log = Path(tempfile.mkdtemp(prefix="lancetnic-image-check-")) / "check.log"
        # Low priority: the suite's own tests keep their CPU and disk; the check
        # takes what they leave. nice and ionice rank the script and its build
        # steps on the host; CPU_SHARES ranks its containers, which run in
        # cgroups of their own (ionice is skipped where util-linux lacks it).
        cmd = ["nice", "-n", "19", *(["ionice", "-c", "2", "-n", "7"] if _have("ionice") else []),
               "bash", str(SCRIPT)]
        env = {**os.environ, "CPU_SHARES": os.environ.get("CPU_SHARES", "2"),
               "INSTALL": "1" if setting() == "install" else "0"}
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        return cls(proc, log)

    def wait(self, timeout: float) -> int:
        try:
            self.rc = self.proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            self.stop()
            self.rc = -1
        lines = self.text().strip().splitlines()
        verdicts = [x for x in lines if x.startswith(("PASS ", "FAIL", "CANNOT RUN HERE"))]
        self.summary = (verdicts or lines or ["(no output)"])[-1]
        return self.rc

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        """Stop an unfinished check (an interrupted or narrowed session): the
        script's process group, then the containers it had started."""
        if self.proc.poll() is not None:
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
