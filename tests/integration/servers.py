"""Loopback test servers: an S3 (moto) server and an HTTP server with Range.

Both bind 127.0.0.1 on a free port and are context managers::

    with s3_server() as storage_options: ...
    with http_server(root_dir) as base_url: ...
"""
from __future__ import annotations

import contextlib
import email.utils
import json
import os
import re
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextlib.contextmanager
def s3_server(ip: str = "127.0.0.1") -> Iterator[dict]:
    """A moto S3 server on ``ip``; yields s3fs storage options that point at it."""
    import s3fs
    from moto.server import ThreadedMotoServer

    old = {k: os.environ.get(k) for k in _AWS_ENV}
    os.environ.update(_AWS_ENV)
    server = ThreadedMotoServer(ip_address=ip, port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        yield {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": url, "region_name": "us-east-1"},
        }
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        # moto keeps buckets in this process, not in the server: without a
        # reset the next module's server would start with this one's objects.
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10).close()
        server.stop()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class _RangeHandler(BaseHTTPRequestHandler):
    """Serves files under ``server.root`` with HEAD, GET and ``Range: bytes=a-b``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - quiet tests
        pass

    def _target(self) -> Path | None:
        root: Path = self.server.root  # type: ignore[attr-defined]
        rel = self.path.split("?", 1)[0].lstrip("/")
        p = (root / rel).resolve()
        if root not in p.parents and p != root:
            return None
        return p if p.is_file() else None

    def _headers(self, status: int, length: int, extra: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()

    def _serve(self, body: bool) -> None:
        p = self._target()
        if p is None:
            msg = b"not found"
            self._headers(404, len(msg))
            if body:
                self.wfile.write(msg)
            return
        st = p.stat()
        size = st.st_size
        common = {"Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True),
                  "ETag": f'"{st.st_mtime_ns:x}-{size:x}"'}
        rng = self.headers.get("Range")
        start, end, status = 0, size - 1, 200
        if rng:
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            if not m or (m.group(1) == "" and m.group(2) == ""):
                self._headers(416, 0, {"Content-Range": f"bytes */{size}"})
                return
            if m.group(1) == "":  # suffix range: last N bytes
                n = int(m.group(2))
                start, end = max(0, size - n), size - 1
            else:
                start = int(m.group(1))
                end = int(m.group(2)) if m.group(2) else size - 1
                end = min(end, size - 1)
            if start >= size or start > end:
                self._headers(416, 0, {"Content-Range": f"bytes */{size}"})
                return
            status = 206
            common["Content-Range"] = f"bytes {start}-{end}/{size}"
        length = end - start + 1 if size else 0
        self._headers(status, length, common)
        if body and length:
            with open(p, "rb") as f:
                f.seek(start)
                self.wfile.write(f.read(length))

    def do_HEAD(self):  # noqa: N802
        self._serve(body=False)

    def do_GET(self):  # noqa: N802
        self._serve(body=True)


@contextlib.contextmanager
def http_server(root_dir) -> Iterator[str]:
    """Serve ``root_dir`` on 127.0.0.1; yields the base URL (no trailing slash)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    server.daemon_threads = True
    server.root = Path(root_dir).resolve()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def s3_cli_args(opts: dict) -> list[str]:
    """``s3_server``'s storage options as the CLI's ``--storage-option`` flags."""
    return ["--storage-option", f"key={opts['key']}", "--storage-option", f"secret={opts['secret']}",
            "--storage-option", f"client_kwargs.endpoint_url={opts['client_kwargs']['endpoint_url']}",
            "--storage-option", "client_kwargs.region_name=us-east-1"]


def stop_processes(procs: list[subprocess.Popen]) -> None:
    """SIGTERM in reverse start order, each process gone before the next is told
    (workers before their scheduler), SIGKILL for one still there after 20 s.

    Workers stop in half a second while their scheduler answers; told at the
    same moment as the scheduler, a worker's nanny waits 8 s for a process stuck
    reporting to a scheduler that is gone, then kills it."""
    for p in reversed(procs):
        p.terminate()
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def scheduler_address(scheduler_file: Path, timeout: float = 60) -> str:
    """The address a `dask scheduler --scheduler-file FILE` wrote, once it has.
    The scheduler creates the file before it writes it: an empty or partial
    file is read again (a CI run read it empty), until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return json.loads(scheduler_file.read_text())["address"]
        except (FileNotFoundError, ValueError, KeyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class DroppingProxy:
    """A TCP proxy on loopback that can cut every connection through it and
    refuse new ones for a while: a network that drops for a few seconds.

    ``with DroppingProxy(host, port) as p:`` connect to ``127.0.0.1:p.port``;
    ``p.drop(3.0)`` closes what is open and refuses connections for 3 s."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._refuse_until = 0.0
        self._closed = False

    def __enter__(self) -> "DroppingProxy":
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()
        return self

    def __exit__(self, *exc) -> None:
        self._closed = True
        self._listener.close()
        self._cut()

    def connections(self) -> int:
        with self._lock:
            return len(self._open) // 2

    def drop(self, seconds: float) -> None:
        self._refuse_until = time.monotonic() + seconds
        self._cut()

    def _cut(self) -> None:
        with self._lock:
            socks, self._open = list(self._open), set()
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if time.monotonic() < self._refuse_until:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def dask_processes(folder: Path, memory_limit: str, workers: int = 2) -> Iterator[tuple[str, list]]:
    """A real `dask scheduler` on loopback and ``workers`` `dask worker` processes
    (each a nanny that restarts its worker), with the workers' environment the
    docs give; yields the address and the worker (nanny) processes."""
    import sys

    from distributed import Client

    bin_dir = Path(sys.executable).parent
    sched_file = folder / "scheduler.json"
    env = {**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "system"}
    procs = [subprocess.Popen([str(bin_dir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(sched_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
    try:
        address = scheduler_address(sched_file)
        for i in range(workers):
            procs.append(subprocess.Popen([str(bin_dir / "dask"), "worker", address, "--nworkers", "1",
                                           "--nthreads", "1", "--memory-limit", memory_limit, "--no-dashboard",
                                           "--name", f"w{i}", "--local-directory", str(folder / f"w{i}")],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        with Client(address, timeout="30s") as c:
            c.wait_for_workers(workers, timeout=60)
        yield address, procs[1:]
    finally:
        stop_processes(procs)
