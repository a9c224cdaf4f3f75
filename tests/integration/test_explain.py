"""``lancetnic-flow explain RUN --text ...`` (docs/cli.md), ``serve``'s
``POST /explain`` (docs/serving.md) and the run folder's ``top_terms.csv``,
with the real CLI on a ``make-data`` corpus: a run trained by ``train``
explains each text with terms whose contributions, the rest and the bias sum
to the logit of the label it predicts (printed, and as JSON), without
importing torch; its top_terms.csv names each class's strongest terms (the
hashed buckets by their sampled terms), words of that class; the server's
explanations are the Predictor's; bad input (no text, an unknown run, a bad
--top or --label, an empty list, a sequence model) is exit 2 or a 4xx."""
from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lancetnic_flow.runs.predict import Predictor

from helpers import CLUSTER, assert_user_error, charts_drawn, cli

TEXTS = ["the match ended with a late goal", "a new phone with a faster chip"]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A make-data corpus and a default (LinearSVM, hashed) run trained on it by the CLI."""
    tmp = tmp_path_factory.mktemp("explain")
    p = cli("make-data", "c.csv", "--rows", "1500", cwd=tmp)
    assert p.returncode == 0, p.stdout + p.stderr
    p = cli("train", "c.csv", "--epochs", "2", "--out", "runs", "--name", "lin", *CLUSTER, cwd=tmp)
    assert p.returncode == 0, p.stdout + p.stderr
    charts_drawn(p.stdout + p.stderr)
    return tmp


def _texts_of(made: Path, n: int = 4) -> list[str]:
    with open(made / "c.csv") as fh:
        return [r["text"] for _, r in zip(range(n), csv.DictReader(fh))]


def test_explain_prints_each_texts_top_terms_and_says_how_they_add_up(made):
    p = cli("explain", "runs/lin", "--text", TEXTS[0], "--text", "", "--top", "3", cwd=made)
    assert p.returncode == 0, p.stdout + p.stderr
    first, *rest = p.stdout.splitlines()
    assert "→" in first and "logit" in first and "bias" in first and "(exact)" in first
    assert 1 <= sum(line.startswith("   ") and "× weight" in line for line in rest) <= 3
    assert "not predicted (empty_text)" in p.stdout


def test_explain_json_log_holds_an_explained_event_per_text_and_to_stdout_only_them(made):
    # --json-log FILE was written empty, and to stdout it left the console's lines there
    p = cli("explain", "runs/lin", "--text", TEXTS[0], "--text", TEXTS[1], "--json", "--json-log", "log.jsonl",
            cwd=made)
    assert p.returncode == 0, p.stdout + p.stderr
    printed = [json.loads(line) for line in p.stdout.splitlines()]
    logged = [json.loads(line) for line in (made / "log.jsonl").read_text().splitlines()]
    assert [e["event"] for e in logged] == ["explained", "explained"]
    assert [{k: v for k, v in e.items() if k not in ("event", "time", "elapsed")} for e in logged] == printed
    p = cli("explain", "runs/lin", "--text", TEXTS[0], "--json-log", cwd=made)
    assert p.returncode == 0, p.stdout + p.stderr
    [event] = [json.loads(line) for line in p.stdout.splitlines()]
    assert event["event"] == "explained" and event["text"] == TEXTS[0] and event["terms"]


def test_explain_json_sums_to_the_logit_of_the_predicted_label(made):
    texts = _texts_of(made) + TEXTS
    args = [a for t in texts for a in ("--text", t)]
    p = cli("explain", "runs/lin", *args, "--top", "5", "--json", cwd=made)
    assert p.returncode == 0, p.stdout + p.stderr
    docs = [json.loads(line) for line in p.stdout.splitlines()]
    assert [d["text"] for d in docs] == texts
    predicted = Predictor(str(made / "runs/lin")).predict(texts)
    for doc, pred in zip(docs, predicted):
        assert doc["status"] == "ok" and doc["method"] == "exact" and doc["label"] == pred["label"]
        assert doc["probability"] == pytest.approx(pred["probability"], rel=1e-5)
        total = sum(t["contribution"] for t in doc["terms"]) + doc["rest"] + doc["bias"]
        assert total == pytest.approx(doc["logit"], abs=1e-4)
        assert 0 < len(doc["terms"]) <= 5 and doc["terms_total"] >= len(doc["terms"])
        for t in doc["terms"]:   # terms read from the text itself
            assert t["term"].split(" ")[0] in doc["text"].lower()
    # Any label's score decomposes, not only the predicted one's.
    p = cli("explain", "runs/lin", "--text", TEXTS[0], "--label", "business", "--json", cwd=made)
    doc = json.loads(p.stdout)
    assert doc["label"] == "business"
    assert sum(t["contribution"] for t in doc["terms"]) + doc["rest"] + doc["bias"] == pytest.approx(doc["logit"],
                                                                                                     abs=1e-4)


def test_a_linear_run_is_explained_without_importing_torch(made):
    code = ("import sys; from lancetnic_flow.runs.predict import Predictor; "
            f"d = Predictor('runs/lin').explain({TEXTS!r}); assert d[0]['terms'], d; "
            "assert 'torch' not in sys.modules, 'torch imported'; print('ok')")
    p = subprocess.run([sys.executable, "-c", code], cwd=made, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr


def test_top_terms_csv_names_each_classes_strongest_terms(made):
    run = made / "runs/lin"
    metrics = json.loads((run / "metrics.json").read_text())
    assert {"top_terms.csv", "top_terms.png"} <= set(metrics["plots"])
    assert (run / "top_terms.png").stat().st_size > 1000
    with open(run / "top_terms.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["class", "rank", "terms", "weight", "feature"]
    labels = metrics["labels"]
    assert list(dict.fromkeys(r["class"] for r in rows)) == labels
    # Class text counts: which class a word is most often in.
    where: dict[str, Counter] = {}
    with open(made / "c.csv") as fh:
        for r in csv.DictReader(fh):
            for w in set(r["text"].lower().replace(",", " ").replace(".", " ").split()):
                where.setdefault(w, Counter())[r["label"]] += 1
    for label in labels:
        mine = [r for r in rows if r["class"] == label]
        assert [int(r["rank"]) for r in mine] == list(range(1, 21))
        weights = [float(r["weight"]) for r in mine]
        assert weights == sorted(weights, reverse=True) and weights[0] > 0
        named = [r["terms"] for r in mine if not r["terms"].startswith("#")]
        assert len(named) >= 15, mine   # the buckets' sampled terms name most of them
        # A class's strongest single words are words of its rows: most often in that class.
        words = [t.split(" | ")[0] for t in named if " " not in t.split(" | ")[0]][:5]
        assert words and sum(where[w].most_common(1)[0][0] == label for w in words if w in where) >= len(words) - 1


def test_explain_refuses_bad_input_with_exit_2(made, tmp_path):
    assert_user_error(cli("explain", "runs/lin", cwd=made), "--text")
    assert_user_error(cli("explain", "runs/none", "--text", "x", cwd=made), "not a lancetnic_flow run folder")
    assert_user_error(cli("explain", "runs/lin", "--text", "x", "--top", "0", cwd=made), "--top")
    assert_user_error(cli("explain", "runs/lin", "--text", "x", "--label", "weather", cwd=made),
                      "'weather' is not one of this run's labels")


def test_a_sequence_run_says_explain_is_not_available(made):
    p = cli("train", "c.csv", "--epochs", "1", "--model", "LancetMC", "--out", "runs", "--name", "seq", *CLUSTER,
            cwd=made)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not (made / "runs/seq/top_terms.csv").exists()
    assert_user_error(cli("explain", "runs/seq", "--text", "x", cwd=made), "not available for a LancetMC run",
                      "sequence model", "hint:")


def test_serve_explains_as_the_predictor_does_and_refuses_bad_requests_with_4xx(made):
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    from test_serve import Server, ask

    server = Server("runs/lin", cwd=made)
    try:
        assert "POST /explain" in server.output()
        status, _, doc = ask(server.url + "/explain", {"texts": TEXTS + [None], "top": 4})
        assert status == 200, doc
        want = json.loads(json.dumps(Predictor(str(made / "runs/lin")).explain(TEXTS + [None], top=4)))
        assert doc["explanations"] == want
        assert doc["explanations"][2]["status"] == "empty_text"
        status, _, doc = ask(server.url + "/explain", {"texts": TEXTS[:1], "label": "tech"})
        assert status == 200 and doc["explanations"][0]["label"] == "tech"
        for body, needle in [({"texts": []}, "texts is empty"), ({"texts": ["x"], "label": "weather"}, "weather"),
                             ({"texts": ["x"], "top": 0}, "top must be"), ({"text": ["x"]}, "unknown field"),
                             ({"texts": "x"}, "list of strings")]:
            status, _, doc = ask(server.url + "/explain", body)
            assert status == 422 and needle in doc["error"], (body, status, doc)
        status, _, doc = ask(server.url + "/explain", method="GET")
        assert status == 405 and "POST /explain" in doc["error"]
    finally:
        assert server.stop(signal.SIGTERM) == 0, server.output()
    assert "Traceback" not in server.output(), server.output()
