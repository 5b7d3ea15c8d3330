# wlc/wlr: everything a fresh machine needs is made here.
#   make demo   - create .venv, install, fetch TPC-H dbgen, run the TPC-H replication demo
#   make check  - lint and format (ruff), types (mypy), import contracts (import-linter), unit tests: under 2 minutes
#   make test   - create .venv if needed, the checks of make check, the documentation build, then the whole
#                 test suite with the random-kill loops
#   make docs   - build the documentation site strictly into site/ (make test runs it first)
#   make reference - regenerate the reference pages' generated text (configuration, command line, API)
#                 from the defaults, the parsers and the docstrings; a unit test fails when it is stale
#   make faults - only the random-kill loops (WLC_FAULT_ROUNDS, WLC_FAULT_SECONDS, WLC_FAULT_SEED)
#   make bench  - catch-up replay side by side (serial, grouped, change-feed recipe, floor, re-copy),
#                 then what live capture costs the master (writing at beat 1 s and 300 s, idle)
#   make bench-lifecycle - recovering a dropped table from the first snapshot through level 0 against the
#                 nearest snapshot and compacted levels; log size before and after prune; compaction ratios
#   make bench-scale - warehouse scale (about an hour): TPC-H SF 1, 200 tables, 20,000 batches, a
#                 master written and followed for 10 minutes (bench/scale.py; --quick for minutes)
#   make bench-ship - shipping to a folder and to a local S3-compatible server; replica catch-up from
#                 the master's folder, the shipped folder and the object store
#   make clean  - remove the venv, caches and demo data

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))

.PHONY: demo check lint test docs reference unit faults bench bench-lifecycle bench-ship bench-scale clean venv jars jars-s3a

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,docs]'
	$(PY) -m ipykernel install --user --name wlc-venv --display-name "wlc (.venv)" >/dev/null
	touch $(STAMP)

# Delta's jars: Spark resolves io.delta:delta-spark from Maven Central into ~/.ivy2.5.2 on first
# use. Warm that cache once so the first test does not time out on a slow download.
jars: $(STAMP)
	$(PY) -m wlc.jars

# hadoop-aws and the AWS SDK (~700 MB) for Spark's s3a, which the tests use: resolved once into ~/.ivy2.5.2
jars-s3a: $(STAMP)
	WLC_CONFIG=tests/wlc-s3a.yaml $(PY) -m wlc.jars

# two pytest workers (pytest-xdist), each with one shared Spark session, run the suite and the
# random-kill loops: one process leaves a quarter of 2 cores idle while tests wait on the
# processes they start. --dist loadfile keeps a file's tests on one worker: the conformance run
# (a fixture per session) is built once, the install tests build one wheel.
# jars-s3a's session resolves Delta's jars too
test: $(STAMP) jars-s3a lint docs
	$(PY) -m pytest -q -n 2 --dist loadfile tests

# the documentation site (mkdocs.yml): strict, so a broken link, a missing page or a docstring
# the API reference cannot read fails the build
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet

# the reference pages' generated blocks (docs/_hooks/generate.py): committed, so the docs folder
# reads whole on a forge; tests/unit/test_reference_docs.py fails when they are stale
reference: $(STAMP)
	$(PY) -m docs._hooks.generate

faults: $(STAMP) jars
	$(PY) -m pytest -q tests/fault/test_random_kills.py -m random_kills

unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

# the packages' and the tests' lint (pyproject.toml: [tool.ruff]), types ([tool.mypy]) and the
# arrows between wlcore, wlc and wlr ([tool.importlinter])
lint: $(STAMP)
	$(PY) -m ruff check wlc wlcore wlr tests bench demo docs
	$(PY) -m ruff format --check --quiet wlc wlcore wlr tests bench demo docs
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

check: lint
	$(PY) -m pytest -q -n 2 tests/unit

demo: $(STAMP) jars
	$(PY) demo/tpch_demo.py

bench: $(STAMP) jars
	$(PY) bench/catchup.py
	$(PY) bench/capture_cost.py

bench-lifecycle: $(STAMP) jars
	$(PY) bench/lifecycle.py

bench-scale: $(STAMP) jars
	$(PY) bench/scale.py $(SCALE_ARGS)

bench-ship: $(STAMP) jars-s3a
	$(PY) bench/ship.py

clean:
	rm -rf $(VENV) .cache dbfarm .pytest_cache *.egg-info build dist site
