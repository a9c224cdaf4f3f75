"""The networks as graphs ONNX can take: padded matrices instead of CSR rows.

ONNX has no sparse tensor input and no EmbeddingBag, and a packed sequence
does not survive export with a dynamic batch. So an exported graph reads a
batch as dense matrices padded to its longest row: its size is bounded by
rows × the longest row of the batch (a row is at most ``--max-len`` tokens
for the sequence models), never by the vocabulary.

* **Bag models** (:class:`~.scalpel.ScalpelNet`: ScalpelMC, ScalpelReg,
  ScalpelMTSK, FastTextBag) take ``indices`` (int64, batch × width: a row's
  feature ids, padded with 0) and ``weights`` (float32, batch × width: each
  id's weight in the row's sum, 0 for padding; FastTextBag's are 1 / the
  row's number of terms, its mean). The first layer is a gather and a
  weighted sum over the width, which is ``embedding_bag``'s sum.
* **Sequence models** (:class:`~.lancet.SequenceNet`: the Lancet LSTMs and
  GRU) take ``indices`` (int64, batch × width: token ids, padded with 0) and
  ``lengths`` (int64, batch). The RNN runs over every padded step and each
  row is read at its own last step (or attended up to it): a one-directional
  RNN's step t never depends on later steps, so this is what the packed
  sequence of training computes.
* Both take ``numeric`` (float32, batch × columns, standardised as the
  run's features do) when the run has numeric input columns.

The outputs: ``logits`` (batch × labels) and ``probabilities`` (softmax, or
a sigmoid per label for a multilabel run) when the model classifies, and for
a multilabel run ``predicted`` (bool, batch × labels: each logit at or above
its label's threshold as a logit, the run's own: the rule predict decides by,
:func:`~.tasks.labels_taken`), ``value`` (batch, in the
target's units) when it regresses.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..features.rows import RowBlock
from .lancet import SequenceNet
from .scalpel import ScalpelNet
from .tasks import label_cuts


class _Outputs(nn.Module):
    """A network's output dict as the graph's outputs, in :func:`output_names`' order."""

    def __init__(self, multilabel: bool, target: tuple[float, float] | None, thresholds: np.ndarray | None = None):
        super().__init__()
        self.multilabel = multilabel
        self.mean, self.std = target or (0.0, 1.0)
        if multilabel:   # a label is taken as predict takes it: its logit at or above its threshold's
            self.register_buffer("cuts", torch.as_tensor(label_cuts(np.atleast_1d(
                thresholds if thresholds is not None else 0.5)), dtype=torch.float32))

    def forward(self, out: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        res: list[torch.Tensor] = []
        if "logits" in out:
            logits = out["logits"]
            if self.multilabel:
                proba = torch.sigmoid(logits)
                res += [logits, proba, logits >= self.cuts]
            else:
                res += [logits, torch.softmax(logits, dim=1)]
        if "value" in out:
            # The value head learns the standardised target: the graph answers in the target's units, in
            # float64 — in float32 a target near 1e9 rounded every answer to the mean's neighbourhood.
            res.append(out["value"].double() * self.std + self.mean)
        return tuple(res)


class BagGraph(nn.Module):
    """A :class:`ScalpelNet` over padded ``indices`` and ``weights``."""

    second = "weights"

    @staticmethod
    def second_input(model: nn.Module, block: RowBlock, lengths: np.ndarray, row: np.ndarray, pos: np.ndarray,
                     width: int) -> np.ndarray:
        """Each id's weight in its row's sum, padded. ScalpelNet's own rule: a mean
        bag (FastTextBag) or rows without values weigh each term 1/len."""
        if block.values is None or model.pooling == "mean":
            values = np.repeat((1.0 / np.maximum(lengths, 1)).astype(np.float32), lengths)
        else:
            values = block.values.astype(np.float32)
        weights = np.zeros((len(lengths), width), np.float32)
        weights[row, pos] = values
        return weights

    def __init__(self, net: ScalpelNet, outputs: _Outputs):
        super().__init__()
        self.net, self.outputs = net, outputs

    def forward(self, indices: torch.Tensor, weights: torch.Tensor,
                numeric: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        rows = F.embedding(indices, self.net.input.weight)            # batch × width × hidden
        h = (rows * weights.unsqueeze(-1)).sum(1) + self.net.input.bias
        return self.outputs(self.net.finish(h, numeric))


class SequenceGraph(nn.Module):
    """A :class:`SequenceNet` over padded ``indices`` and their ``lengths``, unpacked."""

    second = "lengths"

    @staticmethod
    def second_input(model: nn.Module, block: RowBlock, lengths: np.ndarray, row: np.ndarray, pos: np.ndarray,
                     width: int) -> np.ndarray:
        return lengths

    def __init__(self, net: SequenceNet, outputs: _Outputs):
        super().__init__()
        self.net, self.outputs = net, outputs

    def forward(self, indices: torch.Tensor, lengths: torch.Tensor,
                numeric: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        net = self.net
        seq, _ = net.rnn(net.input(indices))
        # An empty row is read as one padding step, as in training.
        last = lengths.clamp(min=1) - 1
        if net.score is not None:
            steps = torch.arange(indices.shape[1], device=indices.device)
            mask = steps.unsqueeze(0) <= last.unsqueeze(1)
            scores = net.score(torch.tanh(seq)).squeeze(-1).masked_fill(~mask, float("-inf"))
            h = (torch.softmax(scores, dim=1).unsqueeze(-1) * seq).sum(1)
        else:
            h = seq.gather(1, last.view(-1, 1, 1).expand(-1, 1, seq.shape[2])).squeeze(1)
        return self.outputs(net.finish(h, numeric))


GRAPHS: dict[type, type[nn.Module]] = {ScalpelNet: BagGraph, SequenceNet: SequenceGraph}


def exportable(model: nn.Module) -> bool:
    """Whether ``model``'s network has an ONNX graph here (a registered custom network has none)."""
    return type(model) in GRAPHS


def graph_for(model: nn.Module, multilabel: bool = False, target: tuple[float, float] | None = None,
              thresholds: np.ndarray | None = None) -> nn.Module:
    """``model`` as the module that torch.onnx exports, in eval mode: the exporter
    restores the mode it found, and a graph left in training mode would put the
    network back in it (dropout on) after the export. ``thresholds``: a multilabel
    run's probability threshold per label (default 0.5)."""
    return GRAPHS[type(model)](model, _Outputs(multilabel, target, thresholds)).eval()


def input_names(model: nn.Module) -> list[str]:
    """The graph's inputs, in the order its ``forward`` takes them."""
    return ["indices", GRAPHS[type(model)].second] + (["numeric"] if model.numeric is not None else [])


def output_names(model: nn.Module, multilabel: bool = False) -> list[str]:
    """The graph's outputs, in the order its ``forward`` returns them."""
    kw = model.config
    classes = ["logits", "probabilities"] + (["predicted"] if multilabel else [])
    return (classes if kw.get("classes") else []) + (["value"] if kw.get("regress") else [])


def graph_inputs(model: nn.Module, block: RowBlock) -> dict[str, np.ndarray]:
    """A block of CSR rows as the graph's padded inputs, keyed by :func:`input_names`."""
    lengths = np.diff(block.offsets).astype(np.int64)
    n, nnz = len(lengths), len(block.indices)
    width = max(int(lengths.max()) if n else 0, 1)
    row = np.repeat(np.arange(n), lengths)
    pos = np.arange(nnz) - np.repeat(block.offsets[:-1], lengths)
    indices = np.zeros((n, width), np.int64)
    indices[row, pos] = block.indices
    graph = GRAPHS[type(model)]
    out: dict[str, np.ndarray] = {"indices": indices,
                                  graph.second: graph.second_input(model, block, lengths, row, pos, width)}
    if model.numeric is not None:
        numeric = block.numeric if block.numeric is not None else np.zeros((n, model.config["numeric"]))
        out["numeric"] = np.ascontiguousarray(numeric, np.float32)
    return out


__all__ = ["BagGraph", "SequenceGraph", "GRAPHS", "exportable", "graph_for", "input_names", "output_names",
           "graph_inputs"]
