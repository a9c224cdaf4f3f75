"""Your own training loop over lancetnic_flow's streaming: fit, featurise on Dask, stream batches, train.

    python workflows/custom_loop.py
    python workflows/custom_loop.py --data 'my-data/*.csv' --epochs 5 --shards s3://bucket/shards

``train()`` is one loop; this script takes the same parts and writes the loop
itself, here to train a linear model with AdamW, a one-cycle learning rate
and label smoothing, none of which the CLI offers:

1. ``fit_features``: one tree-reduced pass on the workers → vocabulary, idf, labels;
2. ``OrderedWindow`` + ``featurize_partition``: each worker turns its partition
   into CSR rows and writes them as shards; only their addresses come back;
3. ``BatchStream`` over ``cached_blocks``: per epoch, shards in a seeded
   order through a bounded shuffle buffer, as fixed-size ``RowBlock`` batches;
   ``model_inputs`` and ``answers`` make them tensors;
4. ``evaluate_blocks``: streaming validation metrics after each epoch.

Memory stays bounded as in ``train()``: a few shards and the shuffle buffer
in this process, a partition at a time on each worker.
"""
from __future__ import annotations

import argparse
import os
import tempfile

import torch
from torch import nn

# Dask starts its worker processes by importing this file again (as
# __mp_main__): keep the module level to imports and definitions.


class LinearBag(nn.Module):
    """Logistic regression on TF-IDF rows, in O(non-zeros): a weighted sum of
    one weight row per term. Its output is the dict every lancetnic_flow
    model returns, so ``evaluate_blocks`` can score it."""

    def __init__(self, dim: int, classes: int):
        super().__init__()
        self.bag = nn.EmbeddingBag(dim, classes, mode="sum")
        self.bias = nn.Parameter(torch.zeros(classes))
        nn.init.zeros_(self.bag.weight)

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None,
                numeric: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        return {"logits": self.bag(indices, offsets, per_sample_weights=weights) + self.bias}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="demo-data/custom-loop.csv",
                   help="text and label columns, any format lancetnic-flow reads; generated if missing")
    p.add_argument("--rows", type=int, default=10_000, help="rows to generate when --data is missing")
    p.add_argument("--shards", help="where the featurised rows go, any fsspec URL (default: a temporary folder)")
    p.add_argument("--blocksize", default="1MiB", help="bytes of input per partition (raise it for large data)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--workers", type=int, default=2, help="local Dask workers")
    p.add_argument("--scheduler", help="an existing Dask scheduler (tcp://HOST:8786) instead of local workers")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def main() -> None:
    from lancetnic_flow import FeatureConfig, write_corpus
    from lancetnic_flow.data.sources import Columns, plan_source
    from lancetnic_flow.dataflow.cluster import open_cluster
    from lancetnic_flow.dataflow.plan import plan_memory
    from lancetnic_flow.dataflow.shards import featurize_partition, load_shard
    from lancetnic_flow.dataflow.stream import BatchStream, cached_blocks, prefetch
    from lancetnic_flow.dataflow.window import OrderedWindow
    from lancetnic_flow.features.fit import fit_features
    from lancetnic_flow.models.inputs import answers, model_inputs
    from lancetnic_flow.models.tasks import Task
    from lancetnic_flow.sizes import parse_size
    from lancetnic_flow.training.step import evaluate_blocks

    args = parse_args()
    if not any(c in args.data for c in "*?[") and "://" not in args.data and not os.path.exists(args.data):
        os.makedirs(os.path.dirname(args.data) or ".", exist_ok=True)
        write_corpus(args.data, args.rows, classes=4, seed=13)
    torch.manual_seed(args.seed)
    tmp = tempfile.TemporaryDirectory(prefix="lancetnic-shards-")
    shard_dir = args.shards or tmp.name
    columns = Columns(text=("text",), label="label")
    source = plan_source([args.data], blocksize=parse_size(args.blocksize))
    plan = plan_memory(workers=args.workers)

    with open_cluster(plan, scheduler=args.scheduler) as client:
        # 1. Fit: the vocabulary (words and word pairs), idf and labels.
        features, _ = fit_features(client, source.partitions, columns,
                                   FeatureConfig(mode="tfidf", ngrams=2, min_df=2, max_features=100_000),
                                   storage_options={}, chunk_bytes=plan.partition, val_fraction=0.1)
        # 2. Featurise: shards written by the workers, a bounded window of tasks at a time.
        feed = OrderedWindow(client, featurize_partition, [(p, None) for p in source.partitions], plan.in_flight,
                             columns=columns, features=client.scatter(features, broadcast=True),
                             shard_dir=shard_dir, storage_options={}, cache_options={},
                             chunk_bytes=plan.partition, val_fraction=0.1)
        results = list(feed)
    train_shards = [s for r in results for s in r.shards if s.split == "train"]
    val_shards = [s for r in results for s in r.shards if s.split == "val"]
    train_rows = sum(r.train_rows for r in results)
    print(f"{features.dim:,} features, {len(features.labels)} classes, {train_rows:,} training rows "
          f"in {len(train_shards)} shards", flush=True)

    # 3. The loop: a model, an optimiser and a schedule of our own.
    device = torch.device("cpu")
    model = LinearBag(features.dim, len(features.labels))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    steps = args.epochs * -(-train_rows // args.batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps)
    task = Task("classify", classes=len(features.labels))   # for evaluate_blocks' loss and scores
    load = lambda info: load_shard(info, {})  # noqa: E731
    for epoch in range(args.epochs):
        batches = BatchStream(lambda epoch=epoch: cached_blocks(train_shards, args.seed, epoch, load),
                              batch_size=args.batch_size, shuffle_buffer=5_000, seed=args.seed, epoch=epoch)
        total = 0.0
        for batch in batches:
            labels, _ = answers(batch, device)
            loss = nn.functional.cross_entropy(model(**model_inputs(batch, device))["logits"], labels,
                                               label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            schedule.step()
            total += loss.item() * len(batch)
        # 4. Validation, streamed shard by shard.
        val = evaluate_blocks(model, prefetch(load(s) for s in val_shards), task, device).result()
        print(f"epoch {epoch + 1}  train_loss {total / train_rows:.4f}  val_accuracy {val['accuracy']:.4f}  "
              f"val_macro_f1 {val['macro_f1']:.4f}", flush=True)
    tmp.cleanup()
    print(f"val_accuracy {val['accuracy']:.4f}")


if __name__ == "__main__":
    main()
