"""Training speed with ``--ddp 2`` against one process, and what a checkpoint pause costs.

    .venv/bin/python benchmarks/ddp_training.py [--rows 90000] [--epochs 2] [--pause-every 40]

Every configuration trains through the real CLI, on the same generated
corpus, with the same shard cache (featurised once, untimed, before the
first configuration), so what is compared is the training stage alone
(``stage_seconds.train`` in ``metrics.json``):

* ``single``: one training process (the trainer), 2 local workers idle;
* ``single-ckpt``: the same, checkpointing every ``--pause-every`` batches;
* ``ddp2``: ``--ddp 2`` on 2 local workers, ``--checkpoint-every off`` (one
  segment per run);
* ``ddp2-ckpt``: ``--ddp 2``, a checkpoint every ``--pause-every`` steps and
  at each epoch end: the ranks pause, the trainer writes the checkpoint and
  starts the next segment.

Cost of a pause = (``ddp2-ckpt`` − ``ddp2``) / pauses, pauses being the
checkpoint events in the JSON log. Writes ``OUT/ddp-<timestamp>.json`` and a
Markdown table. On a 2-vCPU machine the ranks share the cores the single
process has to itself, so ``ddp2`` measures overhead, not scaling.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling import HERE, cli_cmd, ensure_corpus, machine_info  # noqa: E402

CONFIGS = {
    "single": [],
    "single-ckpt": ["--checkpoint-every", "{pause}"],
    "ddp2": ["--ddp", "2"],
    "ddp2-ckpt": ["--ddp", "2", "--checkpoint-every", "{pause}"],
}


def _train(data: Path, work: Path, name: str, extra: list[str], epochs: int, pause: int) -> dict:
    log = work / f"{name}.jsonl"
    args = [a.format(pause=pause) for a in extra]
    if "--checkpoint-every" not in args:
        args += ["--checkpoint-every", "off"]
    cmd = [*cli_cmd(), "train", str(data), "--workers", "2", "--worker-threads", "1", "--memory-budget", "6GiB",
           "--epochs", str(epochs), "--out", str(work / "runs"), "--cache", str(work / "cache"), "--name", name,
           "--quiet", "--json-log", str(log), *args]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"{name} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    m = json.loads((work / "runs" / name / "metrics.json").read_text())
    events = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    pauses = sum(1 for e in events if e.get("event") == "checkpoint")
    ckpt_seconds = sum(e.get("seconds", 0.0) for e in events if e.get("event") == "checkpoint")
    train_s = m["stage_seconds"]["train"]
    return {"name": name, "command": " ".join(cmd), "wall_seconds": wall, "train_seconds": train_s,
            "rows_trained": m["rows"]["trained"] * epochs, "rows_per_s": m["rows"]["trained"] * epochs / train_s,
            "val_accuracy": m["val_accuracy"], "checkpoints": pauses, "checkpoint_write_seconds": ckpt_seconds,
            "ddp": m.get("ddp")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=90_000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--pause-every", type=int, default=40, help="batches between checkpoints in the *-ckpt runs")
    ap.add_argument("--out", type=Path, default=HERE / "out")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    corpus = ensure_corpus(a.out, a.rows, 0, a.out)
    doc = {"benchmark": "ddp_training", "started": _dt.datetime.now().isoformat(timespec="seconds"),
           "machine": machine_info(), "corpus": corpus, "epochs": a.epochs, "pause_every": a.pause_every,
           "runs": []}
    with tempfile.TemporaryDirectory(dir=a.out) as tmp:
        work = Path(tmp)
        _train(Path(corpus["path"]), work, "warm-cache", [], 1, a.pause_every)   # featurise once, untimed
        for name, extra in CONFIGS.items():
            r = _train(Path(corpus["path"]), work, name, extra, a.epochs, a.pause_every)
            doc["runs"].append(r)
            print(f"{name:12s} train {r['train_seconds']:7.1f} s  {r['rows_per_s']:8.0f} rows/s  "
                  f"val acc {r['val_accuracy']:.4f}  checkpoints {r['checkpoints']}", flush=True)
    doc["machine"]["load_average_at_end"] = list(os.getloadavg())
    by = {r["name"]: r for r in doc["runs"]}
    pauses = by["ddp2-ckpt"]["checkpoints"]
    doc["seconds_per_ddp_pause"] = ((by["ddp2-ckpt"]["train_seconds"] - by["ddp2"]["train_seconds"]) / pauses
                                    if pauses else None)
    single_pauses = by["single-ckpt"]["checkpoints"]
    doc["seconds_per_single_checkpoint"] = ((by["single-ckpt"]["train_seconds"] - by["single"]["train_seconds"])
                                            / single_pauses if single_pauses else None)
    stamp = _dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    path = a.out / f"ddp-{stamp}.json"
    path.write_text(json.dumps(doc, indent=2))
    print(f"\n| run | train s | rows/s | val accuracy | checkpoints |\n|---|---:|---:|---:|---:|")
    for r in doc["runs"]:
        print(f"| {r['name']} | {r['train_seconds']:.1f} | {r['rows_per_s']:,.0f} | {r['val_accuracy']:.4f} | "
              f"{r['checkpoints']} |")
    print(f"\nper --ddp pause: {doc['seconds_per_ddp_pause']}; per single-process checkpoint: "
          f"{doc['seconds_per_single_checkpoint']}\n{path}")


if __name__ == "__main__":
    main()
