"""The sparse first layer and its row-wise optimiser.

``SparseInput`` computes ``rows @ W`` for CSR rows with
``F.embedding_bag(mode="sum", per_sample_weights=values)``: the product of
the dense TF-IDF row with a Linear layer, in O(non-zeros). In training it
gathers only the rows of ``W`` that the batch uses into a small leaf tensor,
so backward yields a (used rows × width) gradient instead of a dense
(vocabulary × width) one, and :class:`RowOptimizer` updates just those rows
(lazy Adam, or SGD). The gather plan comes from one sort of the batch's
indices, which also gives the transposed batch as a CSR matrix: the
backward to the used rows is that matrix times the output's gradient
(:func:`rows_plan`), faster than embedding_bag's own backward, which sorts
again. One thread runs a step 1.3–2.3× faster than
``EmbeddingBag(sparse=True)`` with ``SparseAdam``, which builds and coalesces
a (non-zeros × width) gradient (benchmarks/step_speed.py, docs/benchmarks.md).
"""
from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# torch calls every CSR tensor "beta", once a process; the transposed batch's invariants hold by construction.
CSR_BETA = "Sparse CSR tensor support is in beta state"


def quiet_csr_beta() -> None:
    """Ignore torch's CSR "beta" UserWarning in this process, by a filter of the process's own
    (idempotent, cheap enough for every batch). ``warnings.catch_warnings`` is no way: it swaps
    the process's one filter list, so threads building these tensors at once (ranks, a
    worker's tasks) restored one another's list without the filter, and the warning reached
    the terminal in some runs. Called again where a tensor is built: another module's
    ``catch_warnings`` ending may have restored a list from before this filter."""
    if not any(f[0] == "ignore" and f[1] is not None and f[1].pattern == CSR_BETA for f in warnings.filters):
        warnings.filterwarnings("ignore", message=CSR_BETA, category=UserWarning)


quiet_csr_beta()   # every process that builds the CSR tensors imports this module: trainers and Dask workers


def sorted_with_order(indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.sort(indices, stable=True)``'s values and order. On the CPU,
    one NumPy sort of 64-bit keys (index, position), whose vectorised sort
    takes a third of torch's time on a batch's indices (measured in
    benchmarks/step_speed.py's terms: 0.54 vs 1.46 ms for 72k indices)."""
    n = indices.numel()
    bits = max(1, (n - 1).bit_length())
    if indices.device.type != "cpu" or n == 0 or int(indices.max()) >= 1 << (62 - bits):
        return torch.sort(indices, stable=True)
    keys = (indices.numpy() << bits) | np.arange(n, dtype=np.int64)
    keys.sort()
    return torch.from_numpy(keys >> bits), torch.from_numpy(keys & ((1 << bits) - 1))


def rows_plan(indices: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """From one sort of a batch's feature indices: the distinct indices
    (``used``), each entry's position among them (``local``), and the
    transposed batch as a CSR matrix (used × rows, the entries' weights),
    the one product the first layer's backward needs."""
    values, order = sorted_with_order(indices)
    used, counts = torch.unique_consecutive(values, return_counts=True)
    group = torch.repeat_interleave(torch.arange(len(used), device=indices.device), counts)
    local = torch.empty_like(indices)
    local[order] = group
    lengths = torch.diff(offsets, append=offsets.new_tensor([indices.numel()]))
    row_of = torch.repeat_interleave(torch.arange(len(offsets), device=indices.device), lengths)
    crow = torch.zeros(len(used) + 1, dtype=torch.long, device=indices.device)
    torch.cumsum(counts, 0, out=crow[1:])
    quiet_csr_beta()
    transposed = torch.sparse_csr_tensor(crow, row_of[order], weights[order], (len(used), len(offsets)),
                                         check_invariants=False)
    return used, local, transposed


class _RowsBag(torch.autograd.Function):
    """``embedding_bag(local, rows, offsets, "sum", weights)`` whose gradient
    for ``rows`` is the transposed batch times the output's gradient: a CSR
    product, a quarter to a third faster than embedding_bag's own backward,
    which sorts the indices again."""

    @staticmethod
    def forward(ctx, rows, local, offsets, weights, transposed):
        ctx.transposed = transposed
        return F.embedding_bag(local, rows, offsets, mode="sum", per_sample_weights=weights)

    @staticmethod
    def backward(ctx, grad_out):
        return torch.sparse.mm(ctx.transposed, grad_out.contiguous()), None, None, None, None


class LazyRows(nn.Module):
    """A weight of rows that start at zero and take their random starting values
    (:func:`~.row_starts.start_values`) when a training batch first uses them. A row no training
    batch used (a hashed bucket of the validation rows' or a predicted text's words alone) stays
    zero, so at prediction it adds nothing, where a random starting value added noise
    to every score of a text holding it; a used row starts exactly as a randomly
    initialised one. ``init_std`` 0: rows start and stay zero until stepped."""

    def __init__(self, dim: int, width: int, init_std: float):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(max(dim, 1), width))
        self.init_std = init_std
        # Drawn from the seeded generator, as the starting values were: the same seed, the same rows.
        self.salt = int(torch.randint(0, 2 ** 62, ())) if init_std else 0

    @torch.no_grad()
    def started(self, used: torch.Tensor) -> torch.Tensor:
        """``weight[used]``, each of those rows still at zero given its starting values,
        in the copy returned and in the weight."""
        w = self.weight.detach()
        rows = w.index_select(0, used)
        if not self.init_std or not len(used):
            return rows
        # A started row is zero in its first column with probability nil: only those are read whole.
        fresh = rows[:, 0] == 0
        if bool(fresh.any()):
            fresh[fresh.clone()] = ~rows[fresh].any(1)
        if bool(fresh.any()):
            from .row_starts import start_values   # here: a process that only predicts never loads numba for it

            first = used[fresh]
            values = start_values(first, w.shape[1], self.salt, self.init_std).to(w.dtype)
            rows[fresh] = values
            w.index_copy_(0, first, values)
        return rows


class SparseInput(LazyRows):
    def __init__(self, dim: int, width: int, init_std: float = 0.1):
        # Rows are l2-normalised, so a row's sum has the scale of one weight:
        # N(0, 1) would saturate the next ReLU; Linear's fan-in rule would vanish.
        super().__init__(dim, width, init_std)
        self.bias = nn.Parameter(torch.zeros(width))
        self.active: tuple[torch.Tensor, torch.Tensor] | None = None
        self.row_wise = True   # False: dense gradients, for optimisers without a row-wise form
        self.weighs_rows = False   # True: a step also keeps ``load``, its used rows' summed squared weights
        self.load: tuple[torch.Tensor, torch.Tensor] | None = None
        self.seen: torch.Tensor | None = None   # dense gradients: the rows the last training batch used

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
        learning = self.training and torch.is_grad_enabled()
        if self.row_wise and learning:
            if weights is None:
                weights = torch.ones(indices.shape, dtype=self.weight.dtype, device=indices.device)
            used, local, transposed = rows_plan(indices, offsets, weights)
            rows = self.started(used).requires_grad_()
            self.active = (used, rows)
            if self.weighs_rows:
                self.load = (used, torch.zeros(len(used), dtype=weights.dtype, device=weights.device)
                             .index_add_(0, local, weights * weights))
            out = _RowsBag.apply(rows, local, offsets, weights, transposed)
        else:
            if learning:
                self.seen = torch.unique(indices)   # --ddp ranks start every rank's (ddp/comm.seen_rows)
                self.started(self.seen)
            out = F.embedding_bag(indices, self.weight, offsets, mode="sum", per_sample_weights=weights)
        return out + self.bias


class SparseEmbedding(nn.Module):
    """Token embeddings (row 0 = padding, kept at zero) whose training step,
    like :class:`SparseInput`'s, touches only the rows a batch uses."""

    def __init__(self, dim: int, width: int, init_std: float = 0.1):
        super().__init__()
        w = torch.randn(max(dim, 1), width).mul_(init_std)
        w[0] = 0.0
        self.weight = nn.Parameter(w)
        self.active: tuple[torch.Tensor, torch.Tensor] | None = None
        self.row_wise = True

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.row_wise and self.training and torch.is_grad_enabled():
            used, local = torch.unique(ids, return_inverse=True)
            rows = self.weight.detach().index_select(0, used).requires_grad_()
            self.active = (used, rows)
            out = F.embedding(local, rows)
        else:
            out = F.embedding(ids, self.weight)
        return out * (ids != 0).unsqueeze(-1)


class RowOptimizer:
    """Updates only the rows of ``layer.weight`` used by the last batch.

    ``adam`` is lazy Adam (moments of untouched rows are not decayed, as in
    ``torch.optim.SparseAdam``); ``sgd`` is plain SGD on the used rows."""

    def __init__(self, layer: SparseInput | SparseEmbedding, name: str = "adam", lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 scale: float = 1.0, rows: int | None = None, cap: float | None = None):
        # ``scale``: this layer's step is ``scale`` × the scheduled ``lr`` the
        # dense optimiser takes, so one schedule drives both. ``rows`` (sgd): the
        # examples the loss is the mean of, so each example moves a row by the
        # per-example rate; a short batch (the last of an epoch, a data set
        # smaller than a batch) of a value head sets its own through :meth:`mean_over`. None:
        # the rate is per step, whatever the batch. ``cap`` (sgd): the summed
        # squared weight of a row's examples past which a batch's step for the
        # row is that of ``cap`` (:func:`capped`).
        self.layer, self.name, self.lr, self.betas, self.eps, self.wd = layer, name, lr, betas, eps, weight_decay
        self.scale, self.rows, self.cap = scale, rows, cap
        layer.weighs_rows = cap is not None
        self.t = 0
        if name == "adam":
            self.m = torch.zeros_like(layer.weight)
            self.v = torch.zeros_like(layer.weight)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Nothing to clear: each forward makes a fresh leaf of used rows."""

    def mean_over(self, rows: int) -> None:
        """The next step's gradient is the mean loss of ``rows`` examples: taken by a per-example
        rate whose rows are cut (``cap``, a value head's). A class loss's step keeps the batch
        size's scale on a short batch: its gradient is bounded, and that larger step is what
        trains a data set smaller than a batch in its epochs (docs/benchmarks.md)."""
        if self.rows is not None and self.cap is not None:
            self.rows = max(1, int(rows))

    @torch.no_grad()
    def step(self) -> None:
        if self.layer.active is None or self.layer.active[1].grad is None:
            return
        used, rows = self.layer.active
        g = rows.grad
        if self.wd:
            g = g.add(rows, alpha=self.wd)
        w = self.layer.weight
        # ``rows`` holds w[used] as the forward pass gathered it, and w has not
        # changed since: write the updated rows back (an index_copy_ of distinct
        # rows is several times faster than an index_add_).
        new = rows.detach()
        if self.name == "sgd":
            g = capped(g, used, self.layer, self.cap)
            w.index_copy_(0, used, new.sub_(g, alpha=self.lr * self.scale * (self.rows or 1)))
            self.layer.active = None
            return
        self.t += 1
        b1, b2 = self.betas
        m = self.m.index_select(0, used).mul_(b1).add_(g, alpha=1 - b1)
        v = self.v.index_select(0, used).mul_(b2).addcmul_(g, g, value=1 - b2)
        self.m.index_copy_(0, used, m)
        self.v.index_copy_(0, used, v)
        step = self.lr * self.scale / (1 - b1 ** self.t)
        denom = v.div_(1 - b2 ** self.t).sqrt_().add_(self.eps)
        w.index_copy_(0, used, new.sub_(m.div_(denom), alpha=step))
        self.layer.active = None

    def state_dict(self) -> dict:
        d = {"t": self.t, "lr": self.lr}
        if self.name == "adam":
            d.update(m=self.m, v=self.v)
        return d

    def load_state_dict(self, d: dict) -> None:
        self.t, self.lr = d["t"], d["lr"]
        if self.name == "adam":
            self.m.copy_(d["m"])
            self.v.copy_(d["v"])


def capped(grad: torch.Tensor, used: torch.Tensor, layer: SparseInput | SparseEmbedding,
           cap: float | None) -> torch.Tensor:
    """A batch's summed per-example gradient for its ``used`` rows, each row's cut to
    ``cap`` of its examples' summed squared weight (the layer's ``load``). Per-example
    SGD adds up every example's step for a row; when many examples of a batch share a
    row and agree (a duplicated or templated text, a data set of a few texts), the sum
    moves the row many steps at once where one example's would have corrected the
    error already: a value head overshot and trained to the mean. Rows of the usual
    spread of terms stay under ``cap`` and step as before. Rows exchanged between
    ``--ddp`` ranks (not this rank's own ``used``) step uncut."""
    load = getattr(layer, "load", None)
    if cap is None or load is None or load[0] is not used:
        return grad
    return grad * (cap / load[1].clamp(min=cap)).unsqueeze(1)


class DenseOptimizer:
    """Adam or SGD for the small dense head, with the same update rule as
    ``torch.optim.Adam``/``SGD``. Constructing any ``torch.optim`` optimiser
    imports ``torch._dynamo`` (1.7 s on a laptop core, measured); this one
    does not, which is most of a small run's start-up."""

    def __init__(self, params, name: str = "adam", lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        self.params = [p for p in params if p.requires_grad]
        self.name, self.lr, self.betas, self.eps, self.t = name, lr, betas, eps, 0
        self.m = [torch.zeros_like(p) for p in self.params] if name == "adam" else []
        self.v = [torch.zeros_like(p) for p in self.params] if name == "adam" else []

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        if self.name == "sgd":
            for p in self.params:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-self.lr)
            return
        self.t += 1
        b1, b2 = self.betas
        step = self.lr / (1 - b1 ** self.t)
        for p, m, v in zip(self.params, self.m, self.v):
            if p.grad is None:
                continue
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            p.addcdiv_(m, v.div(1 - b2 ** self.t).sqrt_().add_(self.eps), value=-step)

    def state_dict(self) -> dict:
        return {"t": self.t, "lr": self.lr, "m": self.m, "v": self.v}

    def load_state_dict(self, d: dict) -> None:
        self.t, self.lr = d["t"], d["lr"]
        for dst, src in zip(self.m + self.v, d["m"] + d["v"]):
            dst.copy_(src)
