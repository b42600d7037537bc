# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Both depend on the .venv target, which creates the virtual environment and installs what they need.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install test lint clean

$(VENV): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(VENV)

install: $(VENV)

test: $(VENV)
	$(BIN)/python -m pytest -q

lint: $(VENV)
	$(BIN)/ruff check contextdelta tests
	$(BIN)/mypy contextdelta

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
