"""Train with your own tokenizer: a Dask step rewrites the text, then lancetnic_flow trains on it.

    python workflows/custom_tokenizer.py
    python workflows/custom_tokenizer.py --data 'my-data/*.csv' --epochs 5

lancetnic_flow's tokenizer is fixed (lowercase runs of 2+ word characters,
scikit-learn's default). To use another one, run it over the data first, on
the Dask workers, partition by partition: each row's text becomes its tokens
joined by spaces, written as Parquet. The built-in tokenizer then just splits
on the spaces, so its vocabulary is yours. Tokens must be word characters
(letters, digits, '_'), 2 or more of them.

The run folder knows the tokens, not the function: apply the same function
to a text before predicting, as the end of this script does.
"""
from __future__ import annotations

import argparse
import os
import re

# Dask starts its worker processes by importing this file again (as
# __mp_main__): keep the module level to imports and definitions.
STOP_WORDS = frozenset("a an and are as at be by for from has have in is it of on or that the this to was "
                       "which with you".split())


def my_tokenizer(text: str) -> list[str]:
    """Words without stop words, plus each word's 4-character pieces (fastText's
    subwords), so a misspelt or inflected word still shares features with its
    neighbours: "morani" → morani, _mor, mora, oran, rani, ani_."""
    tokens: list[str] = []
    for word in re.findall(r"[^\W_]+", text.lower()):
        if word in STOP_WORDS:
            continue
        tokens.append(word)
        padded = f"_{word}_"
        tokens += [padded[i:i + 4] for i in range(len(padded) - 3)]
    return tokens


def tokenize_partition(df: "pandas.DataFrame") -> "pandas.DataFrame":
    """One partition (a pandas DataFrame) with its text replaced by the tokens."""
    return df.assign(text=df["text"].map(lambda t: " ".join(my_tokenizer(t)), na_action="ignore").astype("string"))


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
    p.add_argument("--tokens", default=None, help="where the tokenised Parquet goes (default: next to --data)")
    p.add_argument("--out", default="runs", help="parent of the run folder")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--blocksize", default="8MiB", help="bytes of CSV per tokenizer task")
    p.add_argument("--workers", type=int, default=2, help="local Dask workers")
    p.add_argument("--scheduler", help="an existing Dask scheduler (tcp://HOST:8786) instead of local workers")
    return p.parse_args()


def main() -> None:
    import dask.dataframe as dd

    from lancetnic_flow import (DataConfig, Events, FeatureConfig, OutputConfig, Predictor, TrainConfig, TrainingConfig,
                                train, write_corpus)
    from lancetnic_flow.dataflow.cluster import open_cluster
    from lancetnic_flow.dataflow.plan import plan_memory

    args = parse_args()
    if not any(c in args.data for c in "*?[") and "://" not in args.data and not os.path.exists(args.data):
        os.makedirs(os.path.dirname(args.data) or ".", exist_ok=True)
        write_corpus(args.data, args.rows, classes=4, seed=11)
    tokens_dir = args.tokens or re.sub(r"\.[^./]+$", "", args.data.replace("*", "all")) + "-tokens"

    # The CLI's cluster: local workers sized by a memory plan, or --scheduler's.
    with open_cluster(plan_memory(workers=args.workers), scheduler=args.scheduler) as client:
        # 1. The tokenizer runs on the workers, one partition at a time (bounded memory).
        frame = dd.read_csv(args.data, usecols=["text", "label"], blocksize=args.blocksize, dtype={"label": "string"})
        frame.map_partitions(tokenize_partition).to_parquet(tokens_dir, write_index=False, overwrite=True)
        print(f"tokenised {args.data} → {tokens_dir}")

        # 2. Train on the tokens; the same cluster featurises them.
        events = Events()
        events.subscribe(print_epoch)
        cfg = TrainConfig(data=DataConfig(train=[f"{tokens_dir}/*.parquet"]),
                          features=FeatureConfig(max_features=50_000, min_df=2),
                          training=TrainingConfig(epochs=args.epochs),
                          output=OutputConfig(out=args.out, name="custom-tokenizer"))
        result = train(cfg, events, client=client)

    # 3. Predict: the same function first, then the model.
    predictor = Predictor(result.run)
    texts = ["The morani tesu was a kalop of great plondplea.", "Sure, the chopi and the brepli."]
    for text, p in zip(texts, predictor.predict([" ".join(my_tokenizer(t)) for t in texts])):
        print(f"{text!r} → {p['label']} ({p['probability']:.2f})")
    print(f"run {result.run}")
    print(f"val_accuracy {result.metrics['val_accuracy']:.4f}")


if __name__ == "__main__":
    main()
