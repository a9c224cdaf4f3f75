"""Train your own torch model on the streamed sparse rows: register it, then train it like a built-in one.

    python workflows/custom_model.py
    python workflows/custom_model.py --data 'my-data/*.csv' --epochs 5 --hidden 128

A model is a ``torch.nn.Module`` class in ``lancetnic_flow.models.NETS`` and
a name in ``lancetnic_flow.models.MODELS`` (a ``ModelSpec``: the class, the
tasks it does, the features it reads). ``train`` then builds it from
keyword arguments, streams batches to it and saves it like any other; the
run folder stores the class name and the arguments as JSON, never code, so
the process that loads the run registers the class first (as this script
does, at import).

What the trainer asks of the class:

* ``__init__(dim, classes, regress, hidden, layers, dropout, numeric)``, and
  ``self.config``: those arguments as a dict (saved to ``model.json``);
* ``forward(indices, offsets, weights, numeric)``: a batch of CSR rows, as
  ``lancetnic_flow.models.inputs.model_inputs`` builds it, returning
  ``{"logits": (rows, classes)}`` (and/or ``{"value": (rows,)}``);
* the sparse first layer as ``self.input``, a ``SparseInput``: the Adam and
  SGD optimisers update only the rows of it a batch used.
"""
from __future__ import annotations

import argparse
import os

import torch
from torch import nn

from lancetnic_flow.models import MODELS, NETS, ModelSpec
from lancetnic_flow.models.sparse_input import SparseInput

# Dask starts its worker processes by importing this file again (as
# __mp_main__): keep the module level to imports and definitions.


class GatedBag(nn.Module):
    """A TF-IDF row → a gated linear unit (GLU) → class logits: the gate lets
    one term switch another off, which a ReLU layer does less directly."""

    def __init__(self, dim: int, classes: int, regress: bool = False, hidden: int = 64, layers: int = 1,
                 dropout: float = 0.2, numeric: int = 0):
        super().__init__()
        if regress or numeric:
            raise ValueError("GatedBag classifies text only")
        self.config = {"dim": dim, "classes": classes, "hidden": hidden, "dropout": dropout}
        self.input = SparseInput(dim, 2 * hidden)        # values and gates, in O(non-zeros)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, classes)

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None,
                numeric: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        h = nn.functional.glu(self.input(indices, offsets, weights), dim=1)
        return {"logits": self.out(self.dropout(h))}


NETS["GatedBag"] = GatedBag
MODELS["GatedBagMC"] = ModelSpec("GatedBag", tasks=("classify",), features=("tfidf", "hashing"),
                                 summary="GLU over sparse TF-IDF rows")


def print_epoch(kind: str, event: dict) -> None:
    """An Events listener: one line per epoch."""
    if kind == "epoch":
        print(f"epoch {event['epoch']}  train_loss {event['train_loss']:.4f}  "
              f"val_accuracy {event['val_accuracy']:.4f}", flush=True)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="demo-data/custom-model.csv",
                   help="text and label columns, any format lancetnic-flow reads; generated if missing")
    p.add_argument("--rows", type=int, default=10_000, help="rows to generate when --data is missing")
    p.add_argument("--out", default="runs", help="parent of the run folder")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--workers", type=int, help="local Dask workers (default 2; an existing cluster's are its own)")
    p.add_argument("--scheduler", help="an existing Dask scheduler (tcp://HOST:8786) instead of local workers")
    return p.parse_args()


def main() -> None:
    from lancetnic_flow import (ClusterConfig, DataConfig, Events, ModelConfig, OutputConfig, Predictor, TrainConfig,
                                TrainingConfig, train, write_corpus)

    args = parse_args()
    if not any(c in args.data for c in "*?[") and "://" not in args.data and not os.path.exists(args.data):
        os.makedirs(os.path.dirname(args.data) or ".", exist_ok=True)
        write_corpus(args.data, args.rows, classes=4, seed=12)

    events = Events()
    events.subscribe(print_epoch)
    cfg = TrainConfig(data=DataConfig(train=[args.data]),
                      model=ModelConfig(name="GatedBagMC", hidden=args.hidden, dropout=0.1),
                      training=TrainingConfig(epochs=args.epochs, lr=args.lr),
                      cluster=ClusterConfig(workers=args.workers if args.scheduler else args.workers or 2,
                                            scheduler=args.scheduler),
                      output=OutputConfig(out=args.out, name="custom-model"))
    result = train(cfg, events)

    # The run loads like any other, in a process where GatedBag is registered.
    predictor = Predictor(result.run)
    print(f"loaded {predictor.run.meta['net']}({predictor.run.meta['kwargs']})")
    for p in predictor.predict(["The morani tesu was a kalop of great plondplea."]):
        print(f"→ {p['label']} ({p['probability']:.2f})")
    print(f"run {result.run}")
    print(f"val_accuracy {result.metrics['val_accuracy']:.4f}")


if __name__ == "__main__":
    main()
