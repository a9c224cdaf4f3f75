#!/usr/bin/env bash
# The GPU path (issue 30, item 3), as one short run on a CUDA machine:
#
#   bash benchmarks/gpu_check.sh        # from the repository root; CORPUS=… for another file
#
# 1. each Lancet model trains 2 epochs on --device cuda beside the plain-PyTorch
#    reference on the same GPU and the same cached rows (benchmarks/sequence_speed.py
#    --device cuda): rows/s of both, and validation accuracy;
# 2. ScalpelMC (the MLP over sparse rows) on --device cuda;
# 3. a --ddp rank on a CUDA Dask worker (--ddp 1), and --ddp 2 with nccl, which needs
#    a GPU per rank: on a machine of one GPU it must be refused in words (exit 2).
#
# Packages the machine lacks may be given as wheels in .whl/ (installed to /tmp/site).
# Prints everything; writes the JSON records under benchmarks/out/ (or $OUT when set).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if compgen -G ".whl/*.whl" > /dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
CORPUS=${CORPUS:-benchmarks/out/data/debian-train.csv}
RESULTS=${OUT:-benchmarks/out}/gpu
mkdir -p "$RESULTS"
WORK=$(mktemp -d)

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
$PY -c "import torch, dask, distributed, numba, pyarrow; print('torch', torch.__version__, 'cuda', torch.version.cuda,
'gpus', torch.cuda.device_count(), 'dask', dask.__version__, 'numba', numba.__version__, 'pyarrow', pyarrow.__version__)"

echo "== 1. the Lancet models on CUDA against the plain-PyTorch reference on CUDA"
$PY benchmarks/sequence_speed.py --corpus "$CORPUS" --device cuda --epochs 2 2>&1 | tee "$RESULTS/sequence_speed_cuda.txt"
cp benchmarks/out/sequence_speed-*.json "$RESULTS/" 2>/dev/null

# The same 12,000-row sample for the rest.
$PY -c "
import pandas as pd, sys
pd.read_csv(sys.argv[1]).sample(frac=1.0, random_state=0)[:12000].to_csv(sys.argv[2], index=False)" "$CORPUS" "$WORK/sample.csv"

rate() {  # name, run folder: rows/s per epoch, validation accuracy, where it trained
  $PY -c "
import json, sys
m = json.load(open(sys.argv[2] + '/metrics.json'))
print(sys.argv[1], 'device', m.get('device'), 'ddp', (m.get('ddp') or {}).get('backend'), 'rows/s',
      [round(e['rows_per_s']) for e in m['epochs']], 'val_accuracy', round(m['val_accuracy'], 4),
      'seconds', round(m['seconds'], 1))" "$1" "$2" | tee -a "$RESULTS/runs.txt"
}

echo "== 2. ScalpelMC on CUDA"
$PY -m lancetnic_flow --quiet train "$WORK/sample.csv" --model ScalpelMC --epochs 2 --device cuda --no-plots \
  --out "$WORK/runs" --name mlp && rate ScalpelMC-cuda "$WORK/runs/mlp"

echo "== 3. --ddp on CUDA workers"
$PY -m lancetnic_flow --quiet train "$WORK/sample.csv" --model LancetMCA --epochs 2 --device cuda --ddp 1 \
  --no-plots --out "$WORK/runs" --name ddp1 && rate LancetMCA-ddp1-cuda "$WORK/runs/ddp1"
$PY -m lancetnic_flow --quiet train "$WORK/sample.csv" --model LancetMCA --epochs 2 --device cuda --ddp 2 \
  --no-plots --out "$WORK/runs" --name ddp2 2>&1 | tee "$RESULTS/ddp2.txt"
echo "ddp2 exit ${PIPESTATUS[0]}" | tee -a "$RESULTS/ddp2.txt"
[ -f "$WORK/runs/ddp2/metrics.json" ] && rate LancetMCA-ddp2-nccl "$WORK/runs/ddp2"
exit 0
