# Two entry points a newcomer needs (see README "Quick start"); both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/gpuplan: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

# The real engine of tests/integration/test_real_engine.py (transformers serve, on the CPU); optional,
# installed by .ci/run. torch first, pinned to a CPU build (this machine keeps the torch 2.13.0 CPU wheel
# on disk; elsewhere pass TORCH='torch==X.Y.Z+cpu' with your CPU index): a plain torch pulls a CUDA build.
TORCH ?= torch==2.13.0

.PHONY: demo test lint bench engine
demo: $(BIN)/gpuplan
	$(BIN)/gpuplan recommend --example

lint: $(BIN)/gpuplan
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/mypy  # src and tests, strict: see [tool.mypy] in pyproject.toml

test: lint
	$(BIN)/pytest

engine: $(BIN)/gpuplan
	$(BIN)/python -m pip install -q '$(TORCH)'
	$(BIN)/python -m pip install -q -e '.[dev,engine]'

bench: $(BIN)/gpuplan
	$(BIN)/python benchmarks/bench_recommend.py
