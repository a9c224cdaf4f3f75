"""LinearSVM's training step: one-vs-rest hinge loss, one example at a time.

A linear model over sparse rows (``ScalpelNet`` with no hidden layer: the
sparse layer's weight is terms × classes) trained as scikit-learn's
``SGDClassifier(loss="hinge")`` and Vowpal Wabbit train theirs: each row in
turn scores every class, and each class whose margin is short of 1
(``t·s < 1``, ``t = +1`` for the row's class and ``-1`` for the others) moves
its weights of the row's terms by ``lr · t · value``. A row already on the
right side of every margin changes nothing, so a pass costs O(non-zeros ×
classes) to score and far less to update; a mini-batch gradient of the same
loss, averaged over 512 rows, reaches a logistic regression's accuracy, not
a linear SVM's (docs/benchmarks.md, "How the defaults were chosen").

The step runs in compiled code over the weights' memory, in place and
without autograd: the trainer keeps the one copy of the weights it would
keep anyway. The model is the network (``ScalpelNet``: ``--ddp`` ranks,
trials) or its arrays (:class:`~.linear_arrays.LinearArrays`: a run in one
process, without torch); the step reads the same arrays of either.
Rows are taken in the batch's (shuffled) order, so the
result is a pure function of the stream: resume and partition invariance
hold as for every other model.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numba import njit
from numba.extending import overload

from .linear_arrays import is_arrays

# The bias moves a hundredth of a weight's step, as scikit-learn's intercept
# on sparse rows: every row touches it, and at full rate it would swing with
# each example instead of settling at the classes' balance.
BIAS_RATE = 0.01


def _targets(labels, r, t):
    """Row ``r``'s target per class into ``t`` (+1 or -1); False for a row with no label
    (a class id of -1; a label set, empty or not, is always a target).
    Compiled per labels' shape by the overload below."""
    raise NotImplementedError("compiled only")


@overload(_targets, jit_options={"cache": True, "nogil": True})
def _targets_compiled(labels, r, t):
    if labels.ndim == 1:
        # One label a row (an id; -1: none): +1 for its class, -1 for every other.
        def one(labels, r, t):
            y = labels[r]
            if y < 0:
                return False
            for k in range(t.shape[0]):
                t[k] = 1.0 if k == y else -1.0
            return True
        return one

    # A set of labels a row (rows × labels, 1 where the row has it): +1 for each
    # label in the set, -1 for the others. An empty set is a target (no label applies:
    # each a negative), as the cross entropy reads it; a row of no label never gets here.
    def sets(labels, r, t):
        for k in range(t.shape[0]):
            t[k] = 1.0 if labels[r, k] else -1.0
        return True
    return sets


@njit(cache=True, nogil=True)
def _hinge_row(r, indices, offsets, values, labels, weight, bias, lr, s, t):
    """Score row ``r`` into ``s`` and train on it (``t``: scratch for its
    targets); returns its hinge loss, or -1.0 for a row without a label
    (scored, not trained)."""
    classes = weight.shape[1]
    a, e = offsets[r], offsets[r + 1]
    for k in range(classes):
        s[k] = bias[k]
    for p in range(a, e):
        row = weight[indices[p]]
        v = values[p]
        for k in range(classes):
            s[k] += row[k] * v
    if not _targets(labels, r, t):
        return -1.0
    total = 0.0
    for k in range(classes):
        short = 1.0 - t[k] * s[k]
        if short > 0.0:
            total += short
            g = lr * t[k]
            for p in range(a, e):
                weight[indices[p], k] += g * values[p]
            bias[k] += g * BIAS_RATE
    return total


@njit(cache=True, nogil=True)
def hinge_pass(indices, offsets, values, labels, weight, bias, lr, scores):
    """Train on each row of a CSR batch in order; ``scores`` (rows × classes)
    receives each row's scores before its own update. Returns the batch's
    summed hinge loss (over rows and classes) and the rows it trained on."""
    total = 0.0
    used = 0
    t = np.empty(weight.shape[1], np.float64)   # float64, as the literals ±1.0 the step was first written with
    for r in range(offsets.shape[0] - 1):
        loss = _hinge_row(r, indices, offsets, values, labels, weight, bias, lr, scores[r], t)
        if loss >= 0.0:
            total += loss
            used += 1
    return total, used


@njit(cache=True, nogil=True)
def hinge_rows(indices, offsets, values, labels, weight, bias, lr, order):
    """Train on the CSR block's rows in ``order`` (the twin's pass over the
    validation rows, shuffled); returns how many it trained on."""
    s = np.empty(weight.shape[1], np.float32)
    t = np.empty(weight.shape[1], np.float64)   # float64, as the literals ±1.0 the step was first written with
    used = 0
    for i in range(order.shape[0]):
        if _hinge_row(order[i], indices, offsets, values, labels, weight, bias, lr, s, t) >= 0.0:
            used += 1
    return used


@njit(cache=True, nogil=True)
def hinge_picks(indices, offsets, values, labels, which, rows, weight, bias, lr, scores):
    """:func:`hinge_pass` over rows named in place: row ``rows[j]`` of block
    ``which[j]`` (``indices`` …: typed lists of each block's arrays), in turn;
    ``scores[j]`` receives its scores before its update. Returns the summed
    hinge loss and the rows trained on."""
    total = 0.0
    used = 0
    t = np.empty(weight.shape[1], np.float64)
    for j in range(rows.shape[0]):
        b = which[j]
        loss = _hinge_row(rows[j], indices[b], offsets[b], values[b], labels[b], weight, bias, lr, scores[j], t)
        if loss >= 0.0:
            total += loss
            used += 1
    return total, used


def picked_step(model: Any, epoch: Any, batch: Any, lr: float) -> tuple[np.ndarray, float]:
    """:func:`margin_step` on a batch of kept rows named in place
    (:class:`~lancetnic_flow.dataflow.kept.PickedBatch` of ``epoch``, a
    ``KeptEpoch``); a model without a twin only."""
    from numba.typed import List

    if epoch.compiled is None:   # once an epoch: the blocks' arrays as typed lists
        epoch.compiled = tuple(List([getattr(b, name) for b in epoch.blocks])
                               for name in ("indices", "offsets", "values", "labels"))
    weight, bias = weights_of(model)
    scores = np.empty((len(batch), weight.shape[1]), np.float32)
    total, used = hinge_picks(*epoch.compiled, batch.which, batch.rows, weight, bias, np.float32(lr), scores)
    return scores, total / max(used, 1)


@njit(cache=True, nogil=True)
def hinge_picks_steps(indices, offsets, values, labels, which, rows, ends, rates, weight, bias, scores, totals, used):
    """:func:`hinge_picks` over consecutive steps in one call: step ``i`` trains rows
    ``ends[i-1]`` (0 for the first) to ``ends[i]`` at rate ``rates[i]``, each row in
    turn, as one call a step would; ``totals[i]`` and ``used[i]`` receive its summed
    hinge loss and the rows it trained on."""
    t = np.empty(weight.shape[1], np.float64)
    start = 0
    for i in range(ends.shape[0]):
        lr = rates[i]
        total = 0.0
        n = 0
        for j in range(start, ends[i]):
            b = which[j]
            loss = _hinge_row(rows[j], indices[b], offsets[b], values[b], labels[b], weight, bias, lr, scores[j], t)
            if loss >= 0.0:
                total += loss
                n += 1
        totals[i] = total
        used[i] = n
        start = ends[i]


def picked_steps(model: Any, epoch: Any, batches: list, lrs: list[float]) -> list[tuple[np.ndarray, float]]:
    """:func:`picked_step` for each of ``batches`` (consecutive steps, at ``lrs``) in one
    compiled call: the same weights, scores and losses as a call a batch. Between
    calls a rank's loop runs Python that pushes the step's hot weight rows out of
    the core's cache; fewer calls leave them there (docs/benchmarks.md)."""
    from numba.typed import List

    if epoch.compiled is None:
        epoch.compiled = tuple(List([getattr(b, name) for b in epoch.blocks])
                               for name in ("indices", "offsets", "values", "labels"))
    weight, bias = weights_of(model)
    sizes = np.array([len(b) for b in batches], np.int64)
    ends = np.cumsum(sizes)
    scores = np.empty((int(ends[-1]), weight.shape[1]), np.float32)
    totals, used = np.zeros(len(batches)), np.zeros(len(batches), np.int64)
    hinge_picks_steps(*epoch.compiled, np.concatenate([b.which for b in batches]),
                      np.concatenate([b.rows for b in batches]), ends, np.array(lrs, np.float32),
                      weight, bias, scores, totals, used)
    starts = ends - sizes
    return [(scores[a:e], totals[i] / max(int(used[i]), 1)) for i, (a, e) in enumerate(zip(starts, ends))]


# The twin (see :func:`add_twin`) steps beside the model in a second thread:
# the kernel releases the GIL, and in epochs read from the cache the workers
# leave the machine's other core idle (docs/benchmarks.md). It runs behind
# the model, not in step with it: the model's step does not wait for the
# twin's, so neither waits while the other core reads the next batch. The
# twin reads only its own weights and takes the same batches at the same
# rates in the same order, so its weights are what they would be in step;
# whatever reads or replaces them (state_dict: checkpoints, the best epoch's
# copy, the save; load_state_dict; twin_learns; adopt_twin) first waits for
# its pending steps (twin_caught_up). At most TWIN_BEHIND batches wait, each
# holding its rows, in the model's ``twin_pending`` (oldest first).
TWIN_BEHIND = 8
_twin_pool: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _twin_pool
    if _twin_pool is None:
        _twin_pool = ThreadPoolExecutor(1, thread_name_prefix="lancetnic-twin")
    return _twin_pool


def twin_caught_up(model: Any) -> None:
    """Wait until ``model``'s twin has taken every step submitted so far (a
    step that failed raises here)."""
    pending = getattr(model, "twin_pending", None)
    while pending:
        pending.popleft().result()


def _caught_up_hook(module: Any, *args) -> None:
    twin_caught_up(module)


def weights_of(model: Any) -> tuple[np.ndarray, np.ndarray]:
    """The model's weight (terms × classes) and bias as arrays over its own memory."""
    if is_arrays(model):
        model.pristine = False   # whoever takes them may write them: a twin made later copies them
        return model.weight, model.bias
    return model.input.weight.detach().numpy(), model.input.bias.detach().numpy()


def twin_of(model: Any) -> tuple[np.ndarray, np.ndarray]:
    """The twin's weight and bias as arrays over its own memory."""
    if is_arrays(model):
        return model.twin_weight, model.twin_bias
    return model.twin_weight.numpy(), model.twin_bias.numpy()


def margin_step(model: Any, indices: np.ndarray, offsets: np.ndarray, values: np.ndarray,
                labels: np.ndarray, lr: float) -> tuple[np.ndarray, float]:
    """One batch of per-example hinge updates on the model's weights (CPU,
    float32), and on its twin when it has one (behind it: see TWIN_BEHIND);
    returns the batch's logits (each row's before its update, as a gradient
    step's forward would give) and its mean loss per row, both the model's own."""
    weight, bias = weights_of(model)
    scores = np.empty((len(offsets) - 1, weight.shape[1]), np.float32)
    if has_twin(model):
        _behind(model, hinge_pass, indices, offsets, values, labels, *twin_of(model), np.float32(lr),
                np.empty_like(scores))
    total, used = hinge_pass(indices, offsets, values, labels, weight, bias, np.float32(lr), scores)
    return scores, total / max(used, 1)


def _behind(model: Any, step: Any, *args: Any) -> None:
    """Submit one of the twin's steps to its thread, and take those done (at most TWIN_BEHIND wait)."""
    pending = model.twin_pending
    pending.append(_pool().submit(step, *args))
    while len(pending) > TWIN_BEHIND or (pending and pending[0].done()):
        pending.popleft().result()


def add_twin(model: Any) -> None:
    """Give a LinearSVM a twin: a second weight and bias that take every step
    the model takes and, after each epoch's validation, also learn the
    validation rows. The model, which never sees them, gives the validation
    figures, early stopping and the probability scale; the twin becomes the
    saved model (:func:`adopt_twin`), which so learns from every row the user
    gave. The twin is part of the state (the network's buffers): checkpoints,
    resume and the best epoch's copy carry it with the weights."""
    if is_arrays(model):
        model.add_twin()
        return
    layer = model.input
    model.register_buffer("twin_weight", layer.weight.detach().clone())
    model.register_buffer("twin_bias", layer.bias.detach().clone())
    model.twin_pending = deque()   # its steps submitted and not yet waited for (TWIN_BEHIND)
    # A copy of the weights holds every step taken; weights loaded are not overwritten by a late one.
    model.register_state_dict_pre_hook(_caught_up_hook)
    model.register_load_state_dict_pre_hook(_caught_up_hook)


def has_twin(model: Any) -> bool:
    """Whether ``model`` carries a twin (:func:`add_twin`)."""
    return getattr(model, "twin_weight", None) is not None


def twin_learns(model: Any, block, lr: float, rng: np.random.Generator) -> int:
    """The twin trains on a block of validation rows, in a shuffled order (drawn
    here, so the order is the caller's); returns how many rows have a label. The
    step runs in the twin's thread, behind its training steps, while the model
    scores the next block: what reads the twin waits for it (twin_caught_up)."""
    order = rng.permutation(len(block)).astype(np.int64)
    _behind(model, hinge_rows, block.indices, block.offsets, block.values, block.labels, *twin_of(model),
            np.float32(lr), order)
    labels = block.labels
    return int((labels >= 0).sum() if labels.ndim == 1 else len(labels))


def adopt_twin(model: Any) -> None:
    """The model takes its twin's weights, and the twin goes: what is saved
    is a plain LinearSVM, its ``logit_scale`` the one fitted on the model."""
    twin_caught_up(model)
    weight, bias = weights_of(model)
    twin_weight, twin_bias = twin_of(model)
    np.copyto(weight, twin_weight)
    np.copyto(bias, twin_bias)
    if is_arrays(model):
        model.drop_twin()
    else:
        del model._buffers["twin_weight"], model._buffers["twin_bias"]


def warm_picks() -> None:
    """Load (or compile, once per machine) :func:`hinge_picks` and :func:`hinge_picks_steps` on a tiny input."""
    from numba.typed import List

    w = np.zeros((2, 2), np.float32)
    blocks = (List([np.zeros(1, np.int32)]), List([np.array([0, 1], np.int64)]), List([np.ones(1, np.float32)]),
              List([np.zeros(1, np.int32)]))
    hinge_picks(*blocks, np.zeros(1, np.int64), np.zeros(1, np.int64), w,
                np.zeros(2, np.float32), np.float32(0.1), np.empty((1, 2), np.float32))
    hinge_picks_steps(*blocks, np.zeros(1, np.int64), np.zeros(1, np.int64), np.ones(1, np.int64),
                      np.full(1, 0.1, np.float32), w, np.zeros(2, np.float32), np.empty((1, 2), np.float32),
                      np.zeros(1), np.zeros(1, np.int64))


def warm() -> None:
    """Load (or compile, once per machine) the kernel on a tiny input."""
    w = np.zeros((2, 2), np.float32)
    hinge_pass(np.zeros(1, np.int32), np.array([0, 1], np.int64), np.ones(1, np.float32),
               np.zeros(1, np.int32), w, np.zeros(2, np.float32), np.float32(0.1), np.empty((1, 2), np.float32))
