"""A run's network as an ONNX file (``lancetnic-flow export RUN --onnx FILE``).

The graph (:mod:`lancetnic_flow.models.onnx_graph`) takes padded matrices:
:meth:`~.predict.Predictor.featurize` turns texts into them, keyed by the
graph's input names, so any ONNX runtime reproduces
:class:`~.predict.Predictor`'s outputs, a multilabel run's decisions at its
thresholds included (the ``predicted`` output). The file's metadata carries
the labels in the order of the ``logits`` columns, the task, the input
names and a multilabel run's thresholds. Every export is checked before it is written: onnxruntime runs the
graph on sample texts and its answers must equal the Predictor's.

torch's TorchScript exporter (``dynamo=False``) is used: the newer
``torch.export`` one needs ``onnxscript`` and gives the same graph here.
Needs ``pip install 'lancetnic_flow[onnx]'`` (onnx, onnxruntime).
"""
from __future__ import annotations

import inspect
import io
import json
import warnings
from typing import Any

import numpy as np

from ..errors import UserError
from ..models.tasks import label_cuts, labels_taken
from ..registry import task_kind
from ..storage import options_for, write_bytes

OPSET = 17
TOLERANCE = 1e-4
PROTOBUF_LIMIT = 2**31 - 2**20    # one ONNX file holds under 2 GiB (protobuf), with room for the graph
SAMPLES = ["a short text", "", "the quick brown fox jumps over the lazy dog " * 3, "goal match team phone"]


def require_onnx() -> None:
    """Stop with the extra to install when onnx or onnxruntime is missing."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        raise UserError(f"export --onnx needs the onnx and onnxruntime packages ({exc.name} is not installed)",
                        "pip install 'lancetnic_flow[onnx]'") from None


# Extensions of files that hold something else than an ONNX graph (a run's or a framework's model, a
# table, a config, an image): a graph written under one is opened by the wrong tool, or replaces what it names.
OTHER_FILES = (".json", ".pt", ".pth", ".pkl", ".pickle", ".joblib", ".safetensors", ".ckpt", ".bin", ".h5",
               ".keras", ".npy", ".npz", ".pb", ".tflite", ".ort", ".yaml", ".yml", ".toml", ".md", ".html",
               ".png", ".svg", ".zip", ".tar")


def check_onnx_name(url: str) -> None:
    """Refuse ``--onnx URL`` whose name says another kind of file (``model.json``, ``m.pt``,
    ``p.csv``) or a compression (``m.onnx.gz``: the graph is written as it is); ``.onnx``, a
    name with no extension or one no tool claims is written."""
    from ..formats import extension_of, file_name, format_for_path, split_compression

    name = file_name(url)
    _, comp = split_compression(name)
    ext = extension_of(url)
    if comp is None and format_for_path(url)[0] is None and ext not in OTHER_FILES:
        return
    what = f"{comp} compression, and export writes the graph uncompressed" if comp else \
        f"a {ext} file, and export writes an ONNX graph there"
    stem = name.split(".", 1)[0] or "model"
    raise UserError(f"--onnx {url}: the name says {what}",
                    f"end the name in .onnx: --onnx {url[: len(url) - len(name)]}{stem}.onnx")


def sample_texts(pred) -> list[str]:
    """Texts to trace and check the graph with; with vocabulary terms, so no row is empty
    in a vocabulary's (tfidf, ids) mode."""
    vocab = pred.run.features.vocabulary
    terms = vocab.slice(0, 40).to_pylist() if vocab is not None else []
    return SAMPLES + ([" ".join(terms), " ".join(terms[::3])] if terms else [])


def _export_bytes(pred) -> bytes:
    """The graph as ONNX bytes, with dynamic batch and width."""
    import torch

    from ..models import onnx_graph

    model = pred.run.model
    graph = onnx_graph.graph_for(model, pred.multilabel, pred.run.features.target if pred.regresses else None,
                                 pred.thresholds if pred.multilabel else None)
    example = pred.featurize(sample_texts(pred))
    names, outputs = onnx_graph.input_names(model), onnx_graph.output_names(model, pred.multilabel)
    axes: dict[str, dict[int, str]] = {n: {0: "batch"} for n in names + outputs}
    for padded in ("indices", "weights"):
        if padded in names:
            axes[padded] = {0: "batch", 1: "width"}
    buf = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        # The exporter's deprecation notice and its RNN batch-size caution (the graph has no
        # initial state input, so any batch size runs; the tests check it) are not the user's.
        warnings.simplefilter("ignore")
        # torch before 2.5 has only this exporter, and no ``dynamo`` argument.
        which = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
        torch.onnx.export(graph, tuple(torch.from_numpy(example[n]) for n in names), buf, input_names=names,
                          output_names=outputs, dynamic_axes=axes, opset_version=OPSET, **which)
    return buf.getvalue()


def _with_metadata(data: bytes, pred) -> bytes:
    """The labels (the ``logits`` columns' order), task and inputs, in the file's metadata."""
    import onnx

    proto = onnx.load_from_string(data)
    meta = pred.run.meta
    props = {"lancetnic_flow.labels": json.dumps(list(pred.labels)), "lancetnic_flow.task": task_kind(meta),
             "lancetnic_flow.model": str(meta.get("model", meta.get("net", ""))),
             "lancetnic_flow.inputs": json.dumps([i.name for i in proto.graph.input])}
    if pred.multilabel:   # what the graph's ``predicted`` compares ``probabilities`` with
        props["lancetnic_flow.thresholds"] = json.dumps(pred.thresholds.tolist())
    onnx.helper.set_model_props(proto, props)
    return proto.SerializeToString()


def difference(got: np.ndarray, want: np.ndarray) -> float:
    """The largest difference of ``got`` from ``want``: absolute up to 1, relative above
    (float32 holds a large value to about 7 digits)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float((np.abs(got - want) / np.maximum(np.abs(want), 1.0)).max(initial=0.0))


def check_graph(data: bytes, pred, texts: list[str]) -> float:
    """The largest :func:`difference` between onnxruntime's answers and the model's for
    ``texts`` (logits, probabilities, values in the target's units); a bug if over :data:`TOLERANCE`."""
    import onnxruntime as ort
    import torch

    from ..models import onnx_graph
    from ..models.inputs import model_inputs

    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    got = dict(zip(onnx_graph.output_names(pred.run.model, pred.multilabel),
                   session.run(None, pred.featurize(texts, cut=[]))))
    with torch.no_grad():
        want = {k: v.numpy() for k, v in pred.run.model(**model_inputs(pred.feature_rows(texts, cut=[]), pred.device)).items()}
    worst = 0.0
    if "logits" in want:
        worst = difference(got["logits"], want["logits"])
    if "predicted" in got:   # the labels the Predictor takes: the same decisions, bar a logit on a threshold's
        cuts = label_cuts(pred.thresholds)
        clear = ~np.isclose(want["logits"], cuts, rtol=0.0, atol=TOLERANCE)
        if (got["predicted"][clear] != labels_taken(want["logits"], pred.thresholds)[clear]).any():
            raise RuntimeError("the exported graph's predicted labels differ from the model's: please report this")
    if "value" in want:   # compared in standard deviations of the target: relative to a large mean, an
        # answer off by more than the model's error still looked close
        mean, std = pred.run.features.target or (0.0, 1.0)
        scale = std or 1.0   # a constant target's scale is 0: both answers are its mean
        worst = max(worst, difference((np.asarray(got["value"], np.float64) - mean) / scale,
                                      np.asarray(want["value"], np.float64) * std / scale))
    if worst > TOLERANCE:
        raise RuntimeError(f"the exported graph differs from the model by {worst:.3g}: please report this")
    return worst


def export_onnx(run: Any, out: str, storage_options: dict | None = None, run_options: dict | None = None) -> dict:
    """Write ``run``'s network to ``out`` (a path or fsspec URL) as ONNX, checked with
    onnxruntime. ``run``: a run folder or a :class:`~.predict.Predictor`. Returns what
    was written: ``onnx``, ``bytes``, ``inputs``, ``outputs``, ``labels`` and ``difference``."""
    require_onnx()
    from ..models import onnx_graph
    from .predict import Predictor

    pred = run if isinstance(run, Predictor) else Predictor(run, run_options)
    model = pred.run.model
    if not onnx_graph.exportable(model):
        raise UserError(f"{pred.run.url}: its network {type(model).__name__} has no ONNX graph (export knows "
                        "ScalpelNet and SequenceNet, the built-in models)",
                        "serve it with `lancetnic-flow serve`, or export it with torch.onnx yourself")
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    if size > PROTOBUF_LIMIT:
        raise UserError(f"{pred.run.url}: its weights take {size / 2**30:.1f} GiB; one ONNX file holds under 2 GiB",
                        "train with fewer --buckets or a smaller --max-features / --hidden, or serve it with "
                        "`lancetnic-flow serve`")
    data = _with_metadata(_export_bytes(pred), pred)
    difference = check_graph(data, pred, sample_texts(pred))
    write_bytes(out, data, options_for(out, storage_options or {}))
    return {"onnx": out, "bytes": len(data), "inputs": onnx_graph.input_names(model),
            "outputs": onnx_graph.output_names(model, pred.multilabel), "labels": list(pred.labels),
            "difference": difference}


__all__ = ["export_onnx", "check_graph", "check_onnx_name", "OTHER_FILES", "difference", "require_onnx", "sample_texts", "OPSET", "TOLERANCE"]
