"""``lancetnic-flow export RUN --onnx FILE`` and ``Predictor.featurize``
(docs/serving.md): for every registered model × task (and multilabel, and
numeric inputs), onnxruntime on the exported graph gives the Predictor's
logits, probabilities, labels and values, at any batch size and row length.

The runs are built in process (no cluster, random weights: the graph must
compute what the network computes whatever its weights); one is saved as a
run folder and exported through the CLI; the session's trained run too.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
import torch

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from lancetnic_flow.errors import UserError  # noqa: E402
from lancetnic_flow.models import NETS  # noqa: E402
from lancetnic_flow.models.inputs import model_inputs  # noqa: E402
from lancetnic_flow.runs.export import export_onnx  # noqa: E402
from lancetnic_flow.runs.predict import Predictor  # noqa: E402

from helpers import THRESHOLDS, WORDS, assert_user_error, built_run, cli, model_task_pairs  # noqa: E402

TOL = 1e-4
CASES = model_task_pairs() + [("ScalpelMC", "multilabel"), ("LancetMCA_gru", "multilabel")]


def texts(n: int, seed: int) -> list[str | None]:
    """``n`` texts of 0 to 30 words (longer than max_len), with an empty and a missing one."""
    rng = np.random.default_rng(seed)
    out: list[str | None] = [" ".join(rng.choice(WORDS, rng.integers(1, 30))) for _ in range(n)]
    if n > 3:
        out[1], out[3] = "", None
    return out


def session_for(pred: Predictor, tmp_path) -> ort.InferenceSession:
    out = tmp_path / "model.onnx"
    res = export_onnx(pred, str(out))
    assert res["difference"] <= TOL and out.stat().st_size == res["bytes"]
    return ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])


def assert_same_answers(pred: Predictor, session, data) -> None:
    """onnxruntime's outputs equal the network's logits and the Predictor's answers for ``data``."""
    inputs = pred.featurize(data)
    assert [i.name for i in session.get_inputs()] == list(inputs)
    names = [o.name for o in session.get_outputs()]
    got = dict(zip(names, session.run(None, inputs)))
    with torch.no_grad():
        raw = {k: v.numpy() for k, v in pred.run.model(**model_inputs(pred.feature_rows(data), pred.device)).items()}
    ok = np.array([p["status"] == "ok" for p in pred.predict(data)])
    assert ok.sum() >= 1
    if pred.classifies:
        np.testing.assert_allclose(got["logits"], raw["logits"], atol=TOL, rtol=0)
        proba = pred.predict_proba(data)
        np.testing.assert_allclose(got["probabilities"][ok], proba[ok], atol=TOL, rtol=0)
        if not pred.multilabel:
            best = [pred.labels[i] for i in got["logits"].argmax(1)]
            assert [b for b, o in zip(best, ok) if o] == [p["label"] for p in pred.predict(data) if p["status"] == "ok"]
        else:   # the run's own thresholds decide the labels, in the graph as in the Predictor
            taken = [{pred.labels[i] for i in np.flatnonzero(row)} for row in got["predicted"]]
            assert [t for t, o in zip(taken, ok) if o] == [set(p["labels"]) for p in pred.predict(data)
                                                         if p["status"] == "ok"]
    if pred.regresses:
        want = pred.predict_values(data)
        np.testing.assert_allclose(got["value"][ok], want[ok], rtol=1e-6, atol=TOL)


@pytest.mark.parametrize("name,task", CASES, ids=[f"{n}-{t}" for n, t in CASES])
def test_every_model_and_task_exports_and_onnxruntime_gives_the_predictors_answers(name, task, tmp_path):
    pred = built_run(name, task)
    session = session_for(pred, tmp_path)
    assert session.get_outputs()[0].name == ("value" if task == "regress" else "logits")
    for n, seed in ((13, 1), (1, 2), (40, 3)):       # batch sizes other than the export's example
        assert_same_answers(pred, session, texts(n, seed))
    meta = session.get_modelmeta().custom_metadata_map
    assert json.loads(meta["lancetnic_flow.labels"]) == pred.labels and meta["lancetnic_flow.task"] == task
    if task == "multilabel":
        assert [o.name for o in session.get_outputs()] == ["logits", "probabilities", "predicted"]
        assert json.loads(meta["lancetnic_flow.thresholds"]) == pred.thresholds.tolist() == THRESHOLDS


@pytest.mark.parametrize("name", ["ScalpelMTSK", "LancetMCA"])
def test_numeric_inputs_are_a_graph_input_standardised_by_featurize(name, tmp_path):
    pred = built_run(name, "multitask", numeric=2)
    session = session_for(pred, tmp_path)
    rows = texts(9, 4)
    data = pa.table({"text": rows, "n0": np.linspace(-5, 9, 9), "n1": [1.0, None, 4.0, 2.0, 0.0, 8.0, 3.0, 3.0, 1.0]})
    inputs = pred.featurize(data)
    assert list(inputs) == ["indices", "weights" if name.startswith("Scalpel") else "lengths", "numeric"]
    assert inputs["numeric"].shape == (9, 2) and inputs["numeric"][1, 1] == 0.0   # missing: the mean
    assert_same_answers(pred, session, data)


def test_featurize_pads_each_row_to_the_longest_and_keeps_every_row_in_place():
    pred = built_run("FastTextBag", "classify")
    x = pred.featurize(["w1 w2 w3", None, "w4", ""])
    assert x["indices"].dtype == np.int64 and x["weights"].dtype == np.float32
    width = x["indices"].shape[1]
    assert x["indices"].shape == x["weights"].shape == (4, width) and width >= 5    # words and word pairs
    assert not x["weights"][1].any() and not x["weights"][3].any()                 # empty rows
    nz = x["weights"][0][x["weights"][0] > 0]
    np.testing.assert_allclose(nz, 1.0 / len(nz))                                    # the mean bag
    seq = built_run("LancetMC", "classify").featurize(["w1 w2 w3 " * 10, "w5", None])
    assert seq["indices"].shape == (3, 12) and seq["lengths"].tolist() == [12, 1, 0]   # cut at max_len
    assert (seq["indices"][1, 1:] == 0).all()


def test_a_saved_run_exports_through_the_cli_and_a_bad_run_or_network_is_a_user_error(tmp_path):
    run = tmp_path / "run"
    pred = built_run("ScalpelMC", "classify", out=run)
    p = cli("export", run, "--onnx", tmp_path / "out" / "m.onnx", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "m.onnx" in p.stdout + p.stderr and "inputs indices, weights" in p.stdout + p.stderr
    session = ort.InferenceSession(str(tmp_path / "out" / "m.onnx"), providers=["CPUExecutionProvider"])
    assert_same_answers(Predictor(str(run)), session, texts(7, 5))
    assert_user_error(cli("export", tmp_path / "nothing", "--onnx", tmp_path / "x.onnx", cwd=tmp_path),
                      "not a lancetnic_flow run folder")
    assert not (tmp_path / "x.onnx").exists()

    class Custom(torch.nn.Module):
        numeric = None

    NETS["CustomNet"] = Custom
    try:
        pred.run.model = Custom()
        with pytest.raises(UserError, match="has no ONNX graph"):
            export_onnx(pred, str(tmp_path / "c.onnx"))
    finally:
        del NETS["CustomNet"]


def test_the_trained_run_exports_and_answers_as_its_predictor(trained_run, corpus4, tmp_path):
    import pyarrow.csv as pacsv

    pred = Predictor(trained_run.run)
    session = session_for(pred, tmp_path)
    rows = pacsv.read_csv(corpus4)["text"].to_pylist()[:300] + ["", None, "völlig unbekannt"]
    assert_same_answers(pred, session, rows)


def test_without_the_onnx_extra_the_error_names_it(monkeypatch):
    import sys

    from lancetnic_flow.runs.export import require_onnx

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(UserError) as e:
        require_onnx()
    assert "onnxruntime is not installed" in e.value.message and "lancetnic_flow[onnx]" in e.value.hint


def test_a_value_far_from_zero_keeps_its_digits_in_the_graph(tmp_path):
    # in float32 a target near 1e9 rounded every answer to steps of 64: 50 of 50 answers equal, 2.8 off
    # where the target's deviation is 1.04, and the export's check (relative to 1e9) said it agreed
    pred = built_run("ScalpelReg", "regress")
    pred.run.features.target = (1e9 + 0.37, 1.04)
    session = session_for(pred, tmp_path)
    data = texts(50, 6)
    got = session.run(["value"], pred.featurize(data))[0]
    want = pred.predict_values(data)
    ok = np.isfinite(want)
    assert got.dtype == np.float64 and len(np.unique(got[ok])) > 1
    assert np.abs(got[ok] - want[ok]).max() < 1e-4


def test_the_graph_decides_a_label_a_float32_step_from_its_threshold_as_predict_does(tmp_path):
    # the graph compared float32 probabilities with float32 thresholds, predict float32 probabilities
    # with float64 ones, evaluate logits with the thresholds' logits: at the edge each could differ
    import pyarrow as pa

    from lancetnic_flow.features.vectorize import FittedFeatures
    from lancetnic_flow.models.scalpel import ScalpelNet
    from lancetnic_flow.models.tasks import label_cuts
    from lancetnic_flow.runs.folder import save_run

    thresholds = [0.3, 0.5, 0.7, 0.9]
    cuts = label_cuts(thresholds)
    logits = [np.nextafter(c, np.float32(-np.inf)) for c in cuts[:3]] + [cuts[3]]
    model = ScalpelNet(1, classes=4, regress=False, layers=0, dropout=0.0)
    with torch.no_grad():
        model.input.weight.copy_(torch.tensor(np.array([logits], np.float32)))
        model.input.bias.zero_()
    features = FittedFeatures(mode="tfidf", vocabulary=pa.array(["goal"]), idf=np.ones(1, np.float32),
                              labels=["a", "b", "c", "d"], sublinear_tf=False)
    save_run(str(tmp_path / "run"), config={"data": {"text": ["text"]}}, features=features, model=model,
             model_meta={"net": "ScalpelNet", "kwargs": model.config, "task": "multilabel",
                         "thresholds": thresholds}, metrics={}, history=[])
    pred = Predictor(str(tmp_path / "run"))
    session = session_for(pred, tmp_path)
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, pred.featurize(["goal"]))))
    assert got["predicted"].tolist() == [[False, False, False, True]]
    assert pred.predict(["goal"])[0]["labels"] == ["d"]
