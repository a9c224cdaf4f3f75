"""The request parsing of ``serve`` (runs/serve.py), without a server."""
from __future__ import annotations

import json

from lancetnic_flow.runs.serve import parse_explain, parse_request


def test_a_lone_surrogate_in_a_text_is_read_as_u_fffd_as_the_python_api_reads_it():
    # It was a 422 where Predictor.predict and `predict` read the same text as U+FFFD.
    body = b'{"texts": ["a", "\\ud800 b", "\\udc00", null, "\\ud83d\\ude00 ok"]}'
    texts, _ = parse_request(body, 10, True, 2, False)
    assert texts == ["a", "\ufffd b", "\ufffd", None, "\U0001f600 ok"]
    explained, _ = parse_explain(body, 10, ["x", "y"])
    assert explained == texts
    json.dumps(texts, ensure_ascii=False).encode("utf-8")   # every answer holding them encodes


def test_a_predict_answer_counts_the_texts_a_sequence_run_read_only_to_max_len(tmp_path):
    """/predict answers ``"longer_than_max_len": N`` beside the predictions when a sequence run
    read N texts only to its --max-len (the count predict --input notes), and no such field
    when it read every text whole; the server says no Python warning per request."""
    import warnings

    from lancetnic_flow.runs.predict import Predictor
    from lancetnic_flow.runs.serve import Model, Service
    from .test_predict import LONG_TEXTS, sequence_run

    service = Service(Model(Predictor(sequence_run(tmp_path / "run"))), 100, 1 << 20, 10, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cut = json.loads(service.answer(json.dumps({"texts": LONG_TEXTS}).encode(), "application/json"))
        whole = json.loads(service.answer(json.dumps({"texts": ["cat dog", None]}).encode(), "application/json"))
    assert cut["longer_than_max_len"] == 2 and len(cut["predictions"]) == 5
    assert set(whole) == {"predictions"}


def test_an_explain_label_in_another_spelling_of_a_value_the_run_holds_is_the_runs():
    """`{"label": "1"}` for a run trained on a CSV's 1.0 was a 422, where `explain --label 1` explains 1.0."""
    import pytest

    from lancetnic_flow.runs.serve import BadRequest

    body = json.dumps({"texts": ["a"], "label": "1"}).encode()
    assert parse_explain(body, 10, ["1.0", "2.0"])[1]["label"] == "1.0"
    assert parse_explain(json.dumps({"texts": ["a"], "label": "true"}).encode(), 10, ["True"])[1]["label"] == "True"
    with pytest.raises(BadRequest, match="is not one of this run's labels"):
        parse_explain(json.dumps({"texts": ["a"], "label": "3"}).encode(), 10, ["1.0", "2.0"])


def test_an_explain_label_sent_as_a_json_number_or_boolean_names_the_label_of_that_text():
    """`{"label": 1}` was a 422 "label must be a string" where Predictor.explain(label=1) explains 1."""
    import pytest

    from lancetnic_flow.runs.serve import BadRequest

    def label(value, labels):
        return parse_explain(json.dumps({"texts": ["a"], "label": value}).encode(), 10, labels)[1]["label"]

    assert label(1, ["0", "1"]) == "1"
    assert label(1, ["1.0", "2.0"]) == "1.0"
    assert label(2.0, ["1", "2"]) == "2"
    assert label(True, ["False", "True"]) == "True"
    assert label(False, ["false", "true"]) == "false"
    with pytest.raises(BadRequest, match="label '3' is not one of this run's labels"):
        label(3, ["1", "2"])
    with pytest.raises(BadRequest, match="label must be a string, a number or true/false, got"):
        label(["1"], ["1", "2"])


def test_uvicorns_access_log_goes_to_stderr_leaving_stdout_to_the_json_log(capsys):
    """`serve --json-log` writes its events to stdout, and nothing else goes there: uvicorn's
    own configuration wrote each request's line there, between the events."""
    import logging
    import logging.config

    from lancetnic_flow.runs.serve import log_config

    logging.config.dictConfig(log_config())
    try:
        logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:1", "GET", "/health", "1.1", 200)
        logging.getLogger("uvicorn.error").info("Started server process")
        out, err = capsys.readouterr()
        assert out == "" and "GET /health" in err and "Started server process" in err
    finally:
        for name in ("uvicorn", "uvicorn.access", "uvicorn.error"):
            logging.getLogger(name).handlers.clear()
