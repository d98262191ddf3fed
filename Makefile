# Two entry points a newcomer needs (see README "Quick start"); both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/gpuplan: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

.PHONY: demo test lint bench
demo: $(BIN)/gpuplan
	$(BIN)/gpuplan recommend --example

lint: $(BIN)/gpuplan
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/mypy  # src and tests, strict: see [tool.mypy] in pyproject.toml

test: lint
	$(BIN)/pytest

bench: $(BIN)/gpuplan
	$(BIN)/python benchmarks/bench_recommend.py
