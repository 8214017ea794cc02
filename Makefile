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

setup: $(BIN)/python
	$(BIN)/pip install --quiet -e .

setup-dev: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'

## demo: list the catalog and render a few of the paper's prompt variants
demo: setup
	$(BIN)/workbench tasks
	$(BIN)/workbench render hearsay --variant instruction=reference,demos=none --limit 1
	$(BIN)/workbench render hearsay --variant instruction=description,demos=none --limit 1
	$(BIN)/workbench render cuad_audit_rights --variant register=plain,demos=none --limit 1
	$(BIN)/workbench render cuad_audit_rights --variant demos=4,seed=0,pool=train+test --limit 1

lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

## test: lint, type-check, then every test (data-backed ones included)
test: lint
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
