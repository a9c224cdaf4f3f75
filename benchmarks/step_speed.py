"""Step time of the sparse first layer: EmbeddingBag + SparseAdam vs SparseInput + RowOptimizer.

    .venv/bin/python benchmarks/step_speed.py [--threads 1] [--vocab 18000] [--nnz 60] [--batch 256]

One training step (forward, backward, optimiser) on a random batch of
``--batch`` rows with ``--nnz`` non-zeros each, for widths 256, 128 and 64,
averaged over 30 steps after 3 warm-up steps.
"""
from __future__ import annotations

import argparse
import time

import torch

from lancetnic_flow.models.sparse_input import RowOptimizer, SparseInput


def timed(step, n: int = 30) -> float:
    for _ in range(3):
        step()
    t = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - t) / n * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=18_000)
    ap.add_argument("--nnz", type=int, default=60)
    ap.add_argument("--batch", type=int, default=256)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, a.vocab, (a.batch * a.nnz,), generator=g)
    off = torch.arange(0, a.batch * a.nnz, a.nnz)
    w = torch.rand(a.batch * a.nnz, generator=g)
    print(f"{a.threads} thread(s), vocabulary {a.vocab:,}, batch {a.batch} × {a.nnz} non-zeros")
    print("| width | EmbeddingBag + SparseAdam | SparseInput + RowOptimizer |")
    print("|---:|---:|---:|")
    for width in (256, 128, 64):
        bag = torch.nn.EmbeddingBag(a.vocab, width, mode="sum", sparse=True)
        opt = torch.optim.SparseAdam(bag.parameters(), lr=1e-3)

        def step_bag() -> None:
            opt.zero_grad()
            bag(idx, off, per_sample_weights=w).sum().backward()
            opt.step()

        layer = SparseInput(a.vocab, width)
        row = RowOptimizer(layer, "adam", lr=1e-3)

        def step_rows() -> None:
            layer(idx, off, w).sum().backward()
            row.step()

        print(f"| {width} | {timed(step_bag):.1f} ms | {timed(step_rows):.1f} ms |")


if __name__ == "__main__":
    main()
