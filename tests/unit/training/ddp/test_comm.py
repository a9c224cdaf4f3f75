"""The replicas' weight digest (training/ddp/comm.py): what the ranks compare after each averaging."""
from __future__ import annotations

import threading

import pytest
import torch

from lancetnic_flow.training.ddp.comm import DIGEST_MOD, weight_digest


def _reference(model: torch.nn.Module) -> int:
    """Σ over the parameters of Σ_i bits_i × (2i + 1) mod 2^64, in Python integers."""
    total = 0
    for p in model.parameters():
        t = p.detach().contiguous()
        as_int = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
        bits = t.reshape(-1).view(as_int).tolist()
        mask = (1 << (8 * t.element_size())) - 1
        total += sum((b & mask) * (2 * i + 1) for i, b in enumerate(bits))
    return total % DIGEST_MOD


def test_weight_digest_is_the_position_weighted_sum_of_every_parameters_bits_modulo_2_to_the_64():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(7, 300), torch.nn.Linear(300, 3, bias=False))
    assert weight_digest(model) == _reference(model)
    assert 0 <= weight_digest(model) < DIGEST_MOD


def test_weight_digest_tells_replicas_one_weight_apart_two_weights_traded_or_a_sign_flipped():
    torch.manual_seed(1)
    a = torch.nn.Linear(50, 20)
    b = torch.nn.Linear(50, 20)
    b.load_state_dict(a.state_dict())
    assert weight_digest(a) == weight_digest(b)
    with torch.no_grad():
        b.weight[13, 7] = torch.nextafter(b.weight[13, 7], torch.tensor(10.0))   # one ulp
    assert weight_digest(a) != weight_digest(b)
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        b.weight[3, 4], b.weight[3, 5] = a.weight[3, 5].clone(), a.weight[3, 4].clone()
    assert weight_digest(a) != weight_digest(b)
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        b.bias[2] = -b.bias[2]
    assert weight_digest(a) != weight_digest(b)


def test_replicas_equal_bit_for_bit_have_one_digest_even_holding_nan():
    a = torch.nn.Linear(6, 3)
    with torch.no_grad():
        a.weight[1, 1] = float("nan")
    b = torch.nn.Linear(6, 3)
    b.load_state_dict(a.state_dict())
    assert weight_digest(a) == weight_digest(b)   # a float sum made every such pair "differ"


def test_weight_digest_of_a_non_contiguous_or_half_precision_parameter_reads_it_in_its_logical_order():
    torch.manual_seed(2)
    model = torch.nn.Linear(9, 4)
    with torch.no_grad():
        model.weight.data = model.weight.data.t().contiguous().t()   # a transposed view: not contiguous
    model.bias.data = model.bias.data.half()
    assert not model.weight.is_contiguous()
    assert weight_digest(model) == _reference(model)


class _Ranks:
    """What gather_metrics asks of torch.distributed, for one rank of a group
    whose other ranks' objects are given."""

    def __init__(self, rank: int, objects: list):
        self.rank, self.objects = rank, objects

    def get_world_size(self) -> int:
        return len(self.objects)

    def get_rank(self) -> int:
        return self.rank

    def all_gather_object(self, out: list, obj) -> None:
        out[:] = [obj if r == self.rank else o for r, o in enumerate(self.objects)]


@pytest.mark.parametrize("kind", ["classify", "multitask"])
def test_an_epochs_train_figures_under_ddp_count_every_ranks_batches_not_rank_0s_share(kind):
    import numpy as np

    from lancetnic_flow.models.tasks import Task
    from lancetnic_flow.training.ddp.comm import gather_metrics

    task = Task(kind, classes=3)
    rng = np.random.default_rng(0)
    batches = [({"logits": rng.normal(size=(n, 3)), "value": rng.normal(size=n)}, rng.integers(0, 3, n),
                rng.normal(size=n), float(n)) for n in (5, 7, 4)]
    one = task.new_metrics()   # one process: every batch
    for b in batches:
        one.update(*b)
    ranks = [task.new_metrics(), task.new_metrics()]   # rank 0 trained the first two batches, rank 1 the last
    for r, b in zip((0, 0, 1), batches):
        ranks[r].update(*b)
    states = [m.state() for m in ranks]
    merged, want = gather_metrics(ranks[0], _Ranks(0, states), task.new_metrics).result(), one.result()
    keys = ["rows", "loss", "accuracy", "macro_f1"] + (["mae", "rmse"] if kind == "multitask" else [])
    assert merged["rows"] == 16
    assert [merged[k] for k in keys] == pytest.approx([want[k] for k in keys])
    # the other ranks keep their own (rank 0 reports the epoch)
    assert gather_metrics(ranks[1], _Ranks(1, states), task.new_metrics).result()["rows"] == 4


class _TwoAlikeRanks:
    """torch.distributed as rank 0 of two whose other rank had the very same batch."""

    def get_world_size(self):
        return 2

    def get_rank(self):
        return 0

    def all_reduce(self, flat):
        count, rows = flat[-4].item(), flat[-2].item()   # the tail's slots of rank 0 (sync_gradients)
        flat.add_(flat.clone())
        flat[-4:] = torch.tensor([count, count, rows, rows])

    def all_gather(self, gathered, packed):
        for g in gathered:
            g.copy_(packed)


def test_the_rows_a_cut_step_weighs_under_ddp_carry_every_ranks_load_not_this_ranks():
    """A value head's input rows are cut by their examples' summed squared weights
    (sparse_input.capped): under --ddp the exchanged rows carry the sum over the ranks, so the
    cut reads the step's whole batch; before, the exchanged rows carried none and stepped uncut."""
    from lancetnic_flow.models import create_model
    from lancetnic_flow.training.ddp.comm import sync_gradients
    from lancetnic_flow.training.optim import optimizers_for
    from lancetnic_flow.config import TrainingConfig

    model, _ = create_model("ScalpelReg", dim=10, classes=0, regress=True, hidden=4, layers=1, dropout=0.0,
                            embed=None, numeric=0)
    optimizers_for(model, TrainingConfig(optimizer="adam", sparse_optimizer="sgd", sparse_lr=1.0))
    model.train()
    out = model(torch.tensor([1, 2, 1, 3]), torch.tensor([0, 2]), torch.tensor([0.6, 0.8, 1.0, 0.5]))
    out["value"].sum().backward()
    local = model.input.load[1].clone()
    assert sync_gradients(model, 2, _TwoAlikeRanks()) == (4, 0)
    union, rows = model.input.active
    assert model.input.load[0] is union and union.tolist() == [1, 2, 3]
    torch.testing.assert_close(model.input.load[1], 2 * local)
    torch.testing.assert_close(local, torch.tensor([0.36 + 1.0, 0.64, 0.25]))


class _OtherRowRank:
    """torch.distributed as rank 0 of two whose other rank's batch used input row ``row`` alone."""

    def __init__(self, row: int, width: int):
        self.row, self.width = row, width

    def get_world_size(self):
        return 2

    def get_rank(self):
        return 0

    def all_reduce(self, flat):
        flat[-6], flat[-3], flat[-1] = 2.0, 1.0, 1.0   # the step's rows; the other's row used, its batch's row

    def all_gather(self, gathered, packed):
        gathered[0].copy_(packed)
        other = torch.zeros_like(packed)
        other[0, :self.width] = torch.ones(self.width).view(torch.int32)
        other[0, self.width:self.width + 2] = torch.tensor([self.row]).view(torch.int32)
        gathered[1].copy_(other)


def test_a_row_only_another_ranks_batch_used_starts_here_at_the_values_it_started_from_there():
    """Input rows start at zero and take their starting values when a batch first uses them: a row
    only the other rank's batch used was stepped from its starting values there and from zero here,
    and the replicas diverged. Every rank starts the rows of the step's union alike."""
    from lancetnic_flow.models import create_model
    from lancetnic_flow.training.ddp.comm import sync_gradients

    def model():
        torch.manual_seed(0)
        return create_model("ScalpelMC", dim=10, classes=2, regress=False, hidden=4, layers=1, dropout=0.0,
                            embed=None, numeric=0)[0].train()

    here, there = model(), model()
    there(torch.tensor([5]), torch.tensor([0]), None)   # the other rank's forward starts row 5 there
    out = here(torch.tensor([1]), torch.tensor([0]), None)
    out["logits"].sum().backward()
    sync_gradients(here, 1, _OtherRowRank(5, 4))
    union, rows = here.input.active
    assert union.tolist() == [1, 5]
    torch.testing.assert_close(rows[1].detach(), there.input.weight[5].detach(), rtol=0, atol=0)
    torch.testing.assert_close(here.input.weight[5], there.input.weight[5], rtol=0, atol=0)


class _Hub:
    """What ``world`` ranks running in threads of this process exchange through."""

    def __init__(self, world: int):
        self.world, self.barrier, self.slots = world, threading.Barrier(world, timeout=30), [None] * world


class _ThreadRank:
    """torch.distributed as rank ``rank`` of the hub's ranks: sums in rank order, alike on every rank."""

    def __init__(self, hub: _Hub, rank: int):
        self.hub, self.rank = hub, rank

    def get_world_size(self):
        return self.hub.world

    def get_rank(self):
        return self.rank

    def _everyones(self, t: torch.Tensor) -> list:
        self.hub.slots[self.rank] = t.clone()
        self.hub.barrier.wait()
        got = list(self.hub.slots)
        self.hub.barrier.wait()
        return got

    def all_reduce(self, t):
        got = self._everyones(t)
        t.copy_(torch.stack(got).sum(0))

    def all_gather(self, out, t):
        for o, g in zip(out, self._everyones(t)):
            o.copy_(g)


def _bags(n: int, seed: int = 3):
    """``n`` rows of a few of 40 terms each, two classes and a target."""
    import numpy as np

    from lancetnic_flow.features.rows import RowBlock

    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 6, n)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return RowBlock(rng.integers(1, 40, offsets[-1]).astype(np.int32), offsets,
                    rng.random(offsets[-1]).astype(np.float32), labels=(np.arange(n) % 2).astype(np.int32),
                    targets=rng.normal(size=n).astype(np.float32))


def _trained(name: str, kind: str, parts: list, steps: int = 3, optimizer: str = "adam") -> list:
    """Model ``name`` after ``steps`` steps of one batch dealt to ranks as ``parts`` (row ranges:
    one, a single process), each a rank's thread exchanging gradients as a --ddp rank does; every
    rank's replica. ``optimizer`` other than adam: one without a row-wise form, for every weight."""
    from lancetnic_flow.config import TrainingConfig
    from lancetnic_flow.models import MODELS, create_model
    from lancetnic_flow.models.tasks import Task
    from lancetnic_flow.training import optim
    from lancetnic_flow.training.ddp.comm import sync_gradients
    from lancetnic_flow.training.rules import GradientRule

    spec = MODELS[name]
    row_wise = optimizer == "adam"
    tc = TrainingConfig(optimizer=optimizer, lr=0.01, sparse_optimizer=spec.sparse_optimizer if row_wise else None,
                        sparse_lr=spec.sparse_lr if row_wise else None, batch_size=12)
    batch, hub, models = _bags(12), _Hub(len(parts)), []
    for _ in parts:   # built here: the threads share torch's generator
        torch.manual_seed(0)
        models.append(create_model(name, dim=40, classes=2, regress=kind != "classify", hidden=8, layers=1,
                                   dropout=0.0, embed=8, numeric=0)[0].train())

    def rank(r: int) -> None:
        model, rule, task = models[r], GradientRule(tc), Task(kind=kind, classes=2)
        opts = rule.optimizers(model)
        mine = batch.slice(*parts[r]) if parts[r][1] > parts[r][0] else None
        for _ in range(steps):
            if mine is not None:
                rule.backward(model, task, opts, mine, torch.device("cpu"))
            else:   # as a rank without a batch does (ddp/rank.py)
                optim.zero_grad(opts)
                model.input.active = None
            if len(parts) > 1:
                rows, _ = sync_gradients(model, len(mine) if mine is not None else 0, _ThreadRank(hub, r))
                optim.mean_over(opts, rows)
            rule.update(opts, model, tc.lr)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(parts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return models


@pytest.mark.parametrize("name,kind", [("ScalpelMC", "classify"), ("FastTextBag", "classify"),
                                       ("ScalpelMTSK", "multitask"), ("ScalpelReg", "regress"),
                                       ("LancetMC", "classify")])
@pytest.mark.parametrize("parts", [[(0, 9), (9, 12)], [(0, 12), (12, 12)], [(0, 6), (6, 12)]])
def test_ranks_that_split_a_batch_however_unevenly_step_as_one_process_on_the_whole_batch(name, kind, parts):
    """A step under --ddp is one process's step on the ranks' batches together: each rank's mean
    gradient is weighed by its rows (the step's mean over its rows, not the mean of the ranks'
    means), a rank without a batch adds nothing, and a value head's input rows step at its
    per-example rate over the step's rows. A rank of 9 rows and one of 3 stepped the 3 rows' mean
    as heavily as the 9 rows'."""
    one = _trained(name, kind, [(0, 12)])[0]
    ranks = _trained(name, kind, parts)[0]
    for (key, want), got in zip(one.state_dict().items(), ranks.state_dict().values()):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6, msg=key)


@pytest.mark.parametrize("optimizer", ["radam", "rmsprop", "adadelta"])
def test_ranks_whose_whole_input_gradient_is_exchanged_start_the_rows_any_rank_used_and_stay_equal(optimizer):
    """An optimiser without a row-wise form exchanges the input layer's whole gradient: a row only
    one rank's batch used started there and stayed zero on the other, the same step moved two
    values, and the run ended in "the --ddp replicas diverged". Every rank starts the rows any
    rank's batch used; the replicas stay equal and step as one process on the whole batch."""
    one = _trained("ScalpelMC", "classify", [(0, 12)], optimizer=optimizer)[0]
    ranks = _trained("ScalpelMC", "classify", [(0, 9), (9, 12)], optimizer=optimizer)
    for (key, want), a, b in zip(one.state_dict().items(), ranks[0].state_dict().values(),
                                 ranks[1].state_dict().values()):
        assert torch.equal(a, b), key
        torch.testing.assert_close(a, want, rtol=1e-4, atol=1e-6, msg=key)
