"""Train with your own tokenizer: register it by name, then train and predict as with the built-in one.

    python workflows/custom_tokenizer.py
    python workflows/custom_tokenizer.py --data 'my-data/*.csv' --epochs 5

``lancetnic_flow.features.register_tokenizer("subwords", fn)`` makes ``fn``
(one text → its tokens; or, with ``batch=True``, a pyarrow string array →
a list array, for a vectorised tokenizer) the tokenizer of any run trained
with ``FeatureConfig(tokenizer="subwords")`` (``--tokenizer MODULE:NAME`` on
the command line). The run stores the name, never the code; stop words,
n-grams, hashing or the fitted vocabulary then apply to its tokens as to the
built-in ones. ``fn`` receives the texts as the run prepares them
(``--normalize``, lower-cased unless ``--no-lowercase``).

Where it must be registered, and how it gets there:

* the trainer (this script) registers it at import;
* Dask workers: the run's options carry the function with them (pickled by
  value for a script's own function), so workers of an existing cluster
  (``--scheduler``) need nothing more; local workers also import this file
  again as they start. A tokenizer in an importable module is recorded as
  ``"module:name"``, and any process that lacks it imports that module;
* predicting later (``Predictor``, ``predict``, ``evaluate``, ``serve``):
  the process registers it first — by importing the module that does it. A
  run whose tokenizer is not registered is refused, naming it.
"""
from __future__ import annotations

import argparse
import os
import re

from lancetnic_flow.features import register_tokenizer
from lancetnic_flow.sizes import parse_size

# Dask starts its worker processes by importing this file again (as
# __mp_main__): keep the module level to imports and definitions.
STOP_WORDS = frozenset("a an and are as at be by for from has have in is it of on or that the this to was "
                       "which with you".split())


def my_tokenizer(text: str) -> list[str]:
    """Words without stop words, plus each word's 4-character pieces (fastText's
    subwords), so a misspelt or inflected word still shares features with its
    neighbours: "morani" → morani, _mor, mora, oran, rani, ani_."""
    tokens: list[str] = []
    for word in re.findall(r"[^\W_]+", text):
        if word in STOP_WORDS:
            continue
        tokens.append(word)
        padded = f"_{word}_"
        tokens += [padded[i:i + 4] for i in range(len(padded) - 3)]
    return tokens


# At the top level: every process that imports this file knows the name.
TOKENIZER = register_tokenizer("subwords", my_tokenizer)


def print_epoch(kind: str, event: dict) -> None:
    """An Events listener: one line per epoch."""
    if kind == "epoch":
        print(f"epoch {event['epoch']}  train_loss {event['train_loss']:.4f}  "
              f"val_accuracy {event['val_accuracy']:.4f}", flush=True)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="demo-data/custom-tokenizer.csv",
                   help="CSV with text and label columns (a glob or URL works); generated if missing")
    p.add_argument("--rows", type=int, default=10_000, help="rows to generate when --data is missing")
    p.add_argument("--out", default="runs", help="parent of the run folder")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--blocksize", default="8MiB", help="bytes of data per featurisation task")
    p.add_argument("--workers", type=int, help="local Dask workers (default 2; an existing cluster's are its own)")
    p.add_argument("--scheduler", help="an existing Dask scheduler (tcp://HOST:8786) instead of local workers")
    return p.parse_args()


def main() -> None:
    from lancetnic_flow import (ClusterConfig, DataConfig, Events, FeatureConfig, OutputConfig, Predictor, TrainConfig,
                                TrainingConfig, train, write_corpus)

    args = parse_args()
    if not any(c in args.data for c in "*?[") and "://" not in args.data and not os.path.exists(args.data):
        os.makedirs(os.path.dirname(args.data) or ".", exist_ok=True)
        write_corpus(args.data, args.rows, classes=4, seed=11)

    # The workers tokenise with my_tokenizer as they featurise: no pass over the data beforehand.
    events = Events()
    events.subscribe(print_epoch)
    cfg = TrainConfig(data=DataConfig(train=[args.data]),
                      features=FeatureConfig(tokenizer=TOKENIZER, ngrams=1, max_features=50_000, min_df=2),
                      training=TrainingConfig(epochs=args.epochs),
                      cluster=ClusterConfig(workers=args.workers if args.scheduler else args.workers or 2,
                                            scheduler=args.scheduler,
                                            blocksize=parse_size(args.blocksize, "--blocksize")),
                      output=OutputConfig(out=args.out, name="custom-tokenizer"))
    result = train(cfg, events)

    # Predict: the run applies the registered tokenizer itself.
    predictor = Predictor(result.run)
    print(f"tokenizer {predictor.run.features.tokenizer}")
    texts = ["The morani tesu was a kalop of great plondplea.", "Sure, the chopi and the brepli."]
    for text, p in zip(texts, predictor.predict(texts)):
        print(f"{text!r} → {p['label']} ({p['probability']:.2f})")
    print(f"run {result.run}")
    print(f"val_accuracy {result.metrics['val_accuracy']:.4f}")


if __name__ == "__main__":
    main()
