#!/bin/bash
# The trainer on the cluster vs in the client (docs/benchmarks.md, "The trainer on the cluster").
# A real `dask scheduler` and 2 `dask worker` processes (1 thread, 4 GiB each) on this machine; one shard
# cache, warmed first, so both sides train from the same cached shards. Per run: wall time, the client's
# peak RSS and the bytes it read (/proc/PID/io rchar: files and sockets), validation and test accuracy,
# and metrics.json's client_shard_reads.
#   benchmarks/trainer_on_cluster.sh [CORPUS_TRAIN.csv] [CORPUS_TEST.csv] [REPEATS]
set -u
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
BIN=$(dirname "$PY")
TRAIN=${1:-benchmarks/out/data/debian-train.csv}
TEST=${2:-benchmarks/out/data/debian-test.csv}
REPEATS=${3:-3}
D=$(mktemp -d /tmp/trainer-on-cluster.XXXX)
"$BIN"/dask scheduler --host 127.0.0.1 --port 0 --no-dashboard --scheduler-file "$D/sched.json" >"$D/sched.log" 2>&1 &
PIDS=($!)
for _ in $(seq 60); do [ -s "$D/sched.json" ] && break; sleep 1; done
ADDR=$("$PY" -c "import json; print(json.load(open('$D/sched.json'))['address'])")
for i in 0 1; do
  env ARROW_DEFAULT_MEMORY_POOL=system MALLOC_TRIM_THRESHOLD_=33554432 MALLOC_MMAP_THRESHOLD_=33554432 \
    ACERO_ALIGNMENT_HANDLING=ignore "$BIN"/dask worker "$ADDR" --nworkers 1 --nthreads 1 --memory-limit 4GiB \
    --no-dashboard --name "w$i" --local-directory "$D/w$i" >"$D/w$i.log" 2>&1 &
  PIDS+=($!)
done
trap 'kill "${PIDS[@]}" 2>/dev/null' EXIT
sleep 10
COMMON=("$TRAIN" --scheduler "$ADDR" --cache "$D/cache" --out "$D/runs" --seed 0 --quiet)
"$PY" -m lancetnic_flow train "${COMMON[@]}" --name warm --epochs 1 --train-on client >/dev/null 2>&1
for rep in $(seq "$REPEATS"); do
  for where in cluster client; do
    name=$where$rep
    start=$(date +%s.%N)
    "$PY" -m lancetnic_flow train "${COMMON[@]}" --name "$name" --train-on "$where" >/dev/null 2>"$D/$name.err" &
    pid=$!
    rchar=0
    while kill -0 $pid 2>/dev/null; do
      r=$(awk '/^rchar/ {print $2}' /proc/$pid/io 2>/dev/null); [ -n "$r" ] && rchar=$r
      sleep 0.2
    done
    wait $pid || { cat "$D/$name.err"; exit 1; }
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    "$PY" -m lancetnic_flow evaluate "$D/runs/$name" "$TEST" --json --quiet >"$D/$name.eval.json" 2>/dev/null
    "$PY" - "$D" "$name" "$wall" "$rchar" <<'PYEOF'
import json, sys
d, name, wall, rchar = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
m = json.load(open(f"{d}/runs/{name}/metrics.json"))
test = json.load(open(f"{d}/{name}.eval.json"))
print(json.dumps({"run": name, "trained_on": m["trained_on"], "wall_s": round(wall, 1),
                  "train_s": round(m["stage_seconds"]["train"], 1), "save_s": round(m["stage_seconds"]["save"], 1),
                  "val_accuracy": round(m["val_accuracy"], 4), "test_accuracy": round(test["accuracy"], 4),
                  "client_shard_reads": m["client_shard_reads"], "client_shard_mb": round(m["client_shard_bytes"] / 1e6, 1),
                  "client_read_mb": round(rchar / 1e6, 1), "client_peak_mb": round(m["memory"]["trainer_peak_rss_bytes"] / 2**20),
                  "rank_mb": round((m.get("ddp") or {}).get("rank_bytes", 0) / 2**20)}))
PYEOF
  done
done
