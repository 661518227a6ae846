# flinkstate: `make demo` runs the main job, `make test` runs the tests.
# Both create the virtualenv (.venv) when it is missing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PKG_DIRS := $(shell find state checkpoint connector cli -type d -not -name __pycache__ 2>/dev/null)

export PYTHONDONTWRITEBYTECODE := 1
export PYSPARK_PYTHON := $(abspath $(BIN)/python)
export PYSPARK_DRIVER_PYTHON := $(abspath $(BIN)/python)

.PHONY: help setup demo test test-fast test-flink fuzz faults bench docs lint typecheck clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

JAVA_SRC := $(shell find connector/jvm -name "*.java")
JAR := connector/jvm/flinkstate-spark.jar

# The placement class (connector/process/placement.py) compiles against the pip pyspark's jars; without
# javac the jar is left out and runs are not placed (nothing else changes).
$(STAMP): pyproject.toml constraints.txt $(shell find state -name "*.c" -o -name "*.h") $(PKG_DIRS) $(JAVA_SRC)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	PIP_CONSTRAINT=$(abspath constraints.txt) $(BIN)/pip install -q pyspark
	rm -rf build/jvm $(JAR)
	if command -v javac >/dev/null && command -v jar >/dev/null; then \
		jars=$$($(BIN)/python -c "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))"); \
		javac -nowarn --release 17 -cp "$$jars/*" -d build/jvm $(JAVA_SRC) && jar cf $(JAR) -C build/jvm .; \
	else echo "javac not found: $(JAR) not built, so process runs are not placed"; fi
	PIP_CONSTRAINT=$(abspath constraints.txt) $(BIN)/pip install -q -e ".[dev]" \
		--config-settings editable_mode=strict
	touch $(STAMP)

setup: $(STAMP)  ## create .venv and install flinkstate with its dev tools

demo: $(STAMP)  ## run the main job end to end on local defaults
	$(BIN)/python examples/demo.py

test: $(STAMP)  ## run every test tier but the Flink one, then the connect tier again on a Spark Connect session
	$(BIN)/python -m pytest -m "not flink"; classic=$$?; \
	$(BIN)/python -m pytest --connect -m "not flink" tests/connector; connect=$$?; \
	test $$classic -eq 0 && test $$connect -eq 0

test-fast: $(STAMP)  ## run the tests that are not marked slow
	$(BIN)/python -m pytest -m "not slow and not flink"

FLINK_VENV ?= /work/flinkvenv
FLINK120_VENV ?=
FLINK117_LIB ?=
FLINK115_LIB ?=
FLINK113_LIB ?=
test-flink: $(STAMP)  ## restore written savepoints in real Flink (FLINK_VENV: a venv with apache-flink 2.3; FLINK120_VENV: one with 1.20.5; FLINK117_LIB, FLINK115_LIB, FLINK113_LIB: deps/lib of the apache-flink-libraries 1.17.2, 1.15.4, 1.13.6 sdists; each release runs where named)
	FLINK_VENV=$(abspath $(FLINK_VENV)) FLINK120_VENV=$(abspath $(FLINK120_VENV)) \
		FLINK117_LIB=$(abspath $(FLINK117_LIB)) FLINK115_LIB=$(abspath $(FLINK115_LIB)) \
		FLINK113_LIB=$(abspath $(FLINK113_LIB)) $(BIN)/python -m pytest -m flink

SEED ?= 1
COUNT ?= 5000
fuzz: $(STAMP)  ## hunt hostile bytes: COUNT mutations (SEED) of every Flink fixture and a checkpoint of ours
	$(BIN)/python tests/support/hunt.py --seed $(SEED) --count $(COUNT)

faults: $(STAMP)  ## object-store faults: every fault kind at every request of each public path (S3 on loopback)
	FAULTS=all $(BIN)/python -m pytest -m s3 -s tests/checkpoint/test_storage_faults.py tests/connector/test_spark_storage_faults.py

bench: $(STAMP)  ## run the benchmarks (JSON lines; BENCH_ARGS="--quick --only P1")
	$(BIN)/python benchmarks/run.py $(BENCH_ARGS)

docs: $(STAMP)  ## build the documentation site (docs/, API pages from docstrings) into site/; warnings are errors
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(STAMP)  ## ruff check, format check, and the import contracts (layers; checkpoint/'s face)
	$(BIN)/ruff check state checkpoint connector cli tests benchmarks examples docs/*.py
	$(BIN)/ruff format --check state checkpoint connector cli tests benchmarks examples docs/*.py
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)  ## mypy --strict on the library
	$(BIN)/mypy state checkpoint connector cli

clean:  ## remove the virtualenv and build output
	rm -rf $(VENV) build site *.egg-info $(JAR) $(shell find state -name "*.so")
