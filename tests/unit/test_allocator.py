"""Memory given back, and large weights on huge pages (lancetnic_flow/allocator.py)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from lancetnic_flow.allocator import HUGE_PAGES_FROM, on_huge_pages


def _smaps_field_at(address: int, field: str) -> list[str] | None:
    """``field``'s values for the mapping holding ``address`` in /proc/self/smaps (None: not Linux)."""
    smaps = Path("/proc/self/smaps")
    if not smaps.exists():
        return None
    inside = False
    for line in smaps.read_text().splitlines():
        span = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
        if span:
            inside = int(span[1], 16) <= address < int(span[2], 16)
        elif inside and line.startswith(field + ":"):
            return line.split()[1:]
    return []


def test_large_parameters_move_to_new_memory_with_the_same_values_and_the_same_parameter_objects():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(2**16, 40), torch.nn.Linear(40, 3))
    big, small = model[0].weight, model[1].weight
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ptrs = {n: p.data_ptr() for n, p in model.named_parameters()}
    assert big.nbytes >= HUGE_PAGES_FROM > small.nbytes
    assert on_huge_pages(model) == big.nbytes
    assert model[0].weight is big and model[1].weight is small
    assert big.data_ptr() != ptrs["0.weight"] and small.data_ptr() == ptrs["1.weight"]
    for n, p in model.named_parameters():
        assert torch.equal(p.detach(), before[n]), n
    big.data[3, 4] = 7.0   # still the model's own memory, writable
    assert model[0].weight[3, 4].item() == 7.0


def test_a_moved_weight_is_memory_the_kernel_is_asked_to_back_with_huge_pages():
    # What lancetnic_flow controls is the ask (madvise(MADV_HUGEPAGE): VmFlags "hg"); whether
    # the kernel has a huge page free at that moment is the machine's, and a test session with
    # fragmented memory gets none (AnonHugePages 0 even for numpy's own arrays, seen in CI).
    mode = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not mode.exists() or "[never]" in mode.read_text():
        pytest.skip("no transparent huge pages on this machine")
    model = torch.nn.Embedding(2**17, 64)   # 32 MiB
    on_huge_pages(model)
    flags = _smaps_field_at(model.weight.data_ptr() + model.weight.nbytes // 2, "VmFlags")
    assert flags is not None and "hg" in flags, flags
