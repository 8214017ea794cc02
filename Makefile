# One command to set up and run the main job, one to set up and run the tests.
# Each creates .venv on first use; LEGALBENCH_DIR defaults to ../shared/legalbench.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 5000
export LEGALBENCH_DIR ?= $(abspath ../shared/legalbench)
export LITELLM_LOCAL_MODEL_COST_MAP ?= True

.PHONY: demo ui test test-fast lint docs setup setup-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# llama-cpp-python compiles from source the first time (about 4 minutes on 2 cores);
# pip caches the wheel afterwards. The stamps skip pip when pyproject.toml is unchanged.
$(VENV)/.setup-local: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[local]'
	touch $@

$(VENV)/.setup-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,local,server,ray,interop]'
	touch $@

setup: $(VENV)/.setup-local

setup-dev: $(VENV)/.setup-dev

## demo: a real study tracked in MLflow: rule reference vs rule description on three tasks,
## 40 rows each, both embedded models (SmolLM2-135M, Gemma 3 270M), scored by log-likelihood;
## prints the comparison table with p-values, where the figures are, and how to open the UI.
demo: setup
	$(BIN)/workbench sweep ablations/demo.yaml

## ui: serve the MLflow store named in mlflow.yaml (Ctrl-C stops it)
ui: setup
	$(BIN)/workbench ui --port $(PORT)

lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

## docs: build the docs site with --strict (a broken link or a stale page fails) into site/;
## the CLI reference is generated from the Typer app at build time
docs: setup-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

## test: lint, type-check, build the docs, then every test (data-, model- and cluster-backed ones included),
## three at a time (pytest-xdist; a test file stays on one worker: module fixtures, servers;
## many tests wait on subprocesses and servers, so 3 workers use 2 cores better than 2;
## a worker that crashes ends the run with its error, not a replacement that may hang)
test: lint docs
	$(BIN)/pytest -n 3 --dist loadfile --max-worker-restart=0 --durations=25

## test-fast: the tests that need neither the LegalBench data nor much time (no lint, no docs):
## the loop to run while editing; `make test` before a commit lands
test-fast: setup-dev
	$(BIN)/pytest -n 3 --dist loadfile --max-worker-restart=0 -m "not slow and not data" -q

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
