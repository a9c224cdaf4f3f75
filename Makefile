# Two commands do everything on a fresh machine with Python ≥ 3.11 and pip:
#   make demo   set up .venv, generate a corpus, train on it, predict
#   make test   set up .venv, run the test suite (unit, integration)
#   make test-unit   the fast unit layer alone (tests/unit: no cluster, no subprocess)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
# Two pytest-xdist workers, a file at a time: a test that waits on a cluster or a
# subprocess leaves the other core to the other worker (tests/conftest.py orders the files).
PYTEST := $(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=40
# The unit layer: milliseconds a test, so one process (no workers to start); under two minutes.
PYTEST_UNIT := $(BIN)/python -m pytest -q -p no:xdist --durations=10 tests/unit

.PHONY: setup setup-test demo test test-image test-unit test-fast bench image-check wheel-check clean

# What running needs, nothing more (`make demo`); the test tools come with `make test`.
setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/python -m pip install -q -c constraints.txt -e .
	# compile the featurisation kernels once (numba caches them beside the source)
	$(BIN)/python -c "from lancetnic_flow.features import kernels; kernels.warm()"
	touch $(STAMP)

setup-test: $(TEST_STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	touch $(TEST_STAMP)

demo: setup
	$(BIN)/lancetnic-flow demo

# The suite (.ci/run runs it first): tests/unit, tests/integration (real CLI runs
# and clusters), tests/test_layout.py. The container image check is its own step
# (make test-image, after it in .ci/run): built beside the suite it took most of
# a core from the suite's two workers for ten minutes.
test: setup-test
	$(PYTEST) -m "not image"

# tests/integration/test_image.py alone: scripts/check_image.sh (root and podman,
# else skipped with the reason) and the checks on what its log says.
test-image: setup-test
	$(BIN)/python -m pytest -q -p no:xdist -m image tests/integration/test_image.py

test-unit: setup-test
	$(PYTEST_UNIT)

# The old name of the quick run: the unit layer now.
test-fast: test-unit

# The wheel alone, in a fresh venv: `pip install .` gives a working CLI.
wheel-check:
	PYTHON=$(PYTHON) bash scripts/check_wheel.sh

bench: setup
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[bench]'
	$(BIN)/python benchmarks/scaling.py

# Build the Dockerfile with podman (local Debian base, no Docker Hub) and run
# the image as scheduler, two workers and trainer; needs root.
image-check:
	bash scripts/check_image.sh

clean:
	rm -rf $(VENV) demo-data runs .pytest_cache
