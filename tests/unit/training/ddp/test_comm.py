"""The replicas' weight digest (training/ddp/comm.py): what the ranks compare after each averaging."""
from __future__ import annotations

import pytest
import torch

from lancetnic_flow.training.ddp.comm import weight_digest


def _reference(model: torch.nn.Module) -> float:
    return float(sum(p.detach().double().abs().sum().item() for p in model.parameters()))


def test_weight_digest_is_the_float64_sum_of_absolute_weights_of_every_parameter():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(7, 300), torch.nn.Linear(300, 3, bias=False))
    assert weight_digest(model) == pytest.approx(_reference(model), rel=1e-12)


def test_weight_digest_tells_replicas_one_weight_apart():
    torch.manual_seed(1)
    a = torch.nn.Linear(50, 20)
    b = torch.nn.Linear(50, 20)
    b.load_state_dict(a.state_dict())
    assert weight_digest(a) == weight_digest(b)
    with torch.no_grad():
        b.weight[13, 7] += 1e-3
    assert weight_digest(a) != weight_digest(b)


def test_weight_digest_of_a_non_contiguous_or_half_precision_parameter_sums_it_too():
    torch.manual_seed(2)
    model = torch.nn.Linear(9, 4)
    with torch.no_grad():
        model.weight.data = model.weight.data.t().contiguous().t()   # a transposed view: not contiguous
    model.bias.data = model.bias.data.half()
    assert not model.weight.is_contiguous()
    assert weight_digest(model) == pytest.approx(_reference(model), rel=1e-6)
