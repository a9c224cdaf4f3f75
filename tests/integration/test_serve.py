"""``lancetnic-flow serve RUN`` (docs/serving.md), as a real server process on a
free port, asked with a real HTTP client (urllib): its answers are
``Predictor.predict``'s for the same texts (the session's trained run, and a
multilabel run), ``/health`` says what it serves, a malformed request is a
4xx with a JSON message, a batch over ``--max-batch`` is 413, concurrent
requests each get their own answers, a bad RUN or a taken port is exit 2
before it listens, and SIGINT or SIGTERM stops it with exit 0."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from lancetnic_flow.runs.predict import Predictor  # noqa: E402
from lancetnic_flow.runs.serve import BadRequest, parse_request  # noqa: E402

from helpers import WORDS, assert_user_error, built_run, cli  # noqa: E402

TEXTS = ["a late goal won the match", "", None, "the new phone has a faster chip", "völlig unbekannte Wörter"]


class Server:
    """``lancetnic-flow serve ARGS --port 0``, its output in a file, its URL read from it."""

    def __init__(self, *args, cwd):
        self.log = open(os.path.join(cwd, f"serve-{time.monotonic_ns()}.log"), "w+")
        env = {**os.environ, "COLUMNS": "200", "PYTHONWARNINGS": "ignore"}
        self.proc = subprocess.Popen([sys.executable, "-m", "lancetnic_flow", "serve", *map(str, args), "--port", "0"],
                                     cwd=cwd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            m = re.search(r"serving .* at (http://\S+) ", self.output())
            if m and self._healthy(m.group(1)):
                self.url = m.group(1)
                return
            assert self.proc.poll() is None, self.output()
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"no server within 120 s:\n{self.output()}")

    def output(self) -> str:
        with open(self.log.name) as f:
            return f.read()

    @staticmethod
    def _healthy(url: str) -> bool:
        try:
            return request(url + "/health")[0] == 200
        except OSError:
            return False

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


def request(url: str, body: bytes | dict | list | None = None, method: str | None = None) -> tuple[int, dict]:
    """(status, JSON answer) of one HTTP request; a JSON-able ``body`` is sent as JSON."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def server(trained_run, tmp_path_factory):
    s = Server(trained_run.run, "--max-batch", "50", cwd=tmp_path_factory.mktemp("serve"))
    yield s
    assert s.stop(signal.SIGTERM) == 0, s.output()   # as a supervisor stops it
    assert "Traceback" not in s.output(), s.output()


def test_predict_answers_what_the_predictor_answers_for_the_same_texts(server, trained_run):
    pred = Predictor(trained_run.run)
    status, got = request(server.url + "/predict", {"texts": TEXTS})
    assert status == 200 and got == {"predictions": json.loads(json.dumps(pred.predict(TEXTS)))}
    assert got["predictions"][0]["status"] == "ok" and got["predictions"][2]["status"] != "ok"
    status, got = request(server.url + "/predict", {"texts": TEXTS, "top_k": 3, "threshold": 0.3})
    assert status == 200 and got["predictions"] == json.loads(json.dumps(pred.predict(TEXTS, top_k=3)))
    assert len(got["predictions"][0]["top_labels"]) == 3
    assert request(server.url + "/predict", {"texts": []}) == (200, {"predictions": []})


def test_health_says_the_run_its_task_and_labels(server, trained_run):
    status, got = request(server.url + "/health")
    assert status == 200
    assert got["status"] == "ok" and got["run"] == str(trained_run.run) and got["task"] == "classify"
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
])
def test_a_malformed_request_is_a_4xx_with_a_json_message(server, body, status, needle):
    got_status, got = request(server.url + "/predict", body)
    assert got_status == status and needle in got["error"], got


def test_a_batch_over_max_batch_is_413_and_one_at_the_bound_is_answered(server):
    status, got = request(server.url + "/predict", {"texts": ["a text"] * 51})
    assert status == 413 and "51 texts" in got["error"] and "at most 50" in got["error"]
    status, got = request(server.url + "/predict", {"texts": ["a text"] * 50})
    assert status == 200 and len(got["predictions"]) == 50


def test_wrong_routes_and_methods_are_json_errors(server):
    assert request(server.url + "/nowhere")[0] == 404
    status, got = request(server.url + "/predict")
    assert status == 405 and "POST /predict" in got["error"]


def test_concurrent_requests_each_get_their_own_answers_and_health_stays_answered(server, trained_run):
    pred = Predictor(trained_run.run)
    batches = [[f"{w} {i} match phone goal" for w in WORDS[i:i + 40]] for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        answers = pool.map(lambda b: request(server.url + "/predict", {"texts": b}), batches)
        healthy = [request(server.url + "/health")[0] for _ in range(5)]
        for batch, (status, got) in zip(batches, answers):
            assert status == 200 and got["predictions"] == json.loads(json.dumps(pred.predict(batch)))
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
            assert got["predictions"] == json.loads(json.dumps(pred.predict(texts, threshold=threshold)))
            answers[threshold] = got["predictions"]
        assert answers[None] != answers[0.5]     # the run's own thresholds (helpers.THRESHOLDS) decide
        assert any(len(p["labels"] or []) > 1 for p in got["predictions"])
        assert request(s.url + "/health")[1]["task"] == "multilabel"
    finally:
        assert s.stop() == 0, s.output()


def test_a_bad_run_a_taken_port_or_a_bad_max_batch_is_exit_2_before_it_listens(tmp_path):
    assert_user_error(cli("serve", tmp_path / "nothing", cwd=tmp_path), "not a lancetnic_flow run folder")
    built_run("LancetMC", "regress", out=tmp_path / "run")
    assert_user_error(cli("serve", tmp_path / "run", "--max-batch", "0", cwd=tmp_path), "--max-batch must be ≥ 1")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        p = cli("serve", tmp_path / "run", "--port", taken.getsockname()[1], cwd=tmp_path, timeout=120)
    assert_user_error(p, "cannot listen on 127.0.0.1", "--port")


def test_parse_request_reads_the_options_and_refuses_top_k_for_a_regression_run():
    assert parse_request(b'{"texts": ["a", null], "top_k": 2, "threshold": 0.25}', 10) == \
        (["a", None], {"top_k": 2, "threshold": 0.25})
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
