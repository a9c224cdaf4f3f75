#!/bin/bash
# --cache none against a cold shard cache (docs/benchmarks.md, "Without a cache").
# A generated corpus (make-data), the default model, 3 epochs, seed 0; featurised in this process (--run-on
# auto: the corpus is under 64 MiB) and on a LocalCluster (--run-on cluster). Per run: wall time, each epoch's
# rows/s and stage seconds from metrics.json, the weights' digest, and the cache's bytes on disk.
#   benchmarks/nocache.sh [ROWS] [REPEATS]
set -u
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
ROWS=${1:-200000}
REPEATS=${2:-1}
D=$(mktemp -d /tmp/nocache.XXXX)
"$PY" -m lancetnic_flow make-data "$D/train.csv" --rows "$ROWS" --quiet
echo "corpus: $ROWS rows, $(stat -c %s "$D/train.csv") bytes; $(nproc) cores; commit $(git rev-parse --short HEAD)"
for rep in $(seq "$REPEATS"); do
  for where in auto cluster; do
    for cache in "$D/cache-$where-$rep" none; do
      name=$([ "$cache" = none ] && echo none || echo cache)-$where-$rep
      load=$(cut -d' ' -f1 /proc/loadavg)
      s=$(date +%s.%N)
      "$PY" -m lancetnic_flow train "$D/train.csv" --epochs 3 --seed 0 --run-on "$where" --cache "$cache" \
        --out "$D/runs" --name "$name" --quiet >"$D/$name.log" 2>&1 || { tail -5 "$D/$name.log"; exit 1; }
      e=$(date +%s.%N)
      "$PY" - "$D/runs/$name" "$s" "$e" "$load" <<'PYEOF'
import hashlib, json, sys
run, s, e, load = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
m = json.load(open(f"{run}/metrics.json"))
digest = hashlib.sha256(open(f"{run}/model.safetensors", "rb").read()).hexdigest()[:12]
rates = ", ".join(f"{ep['rows_per_s']:,.0f}" for ep in m["epochs"])
stages = " ".join(f"{k} {v:.1f}" for k, v in m["stage_seconds"].items())
print(f"{run.rsplit('/', 1)[1]:16} wall {e - s:5.1f} s · epoch rows/s {rates} · {stages} · "
      f"val acc {m['val_accuracy']:.4f} · weights {digest} · cache {m['cache'] if m['cache'] == 'none' else 'entry'}"
      f" · load {load}")
PYEOF
    done
    [ -d "$D/cache-$where-$rep" ] && echo "cache on disk: $(du -sb "$D/cache-$where-$rep" | cut -f1) bytes"
  done
done
