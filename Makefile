# getagrip_ros: the two commands are `make demo` and `make test` (both run the set-up first).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# Every ROS process started from here stays on loopback, in its own domain, with logs in a temp dir.
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST

.PHONY: setup demo test test-all bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	@$(PY) -m getagrip_ros.demo

# CI's suite: everything but the tests marked slow (a NeRF trained for planning, catalog-wide settling, Ray), on
# TEST_WORKERS processes (one per core here), a test file at a time each, the longest files first (test/conftest.py)
TEST_WORKERS ?= 2
test: setup
	@$(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test-all: setup
	@$(PY) -m pytest -q

# The speed benchmarks, each against a reference measured in the same run (~5 min). The quality benchmarks
# (simulated trials over many objects: minutes to hours) run with the commands in their docstrings.
bench: setup
	$(PY) benchmarks/bench_grasp_core.py
	$(PY) benchmarks/bench_planner.py
	$(PY) benchmarks/bench_sim.py
	$(PY) benchmarks/bench_labels.py
	$(PY) benchmarks/bench_graspd.py --speed
	$(PY) benchmarks/bench_motion_planning.py

clean:
	rm -rf build $(VENV)
