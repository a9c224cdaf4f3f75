"""Lancet models: recurrent networks over token-id sequences (``--features ids``).

lancetnic's names: ``LancetMC`` (LSTM, last hidden state), ``LancetMCA``
(LSTM with attention pooling), ``LancetMCA_gru`` (GRU with attention),
``LancetReg`` (LSTM regression). Batches arrive as CSR rows of ids; they are
padded per batch to the longest row (rows were cut to ``--max-len`` when
featurised) and packed, so padding never changes a row's result: the RNN
stops at each row's length and attention masks the padding.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .heads import Heads
from .sparse_input import SparseEmbedding


def pad_rows(indices: torch.Tensor, offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """CSR ids → (batch × longest) padded ids and lengths; vectorised."""
    nnz, n = indices.numel(), offsets.numel()
    lengths = torch.diff(offsets, append=torch.tensor([nnz], device=offsets.device))
    width = int(lengths.max().item()) if n else 0
    padded = torch.zeros(n, max(width, 1), dtype=torch.long, device=indices.device)
    if nnz:
        row = torch.repeat_interleave(torch.arange(n, device=indices.device), lengths)
        pos = torch.arange(nnz, device=indices.device) - offsets[row]
        padded[row, pos] = indices
    return padded, lengths


class SequenceNet(nn.Module):
    def __init__(self, dim: int, classes: int = 0, regress: bool = False, embed: int = 128, hidden: int = 128,
                 layers: int = 1, dropout: float = 0.2, cell: str = "lstm", attention: bool = False,
                 numeric: int = 0):
        super().__init__()
        self.config = {"dim": dim, "classes": classes, "regress": regress, "embed": embed, "hidden": hidden,
                       "layers": layers, "dropout": dropout, "cell": cell, "attention": attention,
                       "numeric": numeric}
        self.cell, self.attention = cell, attention
        self.input = SparseEmbedding(dim, embed)
        rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        self.rnn = rnn(embed, hidden, num_layers=max(layers, 1), batch_first=True,
                       dropout=dropout if layers > 1 else 0.0)
        self.score = nn.Linear(hidden, 1) if attention else None
        self.numeric = nn.Linear(numeric, hidden, bias=False) if numeric else None
        self.drop = nn.Dropout(dropout)
        self.heads = Heads(hidden, classes, regress)

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None,
                numeric: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        ids, lengths = pad_rows(indices, offsets)
        x = self.input(ids)
        # An empty row (no known token) is read as one padding step.
        packed = pack_padded_sequence(x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
        out, state = self.rnn(packed)
        if self.score is not None:
            seq, _ = pad_packed_sequence(out, batch_first=True, total_length=ids.shape[1])
            mask = torch.arange(ids.shape[1], device=ids.device)[None, :] < lengths.clamp(min=1)[:, None]
            scores = self.score(torch.tanh(seq)).squeeze(-1).masked_fill(~mask, float("-inf"))
            h = (torch.softmax(scores, dim=1).unsqueeze(-1) * seq).sum(1)
        else:
            h = (state[0] if self.cell == "lstm" else state)[-1]
        return self.finish(h, numeric)

    def finish(self, h: torch.Tensor, numeric: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """The heads on the pooled state ``h`` (batch × hidden): shared with the ONNX
        graph (:mod:`.onnx_graph`), which runs the RNN without packing."""
        if self.numeric is not None and numeric is not None:
            h = h + self.numeric(numeric)
        return self.heads(self.drop(h))
