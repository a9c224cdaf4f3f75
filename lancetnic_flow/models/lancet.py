"""Lancet models: recurrent networks over token-id sequences (``--features ids``).

lancetnic's names: ``LancetMC`` (LSTM, last hidden state), ``LancetMCA``
(LSTM with attention pooling), ``LancetMCA_gru`` (GRU with attention),
``LancetReg`` (LSTM regression). Batches arrive as CSR rows of ids (cut to
``--max-len`` when featurised). A batch's rows are sorted by length and cut
into a few groups of similar length (:func:`length_groups`); each group is
padded to its own longest row and run through the RNN unpacked, and each
row's pooled state is read at its own steps only: the last state at its
length, attention masked past it. So padding never changes a row's result,
and the RNN runs the fused kernel of a plain padded batch. On the CPU a
packed sequence (``pack_padded_sequence``) took several times longer than
the padded batch it saves work on, and one batch padded to its longest row
spends most of its steps on padding (docs/models.md). On a GPU, where each
call's launches cost more than its padded steps, the batch is one group.
"""
from __future__ import annotations

import torch
from torch import nn

from .heads import Heads
from .sparse_input import SparseEmbedding


# A group takes rows while its padding stays under this share of its tokens,
# and holds at least GROUP_ROWS rows: each group is one RNN call, whose steps
# are a fixed cost however few rows it has.
PAD_SHARE = 0.3
GROUP_ROWS = 32


def length_groups(steps: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The rows' order by length (stable) and that order cut into groups of
    similar length, each row in exactly one group, each group's longest row
    last."""
    order = torch.argsort(steps, stable=True)
    lengths = steps[order].tolist()
    groups, start, tokens = [], 0, 0
    for i, length in enumerate(lengths):
        rows = i - start + 1
        if rows > GROUP_ROWS and rows * length > (1 + PAD_SHARE) * (tokens + length):
            groups.append(order[start:i])
            start, tokens = i, 0
        tokens += length
    groups.append(order[start:])
    return order, groups


class SequenceNet(nn.Module):

    def __init__(self, dim: int, classes: int = 0, regress: bool = False, embed: int = 128, hidden: int = 128,
                 layers: int = 1, dropout: float = 0.2, cell: str = "lstm", attention: bool = False,
                 numeric: int = 0):
        super().__init__()
        self.config = {"dim": dim, "classes": classes, "regress": regress, "embed": embed, "hidden": hidden,
                       "layers": layers, "dropout": dropout, "cell": cell, "attention": attention,
                       "numeric": numeric}
        self.cell, self.attention = cell, attention
        # One RNN call per batch (True) or one per group of like lengths (False); None: by the
        # device, groups on the CPU only (see forward).
        self.one_call: bool | None = None
        self.input = SparseEmbedding(dim, embed)
        rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        self.rnn = rnn(embed, hidden, num_layers=max(layers, 1), batch_first=True,
                       dropout=dropout if layers > 1 else 0.0)
        self.score = nn.Linear(hidden, 1) if attention else None
        self.numeric = nn.Linear(numeric, hidden, bias=False) if numeric else None
        self.drop = nn.Dropout(dropout)
        self.heads = Heads(hidden, classes, regress)

    @property
    def batches_by_length(self) -> bool:
        """Whether its batches should hold rows of similar length
        (dataflow/stream.py), which pad little. Not when it learns a value:
        where the value goes with the length, such batches are each of like
        values, and a 4,000-row LancetReg run then learned nothing (its RMSE
        that of the mean)."""
        return not self.config["regress"]

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None,
                numeric: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        nnz, n = indices.numel(), offsets.numel()
        lengths = torch.diff(offsets, append=torch.tensor([nnz], device=offsets.device))
        # An empty row (no known token) is read as one padding step.
        steps = lengths.clamp(min=1)
        # Every token once (the embedding's rows a batch uses), then a zero step that padding reads.
        x = self.input(indices)
        x = torch.cat([x, x.new_zeros(1, x.shape[1])])
        if n == 0:
            return self.finish(x.new_zeros(0, self.rnn.hidden_size), numeric)
        if self.one_call if self.one_call is not None else x.device.type != "cpu":
            # On a GPU a call costs its launches more than its padding: one call over the batch
            # (rows of like lengths already, dataflow/stream.py; docs/benchmarks.md, "The GPU path").
            order = torch.argsort(steps, stable=True)
            groups = [order]
        else:
            order, groups = length_groups(steps)
        pooled = []
        for rows in groups:
            width = int(steps[rows[-1]])
            pos = torch.arange(width, device=offsets.device)
            at = offsets[rows, None] + pos[None, :]
            at = torch.where(pos[None, :] < lengths[rows, None], at, nnz)
            seq, _ = self.rnn(x[at])
            pooled.append(self.pool(seq, steps[rows]))
        h = torch.cat(pooled) if len(pooled) > 1 else pooled[0]
        # Back to the batch's order.
        h = h.index_select(0, torch.argsort(order))
        return self.finish(h, numeric)

    def pool(self, seq: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
        """Each row's state (rows × hidden) from the RNN's outputs over its
        padded steps (rows × width × hidden) and its own step count: attention
        over its steps, or its last step's output."""
        if self.score is not None:
            mask = torch.arange(seq.shape[1], device=seq.device)[None, :] < steps[:, None]
            scores = self.score(torch.tanh(seq)).squeeze(-1).masked_fill(~mask, float("-inf"))
            return (torch.softmax(scores, dim=1).unsqueeze(-1) * seq).sum(1)
        return seq[torch.arange(seq.shape[0], device=seq.device), steps - 1]

    def finish(self, h: torch.Tensor, numeric: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """The heads on the pooled state ``h`` (batch × hidden): shared with the ONNX
        graph (:mod:`.onnx_graph`), which runs the RNN without packing."""
        if self.numeric is not None and numeric is not None:
            h = h + self.numeric(numeric)
        return self.heads(self.drop(h))
