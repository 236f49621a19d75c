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

# CI's suite: everything but the tests marked slow (a NeRF trained for planning, catalog-wide settling, Ray)
test: setup
	@$(PY) -m pytest -q -m "not slow"

test-all: setup
	@$(PY) -m pytest -q

bench: setup
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf build $(VENV)
