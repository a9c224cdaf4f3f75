"""Training rules: how one batch changes a model's weights.

A rule is chosen once per run from the model's spec (``ModelSpec.rule``, by
:func:`rule_for`) and called alike by the single-process loop
(:mod:`.loop`), the ``tune`` trials (:mod:`.trial`) and the ``--ddp`` ranks
(:mod:`.ddp.rank`, for a rule that exchanges gradients). It owns everything
about its way of training: the optimisers it needs, the batch step, what
happens while the validation rows are read, what is done to the weights once
the epochs are over, which epoch's weights are kept and what its weights cost
in memory.

* :class:`GradientRule` — forward, loss, gradients (exchanged between ranks
  under ``--ddp``), the optimisers' step at the schedule's rate.
* :class:`HingeRule` — the per-example one-vs-rest hinge step of a linear
  model (:mod:`lancetnic_flow.models.margin`), with its twin that also
  learns the validation rows, and the softmax scale fitted after training.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np

from ..config import TrainConfig, TrainingConfig
from ..features.rows import RowBlock
from ..models.tasks import Task
from ..registry import MODELS

if TYPE_CHECKING:   # a gradient rule imports torch when it runs; the hinge rule never needs it
    import torch

# A batch's outputs (tensors, or arrays for a model trained without torch) and its mean loss
# (a tensor, or a NumPy scalar: either has .item()).
Step = tuple[dict[str, Any], Any]


class TrainingRule(Protocol):
    """What the loop, the trials and the ranks ask of a way of training."""

    exchanges_gradients: bool   # --ddp ranks run it as backward, gradient exchange, update
    decay_steps: int            # the model's least steps of a linear decay (ModelSpec.decay_steps)
    averages_weights: bool      # --ddp ranks run it as local steps, the weights averaged at each sync
    scales_logits: bool         # whether its scores need a probability scale fitted after training

    def optimizers(self, model: torch.nn.Module) -> list: ...

    def prepare(self, model: torch.nn.Module) -> None: ...

    def train_batch(self, model: torch.nn.Module, task: Task, opts: list, batch: RowBlock, device: torch.device,
                    lr: float) -> Step: ...

    def while_validating(self, model: torch.nn.Module, lr: float, seed: int, epoch: int
                         ) -> Callable[[RowBlock], object] | None: ...

    def finish(self, model: torch.nn.Module) -> None: ...

    def keeps_last_epoch(self) -> bool: ...

    def weight_copies(self) -> float: ...

    def extra_bytes(self) -> int: ...

    def warm(self) -> None: ...

    def resume_options(self, saved_model: dict) -> dict: ...

    def arrays_model(self, name: str, **args: Any) -> tuple[Any, dict] | None: ...

    def rate(self, lr: float) -> float: ...


class GradientRule:
    """Gradient steps through optimisers (``--optimizer`` for the dense
    parameters, ``--sparse-optimizer`` for the input rows)."""

    exchanges_gradients = True
    averages_weights = False
    scales_logits = False
    decay_steps = 0

    def __init__(self, tc: TrainingConfig):
        self.tc = tc

    def optimizers(self, model: torch.nn.Module) -> list:
        from . import optim

        return optim.optimizers_for(model, self.tc)

    def prepare(self, model: torch.nn.Module) -> None:
        return None

    def backward(self, model: torch.nn.Module, task: Task, opts: list, batch: RowBlock, device: torch.device
                 ) -> Step:
        """Forward pass, loss and gradients of one batch; returns the outputs and the (mean) loss."""
        from ..models.inputs import answers, model_inputs
        from . import optim

        labels, targets = answers(batch, device)
        out = model(**model_inputs(batch, device))
        loss = task.loss(out, labels, targets)
        optim.zero_grad(opts)
        loss.backward()
        optim.mean_over(opts, len(batch))   # a --ddp rank's step: every rank's rows (ddp/rank.py)
        return out, loss

    def update(self, opts: list, model: torch.nn.Module, lr: float) -> None:
        """The optimisers' step at learning rate ``lr``, the gradient norm cut to ``--clip-grad`` first."""
        from . import optim

        optim.set_lr(opts, lr)
        optim.step(opts, model, self.tc.clip_grad)

    def train_batch(self, model: torch.nn.Module, task: Task, opts: list, batch: RowBlock, device: torch.device,
                    lr: float) -> Step:
        out, loss = self.backward(model, task, opts, batch, device)
        self.update(opts, model, lr)
        return out, loss

    def while_validating(self, model: torch.nn.Module, lr: float, seed: int, epoch: int) -> None:
        return None

    def finish(self, model: torch.nn.Module) -> None:
        return None

    def keeps_last_epoch(self) -> bool:
        return False

    def weight_copies(self) -> float:
        """Copies of the input rows the trainer holds: weights and the best
        epoch's copy, plus lazy Adam's two moments."""
        return 2.1 if self.tc.sparse_optimizer == "sgd" else 4.2

    def extra_bytes(self) -> int:
        return 0

    def warm(self) -> None:
        """Load the bag models' compiled starting values of input rows in the background, while
        the cluster starts and the fit runs: the first batch then does not wait for it."""
        from ..models.row_starts import warm

        threading.Thread(target=warm, name="lancetnic-row-starts", daemon=True).start()

    def resume_options(self, saved_model: dict) -> dict:
        """Training options a checkpoint's weights (``saved_model``) call for: none."""
        return {}

    def rate(self, lr: float) -> float:
        """The rate an epoch's record names at schedule value ``lr``: ``--lr``'s."""
        return lr

    def arrays_model(self, name: str, **args: Any) -> None:
        """A model that trains without torch: none (the gradients are torch's)."""
        return None


# The hinge step is compiled: numba and LLVM load into the trainer (121 MiB measured).
MARGIN_KERNEL_BYTES = 128 * 2**20


class HingeRule:
    """A linear model's per-example hinge step (no optimiser, no gradient), at
    ``--sparse-lr`` × the schedule's share of ``--lr``; with ``--learn-val``
    its twin learns the validation rows as they are scored, and the saved
    model is the twin."""

    exchanges_gradients = False
    decay_steps = 0
    # Under --ddp each rank steps on its own share and the ranks average their
    # weights at every sync (iterative parameter mixing: McDonald, Hall and
    # Mann, 2010): per epoch, and at a pause.
    averages_weights = True
    scales_logits = True   # hinge scores rank the classes; a fitted factor makes them probabilities

    def __init__(self, tc: TrainingConfig):
        self.tc = tc
        self.scale = (tc.sparse_lr or 0.0) / tc.lr

    def optimizers(self, model: torch.nn.Module) -> list:
        return []

    def prepare(self, model: torch.nn.Module) -> None:
        from ..models.margin import add_twin

        if self.tc.learn_val:
            add_twin(model)

    def train_batch(self, model: torch.nn.Module, task: Task, opts: list, batch: RowBlock, device: torch.device,
                    lr: float) -> Step:
        from ..models.margin import margin_step

        logits, loss = margin_step(model, batch.indices, batch.offsets, batch.values, batch.labels, lr * self.scale)
        return {"logits": logits}, np.float64(loss)

    def rate(self, lr: float) -> float:
        """The rate its steps take at schedule value ``lr`` (``--sparse-lr``'s
        share of it), which an epoch's record names: never ``--lr``'s, which it has not."""
        return lr * self.scale

    def train_picked(self, model: torch.nn.Module, epoch: Any, batch: Any, lr: float) -> Step:
        """:meth:`train_batch` on kept rows named in place (a ``--ddp`` rank's
        epoch over its kept shards: :mod:`~lancetnic_flow.dataflow.kept`)."""
        from ..models.margin import picked_step

        logits, loss = picked_step(model, epoch, batch, lr * self.scale)
        return {"logits": logits}, np.float64(loss)

    def train_picked_steps(self, model: torch.nn.Module, epoch: Any, batches: list, lrs: list[float]) -> list[Step]:
        """:meth:`train_picked` for consecutive ``batches`` at ``lrs`` in one compiled call
        (a rank's steps between two of its meets), with the same results."""
        from ..models.margin import picked_steps

        return [({"logits": logits}, np.float64(loss))
                for logits, loss in picked_steps(model, epoch, batches, [lr * self.scale for lr in lrs])]

    def while_validating(self, model: torch.nn.Module, lr: float, seed: int, epoch: int
                         ) -> Callable[[RowBlock], object] | None:
        """The twin learns the validation rows as the model scores them: at the
        epoch's last rate, in an order drawn from the seed and the epoch (a
        resumed run draws the same)."""
        from ..models.margin import has_twin, twin_learns

        if not has_twin(model):
            return None
        rate = lr * self.scale
        rng = np.random.default_rng([seed, epoch, 0x7A1])
        return lambda block: twin_learns(model, block, rate, rng)

    def finish(self, model: torch.nn.Module) -> None:
        """The twin becomes the model (after the calibration, which the model's
        own scores of the validation rows it never learned give)."""
        from ..models.margin import adopt_twin, has_twin

        if has_twin(model):
            adopt_twin(model)

    def keeps_last_epoch(self) -> bool:
        """Without early stopping the last epoch's weights are kept, not the best
        epoch's: the rate has decayed to 5 % by then, and validation accuracy
        over the last epochs moves by noise, which picked earlier, worse
        models (docs/models.md)."""
        return not self.tc.early_stopping

    def weight_copies(self) -> float:
        copies = 2.1 - (1 if self.keeps_last_epoch() else 0)
        return copies * 2 if self.tc.learn_val is not False else copies   # the twin (and its best copy)

    def extra_bytes(self) -> int:
        return MARGIN_KERNEL_BYTES

    def resume_options(self, saved_model: dict) -> dict:
        """The checkpoint's weights say whether the run learns the validation rows: with its twin
        it goes on learning them, without (the plan had no room, or a version without the twin)
        it goes on without; never decided again from the resuming session's memory plan."""
        return {"learn_val": "twin_weight" in saved_model}

    def arrays_model(self, name: str, **args: Any) -> tuple[Any, dict]:
        """The model as NumPy arrays (:mod:`~lancetnic_flow.models.linear_arrays`), to train
        in one process without importing torch; ``args``: ``create_model``'s. Returns it and
        its model.json record, the network's."""
        from ..models.linear_arrays import create_linear

        return create_linear(name, **args)

    def warm(self) -> None:
        """Load the compiled step (half a second) in the background, while the cluster starts and the fit runs."""
        from ..models.margin import warm

        threading.Thread(target=warm, name="lancetnic-margin", daemon=True).start()


RULES: dict[str, type] = {"gradient": GradientRule, "hinge": HingeRule}


def rule_for(cfg: TrainConfig) -> Any:
    """The training rule of ``cfg``'s model (resolved), for its training options."""
    spec = MODELS[cfg.model.name]
    rule = RULES[spec.rule](cfg.training)
    rule.decay_steps = spec.decay_steps
    return rule
