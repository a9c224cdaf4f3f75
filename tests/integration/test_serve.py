"""``lancetnic-flow serve RUN`` (docs/serving.md), as a real server process on a
free port, asked with real HTTP clients (urllib, http.client, raw sockets):
its answers are ``Predictor.predict``'s for the same texts (the session's
trained run, and a multilabel run), ``/health`` answers 503 "loading" from
the moment the port opens until the run is loaded, then 200 "ready"; a run
that fails to load stops the server with exit 2; a malformed request of any
kind is a 4xx with a JSON message, never a 500; bodies over ``--max-body``
are 413 (also chunked, also to a client that sends it all before reading), a
stalled body 408, requests past ``--max-queue`` 503 with Retry-After; many
concurrent clients get correct answers with no 5xx and no growth of the
server's memory; a bad RUN or a taken port is exit 2 before it listens, and
SIGINT or SIGTERM stops it with exit 0."""
from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from lancetnic_flow.runs.predict import Predictor  # noqa: E402
from lancetnic_flow.runs.serve import SLOTS, BadRequest, parse_request  # noqa: E402

from helpers import LABELS, WORDS, assert_user_error, built_run, cli  # noqa: E402

TEXTS = ["a late goal won the match", "", None, "the new phone has a faster chip", "völlig unbekannte Wörter"]


class Server:
    """``lancetnic-flow serve ARGS --port 0``, its output in a file, its URL read from it.
    From the moment the URL is printed it asks ``/health`` every 20 ms until it answers
    200 (``ready=False``: until the process ends or says the run failed), keeping each
    answer in ``seen``. With ``port``, ``/health`` (and ``/predict`` while it loads) is also
    asked from before the port opens (``first``), so a test can read what was answered
    while the run loaded."""

    def __init__(self, *args, cwd, ready: bool = True, env: dict | None = None, port: int = 0):
        self.log = open(os.path.join(cwd, f"serve-{time.monotonic_ns()}.log"), "w+")
        env = {**os.environ, "COLUMNS": "200", "PYTHONWARNINGS": "ignore", **(env or {})}
        self.first: list = []
        if port:
            self.asking = threading.Thread(target=self._ask_first, args=(port,), daemon=True)
            self.asking.start()
        self.proc = subprocess.Popen([sys.executable, "-m", "lancetnic_flow", "serve", *map(str, args),
                                      "--port", str(port)], cwd=cwd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.seen: list[tuple[int, dict, dict]] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            m = re.search(r"serving .* at (http://\S+) ", self.output())
            if m:
                self.url = m.group(1)
                if self._watch(deadline) or not ready:
                    return
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise AssertionError(f"no server within 120 s:\n{self.output()}")

    def _ask_first(self, port: int) -> None:
        """``first``: the answer to a ``/health`` asked from before the process listens on
        ``port`` (then ``/predict``'s, if it said loading), so it waits in the backlog from
        the moment the port opens. (Asked once the URL was printed, it came after a damaged
        run had failed and the server had gone, when this process waited 0.1 s for the CPU.)"""
        while getattr(self, "proc", None) is None or self.proc.poll() is None:
            try:
                self.first.append(ask(f"http://127.0.0.1:{port}/health", timeout=30))
                if self.first[0][0] == 503:     # still loading: a /predict now is refused as such
                    self.first.append(ask(f"http://127.0.0.1:{port}/predict", {"texts": ["w1 w2"]}, timeout=30))
                return
            except urllib.error.URLError as exc:
                if not isinstance(exc.reason, ConnectionRefusedError):
                    self.first.append(exc)
                    return
            time.sleep(0.002)   # not listening yet

    def _watch(self, deadline: float) -> bool:
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                self.seen.append(ask(self.url + "/health", timeout=10))
            except OSError:       # the process ended while it was asked
                continue
            if self.seen[-1][0] == 200:
                return True
            if self.seen[-1][2].get("status") == "failed":
                return False
            time.sleep(0.02)
        return False

    def output(self) -> str:
        with open(self.log.name) as f:
            return f.read()

    def stop(self, sig: int = signal.SIGINT) -> int:
        """SIGINT (Ctrl-C) or ``sig``, then its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        finally:
            self.log.close()

    def status(self, key: str) -> int:
        """A line of the process's /proc/PID/status, as a number (VmRSS in kB, Threads)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(next(line for line in f if line.startswith(key + ":")).split()[1])


def ask(url: str, body: bytes | dict | list | None = None, method: str | None = None,
        headers: dict | None = None, timeout: float = 60) -> tuple[int, dict, dict]:
    """(status, headers, JSON answer) of one HTTP request; a JSON-able ``body`` is sent as JSON."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, json.loads(e.read())


def request(url: str, body: bytes | dict | list | None = None, method: str | None = None) -> tuple[int, dict]:
    """(status, JSON answer) of one HTTP request; a JSON-able ``body`` is sent as JSON."""
    status, _, doc = ask(url, body, method)
    return status, doc


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def as_json(predictions: list) -> list:
    return json.loads(json.dumps(predictions))


@pytest.fixture(scope="module")
def server(trained_run, tmp_path_factory):
    s = Server(trained_run.run, "--max-batch", "50", cwd=tmp_path_factory.mktemp("serve"))
    yield s
    assert s.stop(signal.SIGTERM) == 0, s.output()   # as a supervisor stops it
    assert "Traceback" not in s.output(), s.output()


def test_predict_answers_what_the_predictor_answers_for_the_same_texts(server, trained_run):
    pred = Predictor(trained_run.run)
    status, got = request(server.url + "/predict", {"texts": TEXTS})
    assert status == 200 and got == {"predictions": as_json(pred.predict(TEXTS))}
    assert got["predictions"][0]["status"] == "ok" and got["predictions"][2]["status"] != "ok"
    status, got = request(server.url + "/predict", {"texts": TEXTS, "top_k": 3})
    assert status == 200 and got["predictions"] == as_json(pred.predict(TEXTS, top_k=3))
    assert len(got["predictions"][0]["top_labels"]) == 3
    # a threshold would change nothing for a run of one label a text: refused, not ignored
    status, got = request(server.url + "/predict", {"texts": TEXTS, "top_k": 3, "threshold": 0.3})
    assert status == 422 and "applies to a multilabel run" in got["error"]
    assert request(server.url + "/predict", {"texts": []}) == (200, {"predictions": []})


def test_health_says_the_run_its_task_and_labels(server, trained_run):
    status, got = request(server.url + "/health")
    assert status == 200
    assert got["status"] == "ready" and got["run"] == str(trained_run.run) and got["task"] == "classify"
    assert got["labels"] == Predictor(trained_run.run).labels and got["max_batch"] == 50


@pytest.mark.parametrize("body,status,needle", [
    (b"not json", 400, "not JSON"),
    ([1, 2], 422, "JSON object"),
    ({}, 422, 'no "texts"'),
    ({"text": ["a"]}, 422, "unknown field 'text'"),
    ({"texts": "a text"}, 422, "list of strings"),
    ({"texts": ["a", 3]}, 422, "texts[1]"),
    ({"texts": ["a"], "top_k": "2"}, 422, "top_k must be an integer"),
    ({"texts": ["a"], "top_k": True}, 422, "top_k must be an integer"),
    ({"texts": ["a"], "top_k": 0}, 422, "top_k must be ≥ 1"),
    ({"texts": ["a"], "threshold": "high"}, 422, "threshold must be a number"),
    ({"texts": ["a"], "threshold": 1.5}, 422, "between 0 and 1"),
    (b"", 400, "the body is empty"),
    (b"3", 422, "JSON object, got a number"),
    (b"null", 422, "JSON object, got null"),
    (b"true", 422, "JSON object, got a boolean"),
    (b'"texts"', 422, "JSON object, got a string"),
    ({"texts": {"a": 1}}, 422, "list of strings, got an object"),
    ({"texts": ["a", None, ["b"]]}, 422, "texts[2]"),
    ({"texts": [{"text": "a"}]}, 422, "texts[0]"),
    ({"texts": ["a"], "top_k": -1}, 422, "top_k must be ≥ 1"),
    ({"texts": ["a"], "top_k": 1.5}, 422, "top_k must be an integer"),
    ({"texts": ["a"], "threshold": None, "extra": 1}, 422, "unknown field 'extra'"),
    (b'{"texts": ["caf\xe9"]}', 400, "not UTF-8 (byte 0xe9"),
    (b'{"texts": ["a"}', 400, "not JSON"),
    (b"[" * 100_000 + b"]" * 100_000, 400, "nests lists or objects too deeply"),
    (b'{"texts": [' + b"[" * 5_000 + b"]" * 5_000 + b"]}", 400, "nests lists or objects too deeply"),
    (b'{"texts": ["a"], "top_k": 1' + b"0" * 5_000 + b"}", 400, "not JSON"),
    (b'{"texts": ["a"], "threshold": NaN}', 422, "between 0 and 1"),
    (b'{"texts": ["a"], "top_k": Infinity}', 422, "top_k must be an integer"),
    (b'{"texts": ["a", NaN]}', 422, "texts[1]"),
    (b'{"texts": NaN}', 422, "list of strings, got a number"),
    (b"NaN", 422, "JSON object, got a number"),
    (b'{"texts": ["a"], "threshold": 1e999}', 422, "between 0 and 1"),
    ({"texts": [None] * 100_000}, 413, "100,000 texts"),
])
def test_a_malformed_request_is_a_4xx_with_a_json_message(server, body, status, needle):
    got_status, got = request(server.url + "/predict", body)
    assert got_status == status and needle in got["error"], got


def test_a_lone_surrogate_text_is_answered_as_the_predictor_answers_it(server, trained_run):
    # JSON's "\ud800" was a 422 here where Predictor.predict, predict and explain read it as U+FFFD.
    pred = Predictor(trained_run.run)
    texts = ["goal \ud800 match", "\udc00"]
    body = json.dumps({"texts": texts}).encode()
    status, got = request(server.url + "/predict", body)
    assert status == 200 and got["predictions"] == as_json(pred.predict(texts))
    status, got = request(server.url + "/explain", body)
    assert status == 200 and got["explanations"] == as_json(pred.explain(texts))


def test_a_batch_over_max_batch_is_413_and_one_at_the_bound_is_answered(server):
    status, got = request(server.url + "/predict", {"texts": ["a text"] * 51})
    assert status == 413 and "51 texts" in got["error"] and "at most 50" in got["error"]
    status, got = request(server.url + "/predict", {"texts": ["a text"] * 50})
    assert status == 200 and len(got["predictions"]) == 50


def test_wrong_routes_and_methods_are_json_errors(server):
    status, got = request(server.url + "/nowhere")
    assert status == 404 and "GET /nowhere" in got["error"]
    status, got = request(server.url + "/predict/", {"texts": ["a text"]})   # was a 307 with no JSON
    assert status == 404 and "POST /predict/" in got["error"]
    status, got = request(server.url + "/predict")
    assert status == 405 and "POST /predict" in got["error"]
    for method in ("POST", "PUT", "DELETE"):
        status, got = request(server.url + "/health", b"{}", method=method)
        assert status == 405 and f"{method} /health" in got["error"] and "GET /health" in got["error"]


def test_concurrent_requests_each_get_their_own_answers_and_health_stays_answered(server, trained_run):
    pred = Predictor(trained_run.run)
    batches = [[f"{w} {i} match phone goal" for w in WORDS[i:i + 40]] for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        answers = pool.map(lambda b: request(server.url + "/predict", {"texts": b}), batches)
        healthy = [request(server.url + "/health")[0] for _ in range(5)]
        for batch, (status, got) in zip(batches, answers):
            assert status == 200 and got["predictions"] == as_json(pred.predict(batch))
    assert healthy == [200] * 5


def test_a_multilabel_run_answers_label_sets_at_its_own_thresholds_or_the_one_asked_for(tmp_path):
    pred = built_run("ScalpelMC", "multilabel", out=tmp_path / "run")
    s = Server(tmp_path / "run", "--quiet", cwd=tmp_path)
    try:
        texts = [" ".join(WORDS[i:i + 9]) for i in range(0, 50, 7)] + [None]
        answers = {}
        for threshold in (None, 0.5, 0.1):
            ask = {"texts": texts, **({"threshold": threshold} if threshold is not None else {})}
            status, got = request(s.url + "/predict", ask)
            assert status == 200
            assert got["predictions"] == as_json(pred.predict(texts, threshold=threshold))
            answers[threshold] = got["predictions"]
        assert answers[None] != answers[0.5]     # the run's own thresholds (helpers.THRESHOLDS) decide
        assert any(len(p["labels"] or []) > 1 for p in got["predictions"])
        assert request(s.url + "/health")[1]["task"] == "multilabel"
    finally:
        assert s.stop() == 0, s.output()


def test_a_bad_run_a_taken_port_or_a_bad_limit_is_exit_2_before_it_listens(tmp_path):
    assert_user_error(cli("serve", tmp_path / "nothing", cwd=tmp_path), "not a lancetnic_flow run folder")
    built_run("LancetMC", "regress", out=tmp_path / "run")
    for args, needle in [(["--max-batch", "0"], "--max-batch must be ≥ 1"),
                         (["--max-queue", "0"], "--max-queue must be ≥ 1"),
                         (["--max-connections", "0"], "--max-connections must be ≥ 1"),
                         (["--max-body", "lots"], "--max-body: 'lots' has no number"),
                         (["--max-body", "0"], "--max-body must be at least 1 byte"),
                         (["--body-timeout", "0"], "--body-timeout must be a number of seconds > 0")]:
        assert_user_error(cli("serve", tmp_path / "run", *args, cwd=tmp_path), needle)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        p = cli("serve", tmp_path / "run", "--port", taken.getsockname()[1], cwd=tmp_path, timeout=120)
    assert_user_error(p, "cannot listen on 127.0.0.1", "--port")


def test_parse_request_reads_the_options_and_refuses_what_the_run_cannot_do():
    assert parse_request(b'{"texts": ["a", null], "top_k": 2, "threshold": 0.25}', 10, multilabel=True) == \
        (["a", None], {"top_k": 2, "threshold": 0.25})
    with pytest.raises(BadRequest, match="threshold applies to a multilabel run") as e:   # it was ignored
        parse_request(b'{"texts": ["a"], "threshold": 0.25}', 10)
    assert e.value.status == 422
    assert parse_request(b'{"texts": []}', 10) == ([], {"top_k": None, "threshold": None})   # the run's own
    with pytest.raises(BadRequest, match="regression") as e:
        parse_request(b'{"texts": ["a"], "top_k": 1}', 10, classifies=False)
    assert e.value.status == 422


def test_without_the_serve_extra_the_error_names_it(monkeypatch):
    from lancetnic_flow.errors import UserError
    from lancetnic_flow.runs.serve import require_serve

    monkeypatch.setitem(sys.modules, "uvicorn", None)
    with pytest.raises(UserError) as e:
        require_serve()
    assert "uvicorn is not installed" in e.value.message and "lancetnic_flow[serve]" in e.value.hint


# ------------------------------------------------ readiness, limits, and many clients at once
#
# One server of a run built in a second (helpers.built_run), with small limits. Its
# start is watched from the moment the port opens (Server.seen): the run loads in a
# thread, after the process has printed its URL, and loading it (torch's import, the
# weights read and checked) takes seconds, so the first answers come while it loads.

MAX_BODY = 2**20
# What the server holds, not what its allocators keep for later: Arrow's mimalloc returns
# freed pages on a timer and glibc raises its mmap threshold after each large free, so with
# their defaults RSS swings by ±25 MiB from one wave to the next with nothing held; with
# these it moves by 0.1 MiB.
MALLOC = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072", "MALLOC_ARENA_MAX": "1",
          "ARROW_DEFAULT_MEMORY_POOL": "system"}
MAX_QUEUE = 40
# Only the 408 tests' server (``hasty``) waits this little for a byte. The other bounds are
# tested on a server that waits long: with 2 s, a test process held off the CPU for 2 s on a
# busy host (40 requests held while the queue fills, a chunked body sent in pieces) had its
# requests answered 408 instead of what the test was about.
BODY_TIMEOUT = 2
PATIENT = 600
# Past the 32 clients of the load test and the 40 held requests of the --max-queue one.
MAX_CONNECTIONS = 48


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("served")
    built_run("ScalpelMC", "classify", out=tmp / "run")
    return tmp / "run"


@pytest.fixture(scope="module")
def bounded(built):
    yield from _bounded(built, PATIENT)


@pytest.fixture(scope="module")
def hasty(built):
    """The same limits, and a body (or head) whose bytes stop for BODY_TIMEOUT s is 408."""
    yield from _bounded(built, BODY_TIMEOUT)


def _bounded(built, body_timeout: float):
    s = Server(built, "--quiet", "--max-batch", "50", "--max-body", "1MiB", "--max-queue", MAX_QUEUE,
               "--body-timeout", body_timeout, "--max-connections", MAX_CONNECTIONS, cwd=built.parent, env=MALLOC,
               port=free_port())
    s.asking.join(60)
    yield s
    assert s.stop(signal.SIGTERM) == 0, s.output()
    assert "Traceback" not in s.output(), s.output()


def texts_of(seed: int, n: int, words: int) -> list[str]:
    return [" ".join(WORDS[(seed * 7 + i * 3 + k) % len(WORDS)] for k in range(words)) for i in range(n)]


def test_health_answers_503_loading_from_the_moment_the_port_opens_then_200_ready(bounded, built):
    # Asked from before the port opened: answered at once, while the run loads. The asks
    # made once the "serving" line was read may come after the load on a busy host.
    assert len(bounded.first) == 2, bounded.first
    statuses = [status for status, _, _ in bounded.first[:1] + bounded.seen]
    assert statuses[0] == 503 and statuses[-1] == 200, bounded.seen
    assert statuses == [503] * (len(statuses) - 1) + [200]     # loading, then ready, never back
    for status, headers, doc in (bounded.first[:1] + bounded.seen)[:-1]:
        assert doc == {"status": "loading", "run": str(built)} and headers["retry-after"] == "1"
    status, headers, doc = bounded.first[1]
    assert status == 503 and "still loading" in doc["error"] and headers["retry-after"] == "1"
    ready = bounded.seen[-1][2]
    assert ready["status"] == "ready" and ready["labels"] == LABELS and ready["max_queue"] == MAX_QUEUE
    assert re.search(r"serving .*, loading the run\n(.*\n)*ready: .* loaded in [\d.]+ s", bounded.output())


def damaged_copy(built, tmp_path):
    """A copy of the run ``built`` whose weights are cut to 1,000 bytes: found only once it loads."""
    run = tmp_path / "damaged"
    run.mkdir()
    for f in built.iterdir():
        (run / f.name).write_bytes(f.read_bytes())
    with open(run / "model.safetensors", "r+b") as f:
        f.truncate(1000)
    return run


def test_a_run_that_fails_to_load_answers_loading_then_exits_2_naming_the_file(built, tmp_path):
    run = damaged_copy(built, tmp_path)
    s = Server(run, cwd=tmp_path, ready=False, port=free_port())
    try:
        assert s.proc.wait(timeout=30) == 2, s.output()        # not a server left answering "failed"
    finally:
        s.stop()
    s.asking.join(30)
    assert s.first and s.first[0][0] == 503 and s.first[0][2] == {"status": "loading", "run": str(run)}, s.first
    assert all(status == 503 for status, _, _ in s.seen), s.seen          # never ready
    out = s.output()
    assert "model.safetensors is damaged" in out and "truncated" in out and out.count("error:") == 1, out
    assert "Traceback" not in out and "ready:" not in out, out


def test_the_served_run_starts_loading_only_once_the_port_answers_so_a_damaged_one_still_says_loading(
        built, tmp_path):
    """The first request made when the "serving" line is printed waits in the backlog: it was
    left unanswered when the load, begun before the server accepted, failed first."""
    from lancetnic_flow.runs.serve import Model, app, listen, serve

    run = damaged_copy(built, tmp_path)
    sock = listen("127.0.0.1", 0)
    url = "http://127.0.0.1:%d/health" % sock.getsockname()[1]

    class Probed(Model):
        answers: list = []
        loading = threading.Event()

        def load(self):
            self.loading.set()
            self.answers.append(ask(url, timeout=30))      # the server answers while it loads
            return super().load()

    model = Probed(str(run))
    application = app(model, wait=None)
    assert not model.loading.wait(1.0), "the load began before the server was started"
    server = threading.Thread(target=serve, args=(application, sock), kwargs={"log_level": "error", "model": model})
    server.start()
    server.join(timeout=60)
    assert not server.is_alive(), "a server whose run failed to load went on serving"
    assert model.answers and model.answers[0][0] == 503, model.answers
    assert model.answers[0][2] == {"status": "loading", "run": str(run)}
    assert "is damaged" in str(model.error) and "truncated" in str(model.error)


def test_many_concurrent_clients_get_right_answers_no_5xx_and_the_servers_memory_stays_flat(bounded, built):
    pred = Predictor(str(built))
    # ~600 KB bodies that are quick to score: a few words and one long one per text.
    big = {seed: {"texts": [f"{t} {'x' * 12000}" for t in texts_of(seed, 50, 2)]} for seed in range(8)}
    valid = [{"texts": texts_of(seed, 1 + seed * 6, 9)} for seed in range(8)] + [
        {"texts": texts_of(3, 5, 4) + ["", None], "top_k": 2}, {"texts": texts_of(5, 3, 30), "top_k": 9}]
    refused = [(b"not json", 400), (b'{"texts": ["caf\xe9"]}', 400), (b"[" * 3000 + b"]" * 3000, 400),
               ({"texts": "one text"}, 422), ({"texts": ["a", 7]}, 422), ({"texts": ["a"], "top_k": 0}, 422),
               ({"text": ["a"]}, 422), ({"texts": ["w1"] * 51}, 413)]
    empty = {"texts": []}
    # The server ranks at most every label (test_top_k_past_the_labels...).
    answers = {id(b): {"predictions": as_json(pred.predict(b["texts"], top_k=min(b.get("top_k") or 0, len(LABELS))
                                                           or None))} for b in [*big.values(), *valid]}
    answers[id(empty)] = {"predictions": []}

    def job(body: Any, status: int = 200, method: str = "POST", path: str = "/predict") -> tuple:
        """(method, path, body bytes, status, answer), encoded once, before the clients start."""
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        return method, path, data, status, answers.get(id(body)) if path == "/predict" and status == 200 else None

    jobs = [[job(big[c % 8]), job(big[(c + 3) % 8]), *[job(valid[(c + i) % len(valid)]) for i in range(2)],
             job(empty), job(None, 200, "GET", "/health"), job(None, 405, "GET"), job(None, 404, "GET", "/nowhere"),
             *[job(body, status) for body, status in refused[c % 3::3]]] for c in range(32)]

    def client(c: int) -> list[str]:
        """One client's requests over one keep-alive connection: what went wrong, if anything."""
        wrong = []
        conn = http.client.HTTPConnection(urlsplit(bounded.url).hostname, urlsplit(bounded.url).port, timeout=60)
        try:
            for method, path, data, status, want in jobs[c]:
                conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                got = json.loads(r.read())
                if r.status != status or (want is not None and got != want) \
                        or (status != 200 and not isinstance(got.get("error"), str)):
                    wrong.append(f"{method} {path} {str(data)[:60]}: {r.status} {str(got)[:200]}")
        finally:
            conn.close()
        return wrong

    memory, threads = [], []
    t0 = time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        # Wave 0 warms the server up (its allocator's arenas, the worker threads); waves 1-3 are measured.
        for wave in range(4):
            wrong = [w for ws in pool.map(client, range(32)) for w in ws]
            assert not wrong, f"wave {wave}: {len(wrong)} wrong answers, e.g.\n" + "\n".join(wrong[:5])
            memory.append(bounded.status("VmRSS") / 1024)
            threads.append(bounded.status("Threads"))
    took = time.monotonic() - t0
    # Each wave is 32 clients × 11 or 12 requests, ~250 of them answered by Predictor or parse_request,
    # with ~40 MB of bodies. From wave 1 to 3 the RSS moves by 0.1 MiB (MALLOC); a server that kept each
    # request's body grew by 74 MiB, one that kept 16 KB per request by 8 MiB.
    assert memory[3] - memory[1] < 10, f"RSS after each wave, MiB: {memory} ({took:.1f} s)"
    assert threads[3] <= threads[1] + SLOTS, f"threads after each wave: {threads}"
    assert "Traceback" not in bounded.output()


def test_top_k_past_the_labels_ranks_each_label_once_and_cannot_hold_the_server(bounded, built):
    texts = texts_of(1, 4, 6)
    want = as_json(Predictor(str(built)).predict(texts, top_k=len(LABELS)))
    status, got = request(bounded.url + "/predict", {"texts": texts, "top_k": len(LABELS) + 2})
    assert status == 200 and got["predictions"] == want
    assert all(sorted(p["top_labels"]) == sorted(LABELS) for p in got["predictions"])
    # Work that grew with top_k held the lock of every prediction for hours and took the memory.
    t0 = time.monotonic()
    status, _, got = ask(bounded.url + "/predict", {"texts": texts, "top_k": 10**9}, timeout=30)
    assert status == 200 and got["predictions"] == want and time.monotonic() - t0 < 30


def test_a_body_over_max_body_is_413_with_a_message_whole_chunked_or_sent_all_before_reading(bounded, built):
    big = json.dumps({"texts": ["w1 w2 " * 100_000] * 5}).encode()            # 3 MiB, Content-Length
    assert len(big) > 2 * MAX_BODY
    # urllib sends the whole body, with `Connection: close`, before it reads: the answer still comes.
    status, got = request(bounded.url + "/predict", big)
    assert status == 413 and f"{len(big):,} bytes" in got["error"] and "--max-body" in got["error"]
    conn = http.client.HTTPConnection(urlsplit(bounded.url).hostname, urlsplit(bounded.url).port, timeout=60)
    try:
        conn.request("POST", "/predict", body=iter([big[i:i + 65536] for i in range(0, len(big), 65536)]),
                     headers={"Content-Type": "application/json"}, encode_chunked=True)   # no Content-Length
        r = conn.getresponse()
        assert r.status == 413 and "over 1,048,576 bytes" in json.loads(r.read())["error"]
        # The same connection answers the next request: the refused body was read to its end.
        conn.request("POST", "/predict", body=json.dumps({"texts": ["w1 w2"]}), headers={})
        r = conn.getresponse()
        assert r.status == 200 and len(json.loads(r.read())["predictions"]) == 1
    finally:
        conn.close()
    one = " ".join(WORDS) * 2_500                                              # one text of ~0.9 MiB
    status, got = request(bounded.url + "/predict", {"texts": [one]})
    assert status == 200 and got["predictions"] == as_json(Predictor(str(built)).predict([one]))


def test_wrong_content_types_are_read_as_json_and_a_body_that_is_not_json_names_its_content_type(bounded):
    body = json.dumps({"texts": ["w1 w2 w3"]}).encode()
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):     # curl -d sends the latter
        status, _, got = ask(bounded.url + "/predict", body, headers={"Content-Type": content_type})
        assert status == 200 and got["predictions"][0]["status"] == "ok"
    status, _, got = ask(bounded.url + "/predict", b"texts=w1+w2",
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 400 and "not JSON" in got["error"] and "x-www-form-urlencoded" in got["error"]


def _stalled(url: str, body: bytes, sent: int) -> socket.socket:
    """A connection that has sent a /predict request's headers and ``sent`` bytes of its body."""
    u = urlsplit(url)
    sock = socket.create_connection((u.hostname, u.port), timeout=30)
    sock.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body[:sent])
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict]:
    """(status, JSON answer) read from a :func:`_stalled` connection."""
    with sock.makefile("rb") as f:     # closed, else it keeps the connection open after sock.close()
        status = int(f.readline().split()[1])
        length = 0
        while (line := f.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return status, json.loads(f.read(length))


def test_past_max_queue_a_request_is_503_with_retry_after_and_the_queued_ones_are_answered(bounded, built):
    body = json.dumps({"texts": texts_of(2, 3, 5)}).encode()
    held = [_stalled(bounded.url, body, 10) for _ in range(MAX_QUEUE)]
    try:
        deadline = time.monotonic() + 30
        while request(bounded.url + "/health")[1]["queued"] < MAX_QUEUE:
            assert time.monotonic() < deadline, "the stalled requests were never all taken"
            time.sleep(0.02)
        status, headers, got = ask(bounded.url + "/predict", body, timeout=10)      # at once, not queued
        assert status == 503 and "busy" in got["error"] and "--max-queue" in got["error"]
        assert headers["retry-after"] == "1"
        assert request(bounded.url + "/health")[0] == 200                       # the probe still answers
        for sock in held:
            sock.sendall(body[10:])
        want = {"predictions": as_json(Predictor(str(built)).predict(texts_of(2, 3, 5)))}
        assert [_answer(sock) for sock in held] == [(200, want)] * MAX_QUEUE
    finally:
        for sock in held:
            sock.close()
    assert request(bounded.url + "/predict", body) == (200, want)


def test_a_stalled_body_is_408_after_body_timeout_and_holds_no_other_request_up(hasty):
    body = json.dumps({"texts": ["w1 w2"]}).encode()
    t0 = time.monotonic()              # before the connection: the server's wait cannot begin earlier
    sock = _stalled(hasty.url, body, 5)
    try:
        assert request(hasty.url + "/predict", body)[0] == 200                    # answered meanwhile
        status, got = _answer(sock)
        assert status == 408 and f"{BODY_TIMEOUT} s" in got["error"]
        assert BODY_TIMEOUT - 0.5 <= time.monotonic() - t0 < BODY_TIMEOUT + 10
    finally:
        sock.close()
    assert request(hasty.url + "/health")[1]["queued"] == 0


def _raw(url: str, data: bytes) -> tuple[int, dict, bytes]:
    """(status, headers, body) of what the server answers to ``data`` sent as is on a
    fresh connection, read until the server closes it."""
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=BODY_TIMEOUT + 20) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict((k.strip().lower(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:]))
    return int(lines[0].split()[1]), headers, body


# Requests uvicorn's HTTP parser refuses before the app sees them: it answered each with a
# plain-text "Invalid HTTP request received." (431 for a head h11 did not see end in 16 KiB).
NOT_HTTP = {
    "not a request line": b"HELLO\r\n\r\n",
    "no Host header": b"GET /health HTTP/1.1\r\n\r\n",
    "a header without a colon": b"GET /health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
    "a Content-Length that is not a number": b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    "a negative Content-Length": b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    "two Content-Lengths that differ": b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                                      b"Content-Length: 6\r\n\r\n{}",
    "a Transfer-Encoding other than chunked": b"POST /predict HTTP/1.1\r\nHost: x\r\n"
                                               b"Transfer-Encoding: gzip\r\n\r\n",
    "a chunk size that is not hexadecimal": b"POST /predict HTTP/1.1\r\nHost: x\r\n"
                                            b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
    "a head not ended within 16 KiB": b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000,
    # sent whole in one read, h11 parsed a 60 KB head and answered 200
    "a whole head over 16 KiB": b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 60_000 + b"\r\n\r\n",
    "a control character in a header": b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
}


@pytest.mark.parametrize("case", NOT_HTTP)
def test_a_request_the_http_parser_refuses_is_a_4xx_with_a_json_message_not_a_plain_text_page(bounded, case):
    status, headers, body = _raw(bounded.url, NOT_HTTP[case])
    assert 400 <= status < 500 and headers["content-type"] == "application/json", (status, headers, body)
    error = json.loads(body)["error"]
    assert "not a valid HTTP request" in error and "POST /predict" in error, error
    # The request in flight left nothing held.
    assert request(bounded.url + "/health")[1]["queued"] == 0


def test_a_request_head_that_never_ends_is_408_after_body_timeout_and_frees_its_connection(hasty):
    t0 = time.monotonic()
    status, headers, body = _raw(hasty.url, b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Le")
    assert status == 408 and headers["content-type"] == "application/json"
    assert f"{BODY_TIMEOUT} s" in json.loads(body)["error"]
    assert BODY_TIMEOUT - 0.5 <= time.monotonic() - t0 < BODY_TIMEOUT + 10


def test_past_max_connections_a_request_is_503_with_retry_after_in_json_and_a_freed_place_is_used(bounded):
    u = urlsplit(bounded.url)
    # Connections that send nothing hold a place each (until --body-timeout closes them: PATIENT s here).
    idle = [socket.create_connection((u.hostname, u.port), timeout=10) for _ in range(MAX_CONNECTIONS)]
    try:
        status, headers, body = _raw(bounded.url, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 503 and headers["retry-after"] == "1" and headers["content-type"] == "application/json"
        error = json.loads(body)["error"]
        assert "busy" in error and "--max-connections" in error, error
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 60      # the server sees the closes when its loop gets the CPU
    while (got := ask(bounded.url + "/predict", {"texts": ["w1 w2"]}))[0] != 200:
        assert got[0] == 503 and time.monotonic() < deadline, got
        time.sleep(0.05)
