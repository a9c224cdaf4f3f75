"""What the ranks exchange, and how they find each other.

* :func:`rendezvous` — the ``torch.distributed`` store: rank 0 binds a port
  the kernel picks and publishes it through a Dask Variable.
* :func:`sync_gradients` — after each backward pass, every replica's
  gradients become the mean over the step's rows, every rank's batch: dense
  gradients through one ``all_reduce``; the sparse first layer's used rows
  through one ``all_gather`` of (row ids, row gradients) added by id — the
  traffic is the rows used, never the vocabulary. The same all-reduce
  carries rank 0's pause/stop flag, so agreeing on it costs no round trip.
* :func:`weight_digest` — one number per replica, compared after each
  averaging: replicas that differ (a bug) are not trained on.
* States shipped between a rank and the trainer: tensors on the CPU, RNG states.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from numba import njit

RENDEZVOUS_SECONDS = 300   # how long ranks wait for each other to join


def rendezvous(segment: str, address: str, world: int, rank: int) -> Any:
    """The ranks' ``torch.distributed`` store. Rank 0's store takes a port the
    kernel picks (no window in which another process can take it, as a port
    found free and then bound later has) and tells the others through a Dask
    Variable named ``segment``."""
    from datetime import timedelta

    import torch.distributed as dist
    from distributed import Variable

    wait = timedelta(seconds=RENDEZVOUS_SECONDS)
    where = Variable(segment)
    if rank == 0:
        store = dist.TCPStore(address, 0, world, True, timeout=wait, wait_for_workers=False)
        where.set(store.port)
        return store
    port = int(where.get(timeout=RENDEZVOUS_SECONDS))
    return dist.TCPStore(address, port, world, False, timeout=wait)


def worker_host() -> str:
    from distributed import get_worker

    return get_worker().address.split("://", 1)[-1].rsplit(":", 1)[0]


def pin_interface(host: str) -> str | None:
    """Make gloo and nccl use the network interface that carries ``host``
    (this worker's Dask address); returns its name. Both otherwise pick their
    own address by resolving the machine's hostname, which on many machines and
    containers is 127.0.0.1 — and a rank on another machine cannot reach that.
    ``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` set by the user win."""
    import psutil

    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address == host for a in addrs):
            os.environ.setdefault("GLOO_SOCKET_IFNAME", name)
            os.environ.setdefault("NCCL_SOCKET_IFNAME", name)
            return name
    return None


def sync_gradients(model: torch.nn.Module, rows: int, dist: Any, flag: float = 0.0) -> tuple[int, int]:
    """Make every replica's gradients the mean over the step's rows, every rank's batch
    (``rows``: this rank's batch's rows, 0 without one).

    Returns (the step's rows on every rank — 0: the epoch is over everywhere —, rank 0's
    ``flag``). Each rank's gradient is the mean over its own batch: on more than one rank it is
    weighed by its rows, so a rank's part of the batch (:func:`.shares.rank_batches`, as the
    ranks' shares are) counts as its rows would in one process's batch. Two collectives a step,
    whatever the model:

    1. one ``all_reduce`` of the dense gradients with a tail of ``2 + 2 × world``
       numbers: the step's rows, rank 0's flag (pause for a checkpoint, or stop),
       in slot ``2 + r`` rank r's count of sparse rows used and in slot ``2 + world + r``
       its batch's rows (the others add zero), so agreeing on all of them costs no extra
       round trip;
    2. one ``all_gather`` of each rank's used rows, padded to the largest
       count: the row ids' bits, the row gradients' bits and, for a layer
       that weighs its rows, each row's load (its examples' summed squared
       weights, summed over the ranks: what a cut step reads,
       :func:`~lancetnic_flow.models.sparse_input.capped`) side by side in one
       int32 matrix (a bit copy: nothing is rounded).
    """
    layer = model.input
    device = layer.weight.device
    world, rank = dist.get_world_size(), dist.get_rank()
    row_wise = getattr(layer, "row_wise", False) and layer.training
    # One rank's mean is the step's: it is kept as it is, bit for bit (a trainer task is a single process's run).
    weigh = world > 1
    used = grad = None
    if row_wise and rows and layer.active is not None and layer.active[1].grad is not None:
        used, grad = layer.active[0], layer.active[1].grad
    tail = torch.zeros(2 + 2 * world, device=device)
    tail[0], tail[1] = float(rows), flag
    tail[2 + rank] = 0 if used is None else len(used)
    tail[2 + world + rank] = float(rows)
    dense = [p for n, p in model.named_parameters() if not (row_wise and n == "input.weight")]
    seen = seen_rows(layer, rows, row_wise)
    grads = sum(p.numel() for p in dense)
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in dense]
                     + [seen, tail])
    if weigh:
        flat[:grads].mul_(float(rows))
    dist.all_reduce(flat)
    head = flat[-len(tail):].tolist()
    total, flag = int(round(head[0])), int(round(head[1]))
    if total == 0:
        return 0, flag
    counts = [int(round(c)) for c in head[2:2 + world]]
    batches = [int(round(c)) for c in head[2 + world:]]
    if len(seen):
        layer.started(torch.nonzero(flat[grads:grads + len(seen)], as_tuple=True)[0])
    flat = flat[:grads] / (total if weigh else 1)
    offset = 0
    for p in dense:
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p).clone()
        offset += n
    if row_wise:
        exchange_rows(layer, used, grad, counts, batches if weigh else None, dist)
    return total, flag


def seen_rows(layer: Any, rows: int, row_wise: bool) -> torch.Tensor:
    """A mask of the input rows this rank's batch started (:class:`~lancetnic_flow.models.sparse_input.LazyRows`)
    where the layer's whole gradient is exchanged (an optimiser without a row-wise form): summed
    over the ranks, every rank starts the rows any batch used, so the replicas stay equal (a row one
    rank started and another left at zero took the same step from two values, and the run ended in
    "replicas diverged"). Empty where the rows' exchange starts them (:func:`exchange_rows`), or
    the layer starts none."""
    device = layer.weight.device
    if row_wise or not getattr(layer, "init_std", 0) or not hasattr(layer, "started"):
        return torch.zeros(0, device=device)
    mask = torch.zeros(layer.weight.shape[0], device=device)
    ids, layer.seen = getattr(layer, "seen", None), None
    if rows and ids is not None:
        mask[ids] = 1.0
    return mask


def exchange_rows(layer: Any, used: torch.Tensor | None, grad: torch.Tensor | None, counts: list[int],
                  batches: list[int] | None, dist: Any) -> None:
    """The sparse layer's step rows: every rank's ``used`` rows and their gradients, gathered
    and added by row id, each rank's weighed by its batch's rows over the step's (``batches``;
    None: one rank's, kept as they are), the union started alike on every rank."""
    device, width, world = layer.weight.device, layer.weight.shape[1], len(counts)
    most = max(counts)
    if most == 0:   # batches without a single token anywhere
        layer.active = None
        return
    packed = torch.zeros(most, width + 3, dtype=torch.int32, device=device)
    if used is not None and len(used):
        packed[:len(used), :width] = grad.contiguous().view(torch.int32)
        packed[:len(used), width:width + 2] = used.contiguous().view(torch.int32).view(len(used), 2)
        packed[:len(used), width + 2] = row_load(layer, used).view(torch.int32)
    gathered = [torch.empty_like(packed) for _ in range(world)]
    dist.all_gather(gathered, packed)
    rows_of = [g[:c] for g, c in zip(gathered, counts)]
    grads = torch.cat([r[:, :width] for r in rows_of]).contiguous().view(torch.float32)
    ids = torch.cat([r[:, width:width + 2] for r in rows_of]).contiguous().view(torch.int64).view(-1)
    if batches is not None:
        share = torch.tensor(batches, dtype=torch.float32, device=device) / sum(batches)
        grads = grads * torch.repeat_interleave(share, torch.tensor(counts, device=device)).unsqueeze(1)
    union, inverse = torch.unique(ids, return_inverse=True)
    summed = torch.zeros(len(union), width, device=device).index_add_(0, inverse, grads)
    # A row another rank's batch used first starts here too, at the values it started from there.
    started = getattr(layer, "started", None)
    rows = (started(union) if started else layer.weight.detach().index_select(0, union)).requires_grad_()
    rows.grad = summed
    layer.active = (union, rows)
    if getattr(layer, "weighs_rows", False):
        loads = torch.cat([r[:, width + 2] for r in rows_of]).contiguous().view(torch.float32)
        layer.load = (union, torch.zeros(len(union), device=device).index_add_(0, inverse, loads))


def row_load(layer, used: torch.Tensor) -> torch.Tensor:
    """The load of each of ``used``'s rows (float32) as this rank's step weighed it; zeros
    for a layer that keeps none."""
    load = getattr(layer, "load", None)
    if load is None or load[0] is not used:
        return torch.zeros(len(used), dtype=torch.float32, device=used.device)
    return load[1].float().contiguous()


def gather_metrics(metrics: Any, dist: Any, fresh: Any) -> Any:
    """Rank 0's training ``metrics`` with every other rank's batches added
    (``fresh()``: an empty TaskMetrics of the task, to read a rank's state
    into); the other ranks' come back as they were. An epoch's train figures
    are the epoch's batches (docs/models.md), and under ``--ddp N`` rank 0
    trains 1/N of them: its share alone was reported as the epoch's."""
    world = dist.get_world_size()
    if world < 2:
        return metrics
    states: list = [None] * world
    dist.all_gather_object(states, metrics.state())
    if dist.get_rank() != 0:
        return metrics
    for state in states[1:]:
        other = fresh()
        other.load_state(state)
        metrics.merge(other)
    return metrics


def _ring_bytes(t: torch.Tensor, world: int) -> int:
    """What one rank sends all-reducing ``t`` over a ring: about twice its bytes."""
    return 2 * t.numel() * t.element_size() * (world - 1) // world


def _average_rows(weight: torch.Tensor, touched: np.ndarray, dist: Any, world: int) -> int:
    """Average the rows of ``weight`` that some rank touched (``touched``: this
    rank's mask); the others are equal on every rank since the last sync and
    stay as they are. The union of the masks is agreed first (one byte a row),
    then only its rows travel. Returns the bytes this rank sent."""
    mask = torch.from_numpy(touched.view(np.uint8)).to(weight.device)
    dist.all_reduce(mask, op=dist.ReduceOp.MAX)
    union = torch.nonzero(mask, as_tuple=True)[0]
    sent = _ring_bytes(mask, world)
    if len(union):
        rows = weight.index_select(0, union)
        dist.all_reduce(rows)
        rows.div_(world)
        weight.index_copy_(0, union, rows)
        sent += _ring_bytes(rows, world)
    return sent


def average_weights(model: torch.nn.Module, dist: Any, touched: np.ndarray | None = None) -> int:
    """Make every replica's weights (parameters and floating buffers) the mean
    over the ranks: one ``all_reduce`` per tensor, summed then divided on every
    rank alike, so the replicas come out bit for bit equal. With ``touched``
    (this rank's mask of the sparse layer's rows its steps changed since the
    last sync) that layer's weight averages only the rows some rank touched:
    traffic in proportion to the data since the last sync, not to the
    vocabulary. Returns the bytes this rank sent."""
    world = dist.get_world_size()
    sent = 0
    tensors = [(n, p.data) for n, p in model.named_parameters()] + [
        (n, b) for n, b in model.named_buffers() if b.is_floating_point()]
    for name, t in tensors:
        if touched is not None and name == "input.weight":
            sent += _average_rows(t, touched, dist, world)
            continue
        dist.all_reduce(t)
        t.div_(world)
        sent += _ring_bytes(t, world)
    return sent


# Integer words of each width a parameter's elements come in.
_WORDS = {1: (torch.uint8, np.uint8), 2: (torch.int16, np.uint16), 4: (torch.int32, np.uint32),
          8: (torch.int64, np.uint64)}
DIGEST_MOD = 1 << 64


@njit(cache=True, nogil=True)
def _position_sum(words: np.ndarray) -> np.uint64:
    """Σ words[i] × (2i + 1), modulo 2^64. Integer addition does not depend on
    its order, so the compiler sums in vector registers and every machine gets
    the same number; the odd weights make two elements that trade places
    count (the float64 sum of absolute values this replaced ran one addition
    after another: a sync spent a third of its all-reduce's time on it,
    docs/benchmarks.md)."""
    total = np.uint64(0)
    for i in range(words.shape[0]):
        total += np.uint64(words[i]) * np.uint64(2 * i + 1)
    return total


def warm_digest() -> None:
    """Load the compiled digest pass for float32 weights (a first call costs a third of
    a second even from numba's cache): in the background, while a rank joins its group."""
    _position_sum(np.zeros(1, np.uint32))


def _tensor_digest(t: torch.Tensor) -> int:
    """:func:`_position_sum` of a tensor's elements' bits, in their logical order."""
    t = t.detach()
    if t.device.type != "cpu" or not t.is_contiguous():
        t = t.contiguous().cpu()
    as_int, unsigned = _WORDS[t.element_size()]
    flat = t.reshape(-1)
    words = (flat if flat.dtype == as_int else flat.view(as_int)).numpy().view(unsigned)
    return int(_position_sum(words))


def weight_digest(model: torch.nn.Module) -> int:
    """A checksum of every parameter's bits, in [0, 2^64): equal on replicas whose
    weights are equal bit for bit, whatever their values (NaN included), and
    different, but for a chance in 2^64, where one element differs or two trade
    places. A CPU tensor is read in place; others are copied to the CPU first."""
    total = 0
    for p in model.parameters():
        total = (total + _tensor_digest(p)) % DIGEST_MOD
    return total


def to_cpu(obj: Any) -> Any:
    """A state (nested dicts/lists of tensors) with every tensor copied to the CPU, for shipping."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()   # a copy off a GPU; on the CPU the task has ended, nothing changes it
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


def rng_state(device: torch.device) -> list:
    return [torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None]


def set_rng_state(state: list, device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if device.type == "cuda" and state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)
