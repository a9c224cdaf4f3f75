#!/usr/bin/env bash
# Two --ddp ranks against one on cached shards (issue 28's "2 ranks ≥ 1.7 × one
# rank's epoch rows/s"): the Debian training file ten times, 4 epochs, one shard
# cache for every run (featurised by an untimed first run), --ddp 1 then 2,
# REPEAT times. Prints each run's epoch rows/s (history.csv: epoch 1 reads the
# fit pass's raw shards, epochs 2–4 the kept rows) and each rank's
# data / compute / exchange seconds (metrics.json ddp.rank_seconds), the shards
# each rank read and the epochs it trained on kept rows in place; then, in the
# same minute, what the machine's two cores give the step itself with no
# cluster and no exchange (benchmarks/two_cores.py: the ceiling). Each round
# prints the two ranks' epoch rate over one rank's (epochs 2 on) beside that
# ceiling; the last line, their medians over the rounds.
#
#   .venv/bin/python benchmarks/debian_corpus.py      # → benchmarks/out/data/debian-train.csv
#   bash benchmarks/two_ranks.sh                      # REPEAT=2 EPOCHS=4 TIMES=10 by default
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${REPEAT:-2}; EPOCHS=${EPOCHS:-4}; TIMES=${TIMES:-10}
SRC=benchmarks/out/data/debian-train.csv
WORK=${WORK:-benchmarks/out/two-ranks}
CORPUS=$WORK/debian-x$TIMES.csv
mkdir -p "$WORK"
[ -f "$SRC" ] || { echo "no $SRC: run benchmarks/debian_corpus.py first" >&2; exit 2; }
if [ ! -f "$CORPUS" ]; then
  { head -1 "$SRC"; for _ in $(seq "$TIMES"); do tail -n +2 "$SRC"; done; } > "$CORPUS"
fi
CLI=.venv/bin/lancetnic-flow
ARGS=(--no-plots --no-learn-val --epochs "$EPOCHS" --workers 2 --cache "$WORK/cache")
$CLI train "$CORPUS" "${ARGS[@]}" --ddp 1 --out "$WORK/warm" > "$WORK/log" 2>&1   # fills the cache, untimed
SUMMARY=$WORK/rounds.txt; : > "$SUMMARY"
for r in $(seq "$REPEAT"); do
  for ddp in 1 2; do
    out="$WORK/ddp$ddp-$r"; rm -rf "$out"
    $CLI train "$CORPUS" "${ARGS[@]}" --ddp "$ddp" --out "$out" >> "$WORK/log" 2>&1
    .venv/bin/python - "$(ls -d "$out"/*/ | tail -1)" "$ddp" <<'PY'
import csv, json, sys
out, ddp = sys.argv[1], sys.argv[2]
rates = [round(float(r["rows_per_s"])) for r in csv.DictReader(open(f"{out}/history.csv"))]
m = json.load(open(f"{out}/metrics.json"))
d = m.get("ddp", {})
clocks = "; ".join(" / ".join(f"{c.get(k, 0):.2f}" for k in ("data", "compute", "exchange"))
                   for c in d.get("rank_seconds", []))
print(f"--ddp {ddp}: epoch rows/s {rates}  rank data/compute/exchange s: {clocks}  "
      f"shards read {[r.get('train') for r in d.get('rank_shard_reads', [])]} of {d.get('train_shards')}, "
      f"epochs on kept rows {d.get('rank_picked_epochs')}, digests {d.get('replica_digests')}, "
      f"val accuracy {m.get('val_accuracy')}")
PY
  done
  one=$(ls -d "$WORK/ddp1-$r"/*/ | tail -1); two=$(ls -d "$WORK/ddp2-$r"/*/ | tail -1)
  cores=$(.venv/bin/python benchmarks/two_cores.py "$CORPUS" "$one"); echo "$cores"
  .venv/bin/python - "$one" "$two" "$cores" >> "$SUMMARY" <<'PY'
import csv, re, sys
def later(run):
    rates = [float(r["rows_per_s"]) for r in csv.DictReader(open(f"{run}/history.csv"))][1:]
    return sum(rates) / len(rates)
ceiling = float(re.search(r"([0-9.]+)x$", sys.argv[3].strip()).group(1))
print(f"{later(sys.argv[2]) / later(sys.argv[1]):.3f} {ceiling:.3f}")
PY
  echo "round $r: two ranks / one rank, epochs 2 on, and the two cores' ceiling: $(tail -1 "$SUMMARY")"
done
.venv/bin/python - "$SUMMARY" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
ratios, ceilings = [r for r, _ in rows], [c for _, c in rows]
print(f"{len(rows)} rounds: two ranks / one rank {', '.join(f'{r:.2f}' for r in ratios)} "
      f"(median {statistics.median(ratios):.2f}); ceiling {', '.join(f'{c:.2f}' for c in ceilings)} "
      f"(median {statistics.median(ceilings):.2f}); ratio / ceiling, median "
      f"{statistics.median(r / c for r, c in rows):.2f}")
PY
