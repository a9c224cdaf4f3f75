#!/usr/bin/env bash
# Build the repository's Dockerfile with podman and prove the image works in
# all three roles: a Dask scheduler, two Dask workers and a trainer, each in
# its own container, on this machine's loopback (--network host).
#
# It needs no Docker Hub: the base image is a Debian bookworm (Python 3.11)
# made here with debootstrap and imported as $BASE_IMAGE, and torch comes from
# a local wheel directory when $WHEELS holds one. Run as root (debootstrap and
# podman's host network need it); missing tools are installed with apt-get
# unless INSTALL=0.
#
#   make image-check                       # or: bash scripts/check_image.sh
#   KEEP=1 bash scripts/check_image.sh     # keep the work folder (data, run, logs)
#
# Settings (environment):
#   IMAGE          image to build             (localhost/lancetnic-flow:check)
#   BASE_IMAGE     base for both stages       (localhost/bookworm-python:3.11;
#                  made with debootstrap when a localhost/ name is missing)
#   DEBIAN_MIRROR  for debootstrap            (http://deb.debian.org/debian)
#   WHEELS         local wheel folder         (/opt/wheels; empty = none)
#   TORCH_INDEX    torch's index              (https://pypi.org/simple with
#                  WHEELS, else the Dockerfile's download.pytorch.org/whl/cpu)
#   TORCH_VERSION  torch pin                  (from the wheel's name, else the
#                  Dockerfile's)
#   CA_BUNDLE      CA file pip trusts during the build, for networks behind a
#                  TLS proxy                  (/etc/ssl/certs/ca-certificates.crt)
#   ROWS           rows of the generated corpus (4000)
#   CPU_SHARES     CPU weight of the build's steps (unset: podman's;
#                  tests/integration/test_image.py sets 2 to run beside the suite)
#   INSTALL=0      never apt-get a missing tool (podman, debootstrap, runc):
#                  exit 3 instead (tests/integration/test_image.py's default)
#   KEEP=1         keep the work folder; VERBOSE=1 shows the whole build
#
# Exit status: 0 the image works; 1 it does not (build or a role failed);
# 3 this machine cannot run the check (not root, no way to install podman or
# debootstrap, no container runtime that starts, no Debian mirror, under
# 5 GB free for podman), which tests/integration/test_image.py reports as a skip with
# this script's reason.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-localhost/lancetnic-flow:check}
BASE_IMAGE=${BASE_IMAGE:-localhost/bookworm-python:3.11}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
WHEELS=${WHEELS-/opt/wheels}
CA_BUNDLE=${CA_BUNDLE-/etc/ssl/certs/ca-certificates.crt}
ROWS=${ROWS:-4000}
KEEP=${KEEP:-0}
VERBOSE=${VERBOSE:-0}
CPU_SHARES=${CPU_SHARES:-}
INSTALL=${INSTALL:-1}

T0=$SECONDS
STEP=start
NAME=ck-$$                          # container names: ck-PID-sched, -w1, -w2
WORK=$(mktemp -d /tmp/check-image.XXXXXX)
DATA=$WORK/data                     # mounted at /data in every container
PODMAN=(podman)
LIMITS=()

fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
step() { STEP=$*; printf '\n== [%s] %s\n' "$(fmt $((SECONDS - T0)))" "$*"; }
die() { echo "FAIL: $*" >&2; exit 1; }
cannot() { echo "CANNOT RUN HERE: $*" >&2; exit 3; }

cleanup() {
    local rc=$?
    set +e
    for c in "$NAME-sched" "$NAME-w1" "$NAME-w2"; do
        if "${PODMAN[@]}" container exists "$c" 2>/dev/null; then
            if [ "$rc" -ne 0 ]; then
                echo "--- last log lines of $c" >&2
                "${PODMAN[@]}" logs --tail 15 "$c" >&2
            fi
            "${PODMAN[@]}" rm -f -t 2 "$c" >/dev/null 2>&1
        fi
    done
    if [ "$rc" -eq 3 ]; then
        rm -rf "$WORK"
    elif [ "$rc" -ne 0 ]; then
        echo "FAIL during: $STEP (work folder kept: $WORK)" >&2
    elif [ "$KEEP" = 1 ]; then
        echo "work folder kept: $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT

have() { command -v "$1" >/dev/null 2>&1; }

install_tools() {   # the packages behind the missing commands, with apt-get
    [ "$#" -eq 0 ] && return 0
    if [ "$INSTALL" != 1 ]; then
        cannot "missing $*; INSTALL=1 lets this script apt-get them (make test: LANCETNIC_FLOW_IMAGE_CHECK=install)"
    elif [ "$(id -u)" = 0 ] && have apt-get; then
        echo "installing: $*"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq \
            || cannot "apt-get update failed: no Debian mirror to install $* from"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null \
            || cannot "apt-get install $* failed"
    else
        cannot "missing $*: install them (as root: apt-get install $*)"
    fi
}

free_port() {       # a TCP port nothing listens on at 127.0.0.1
    local p
    while :; do
        p=$((20000 + RANDOM % 20000))
        (: <"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}

wait_port() {       # wait_port PORT CONTAINER: until it listens or 60 s pass

    for _ in $(seq 60); do
        (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        [ "$("${PODMAN[@]}" inspect -f '{{.State.Running}}' "$2")" = true ] \
            || die "container $2 stopped"
        sleep 1
    done
    die "nothing listens on port $1 after 60 s"
}

# run ARGS...: a throwaway container of $IMAGE sharing the data folder
run() { "${PODMAN[@]}" run --rm --network host "${LIMITS[@]}" -v "$DATA:/data" "$IMAGE" "$@"; }

# -------------------------------------------------------------------------
step "tools"
[ "$(id -u)" = 0 ] || cannot "run as root (debootstrap, and podman with the host network)"
missing=()
have podman || missing+=(podman)
if [[ $BASE_IMAGE == localhost/* ]] && ! { have podman && podman image exists "$BASE_IMAGE"; }; then
    have debootstrap || missing+=(debootstrap)
fi
install_tools "${missing[@]}"
podman --version
# The base, two build stages and the image take about 3.5 GB at their peak.
store=$(podman info --format '{{.Store.GraphRoot}}' 2>/dev/null || echo /var/lib/containers)
mkdir -p "$store"
free_gb=$(df -Pk "$store" | awk 'NR == 2 { print int($4 / 1048576) }')
[ "$free_gb" -ge 5 ] || cannot "only ${free_gb} GB free under $store; the check needs 5 GB"
echo "podman storage $store: $free_gb GB free"

# -------------------------------------------------------------------------
T_BASE=0
if podman image exists "$BASE_IMAGE"; then
    step "base image $BASE_IMAGE: present"
elif [[ $BASE_IMAGE == localhost/* ]]; then
    step "base image $BASE_IMAGE: debootstrap bookworm (python3 3.11) from $DEBIAN_MIRROR"
    t=$SECONDS
    rootfs=$WORK/rootfs
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$rootfs" "$DEBIAN_MIRROR" >"$WORK/debootstrap.log" 2>&1 \
        || { tail -20 "$WORK/debootstrap.log" >&2; cannot "debootstrap from $DEBIAN_MIRROR failed"; }
    # What a base image does not need: downloaded packages, apt's lists, docs.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
        "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
        "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
    tar --numeric-owner -C "$rootfs" -c . | podman import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
        --quiet - "$BASE_IMAGE" >/dev/null
    rm -rf "$rootfs"
    T_BASE=$((SECONDS - t))
    echo "made $BASE_IMAGE in $(fmt $T_BASE)"
else
    step "base image $BASE_IMAGE: pulled by the build"
fi

# -------------------------------------------------------------------------
step "container runtime options"
# Inside some VMs and sandboxes podman's defaults fail: rlimits above the
# hard limits podman itself runs with, or crun refusing a cgroup v1/v2
# hybrid. Take the first of: defaults; rlimits clamped; clamped with runc.
podman image exists "$BASE_IMAGE" || podman pull -q "$BASE_IMAGE" >/dev/null
hard_n=$(ulimit -Hn); [ "$hard_n" = unlimited ] && hard_n=1048576
hard_u=$(ulimit -Hu); [ "$hard_u" = unlimited ] && hard_u=32768
nofile=$((hard_n < 1048576 ? hard_n : 1048576))
nproc=$((hard_u < 32768 ? hard_u : 32768))
clamped=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
probe() { "${PODMAN[@]}" run --rm --network host "${LIMITS[@]}" "$BASE_IMAGE" true >/dev/null 2>&1; }
if probe; then
    echo "podman defaults work"
else
    LIMITS=("${clamped[@]}")
    if probe; then
        echo "clamped rlimits: ${LIMITS[*]}"
    else
        have runc || install_tools runc
        PODMAN=(podman --runtime runc)
        probe || { "${PODMAN[@]}" run --rm --network host "${LIMITS[@]}" "$BASE_IMAGE" true || true
                   cannot "podman cannot run a container here"; }
        echo "runtime runc, clamped rlimits: ${LIMITS[*]}"
    fi
fi
BUILD_LIMITS=()
if [ -n "$CPU_SHARES" ]; then
    # The build's steps run in containers, which get cgroups of their own where
    # nice(1) no longer ranks them below the host's processes: a CPU weight
    # does (1024 is everyone's). Only the build: the roles are short, and a
    # starved scheduler would only meet its own timeouts.
    if "${PODMAN[@]}" run --rm --network host "${LIMITS[@]}" --cpu-shares "$CPU_SHARES" "$BASE_IMAGE" true \
            >/dev/null 2>&1; then
        BUILD_LIMITS=(--cpu-shares "$CPU_SHARES")
        echo "the build at --cpu-shares $CPU_SHARES"
    else
        echo "--cpu-shares is refused here: the build runs at the default CPU weight"
    fi
fi

# -------------------------------------------------------------------------
build_args=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
wheel=
if [ -n "$WHEELS" ] && [ -d "$WHEELS" ]; then
    wheel=$(find "$WHEELS" -maxdepth 1 -name 'torch-*-cp311-*.whl' | sort | tail -1)
fi
if [ -n "$wheel" ]; then
    # torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl -> 2.13.0+cpu
    v=${wheel##*/torch-}; v=${v%%-*}
    build_args+=(--build-arg "TORCH_INDEX=${TORCH_INDEX:-https://pypi.org/simple}"
                 --build-arg "TORCH_VERSION=${TORCH_VERSION:-$v}"
                 --build-arg PIP_FIND_LINKS=/wheels -v "$WHEELS:/wheels:ro")
else
    index=${TORCH_INDEX:-$(sed -n 's/^ARG TORCH_INDEX=//p' Dockerfile)}
    python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=15)" "$index/" \
        >/dev/null 2>&1 || cannot "no torch wheel in ${WHEELS:-\$WHEELS} and torch's index $index is unreachable"
    [ -n "${TORCH_INDEX:-}" ] && build_args+=(--build-arg "TORCH_INDEX=$TORCH_INDEX")
    [ -n "${TORCH_VERSION:-}" ] && build_args+=(--build-arg "TORCH_VERSION=$TORCH_VERSION")
fi
if [ -n "$CA_BUNDLE" ] && [ -f "$CA_BUNDLE" ]; then
    # Mounted for the build only: nothing of it lands in the image.
    printf '[global]\ncert = /etc/pip-ca.crt\n' >"$WORK/pip.conf"
    build_args+=(-v "$WORK/pip.conf:/etc/pip.conf:ro" -v "$CA_BUNDLE:/etc/pip-ca.crt:ro")
fi

step "build $IMAGE${wheel:+ (torch from $wheel)}"
t=$SECONDS
old_id=$("${PODMAN[@]}" image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
if [ "$VERBOSE" = 1 ]; then
    "${PODMAN[@]}" build --network host "${LIMITS[@]}" "${BUILD_LIMITS[@]}" "${build_args[@]}" -t "$IMAGE" . 2>&1 \
        | tee "$WORK/build.log"
else
    "${PODMAN[@]}" build --network host "${LIMITS[@]}" "${BUILD_LIMITS[@]}" "${build_args[@]}" -t "$IMAGE" . \
        >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; die "build failed"; }
    grep -E '^\[[0-9]/[0-9]\] STEP|^--> Using cache' "$WORK/build.log" \
        | sed -E 's/^(.{110}).+/\1 .../' || true
fi
T_BUILD=$((SECONDS - t))
new_id=$("${PODMAN[@]}" image inspect -f '{{.Id}}' "$IMAGE")
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
    "${PODMAN[@]}" rmi "$old_id" >/dev/null 2>&1 || true   # the previous check image
fi
SIZE=$("${PODMAN[@]}" image ls --format '{{.Size}}' "$IMAGE" | head -1)
echo "built in $(fmt $T_BUILD): $IMAGE, $SIZE"
"${PODMAN[@]}" image ls "$IMAGE"

# -------------------------------------------------------------------------
t=$SECONDS
mkdir -p "$DATA"
chmod 0777 "$DATA"                  # written by the image's user (uid 10001)

step "user"
uid=$(run id -u)
[ "$uid" = 10001 ] || die "the image runs as uid $uid, not 10001"
run id

step "role: dask scheduler"
PORT=$(free_port)
DPORT=$(free_port)
SCHED=tcp://127.0.0.1:$PORT
"${PODMAN[@]}" run -d --name "$NAME-sched" --network host "${LIMITS[@]}" "$IMAGE" \
    dask scheduler --host 127.0.0.1 --port "$PORT" --dashboard-address "127.0.0.1:$DPORT" >/dev/null
wait_port "$PORT" "$NAME-sched"
echo "scheduler at $SCHED"

step "role: two dask workers"
for w in w1 w2; do
    "${PODMAN[@]}" run -d --name "$NAME-$w" --network host "${LIMITS[@]}" -v "$DATA:/data" "$IMAGE" \
        dask worker "$SCHED" --name "$w" --memory-limit 1GiB --nthreads 1 --no-dashboard >/dev/null
done
run python -c "
from distributed import Client
c = Client('$SCHED', timeout=30)
c.wait_for_workers(2, timeout=90)
print('workers in the scheduler:', sorted(w['name'] for w in c.scheduler_info()['workers'].values()))
"

step "role: trainer (make-data, train against the scheduler, --ddp 2, predict)"
run lancetnic-flow make-data /data/train.csv --rows "$ROWS" --classes 4 --seed 1
run lancetnic-flow train /data/train.csv --text text --label label --scheduler "$SCHED" \
    --epochs 1 --blocksize 256KiB --out /data/runs --name check --cache /data/cache
for f in model.safetensors metrics.json config.json history.csv; do
    [ -s "$DATA/runs/check/$f" ] || die "the run folder lacks $f"
done
run lancetnic-flow predict /data/runs/check --text 'a great match' --text 'a new phone'
# counted now, before --ddp: a worker that a later job gets restarted starts its count again
run python -c "
import json
from distributed import Client
m = json.load(open('/data/runs/check/metrics.json'))
acc = m['val_accuracy']
print(f'run /data/runs/check: val_accuracy {acc:.3f} (4 classes, chance 0.25)')
assert acc > 0.375, 'the model did not learn'
c = Client('$SCHED', timeout=30)
names = {a: w['name'] for a, w in c.scheduler_info()['workers'].items()}
done = {names[a]: n for a, n in c.run(lambda dask_worker: dask_worker.state.transition_counter).items()}
print('task transitions per worker:', done)
assert len(done) == 2 and all(n > 0 for n in done.values()), 'a worker did no work'
"
# --ddp 2: one rank in each worker container, joined by torch.distributed (gloo). 2^16 buckets: a
# rank of the default 2^19-bucket model needs about 1 GiB (weights, moments, best copy), more than
# these 1 GiB workers hold, and the check is about the image, not the model's size.
run lancetnic-flow train /data/train.csv --text text --label label --scheduler "$SCHED" \
    --epochs 1 --blocksize 256KiB --out /data/runs --name check-ddp --cache /data/cache-ddp --ddp 2 \
    --buckets 65536 --checkpoint-every 10
run python -c "
import json
d = json.load(open('/data/runs/check-ddp/metrics.json'))['ddp']
print('ddp:', d['ranks'], 'ranks on', d['workers'], d['backend'], '· replica digests', d['replica_digests'])
assert d['ranks'] == 2 and len(set(d['workers'])) == 2 and len(set(d['replica_digests'])) == 1
"
run lancetnic-flow predict /data/runs/check --input /data/train.csv \
    --output /data/preds.jsonl --force --scheduler "$SCHED"
n=$(wc -l <"$DATA/preds.jsonl")
[ "$n" -eq "$ROWS" ] || die "$n predictions for $ROWS rows"

T_ROLES=$((SECONDS - t))

TOTAL=$((SECONDS - T0))
base_note=$([ "$T_BASE" -gt 0 ] && echo "base $(fmt $T_BASE)" || echo "base cached")
echo
echo "PASS $IMAGE $SIZE · $base_note · build $(fmt $T_BUILD) · roles $(fmt $T_ROLES) · total $(fmt $TOTAL)"
