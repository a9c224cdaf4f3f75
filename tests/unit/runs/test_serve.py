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
