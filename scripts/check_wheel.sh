#!/usr/bin/env bash
# Build the wheel and run the CLI from a fresh venv that holds only the wheel
# and what it depends on (no test tools): what `pip install .` gives a user.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$PYTHON -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --upgrade pip
"$tmp/venv/bin/python" -m pip wheel -q --no-deps -w "$tmp/dist" .
"$tmp/venv/bin/python" -m pip install -q -c constraints.txt torch==2.13.0
"$tmp/venv/bin/python" -m pip install -q -c constraints.txt "$tmp"/dist/lancetnic_flow-*.whl
cd "$tmp"   # not the source tree: the installed wheel must do it alone
"$tmp/venv/bin/lancetnic-flow" --help > /dev/null
"$tmp/venv/bin/lancetnic-flow" train --help | grep -q -- "--memory-budget"
"$tmp/venv/bin/python" -c "import lancetnic_flow.api.estimators, lancetnic_flow.training.orchestrator"
if "$tmp/venv/bin/python" -c "import pytest" 2> /dev/null; then
    echo "wheel check: the runtime install pulled in pytest" >&2
    exit 1
fi
"$tmp/venv/bin/lancetnic-flow" make-data d.csv --rows 3000 > /dev/null
"$tmp/venv/bin/lancetnic-flow" train d.csv --epochs 1 --quiet --memory-budget 3GiB > /dev/null 2>&1
echo "wheel check: ok ($(ls "$tmp"/dist))"
