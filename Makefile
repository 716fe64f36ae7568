# Two entry points a fresh machine needs: `make demo` (the workflow on the demo) and `make test`.
# Both create .venv and install hspZ with what the tests need; nothing else is assumed.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# the workflow on the bundled demo (config/config.yaml), then its HTML report; the jobs' shells
# find hspZ in .venv/bin
demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --profile profiles/local
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --profile profiles/local --report results/report.html

test: lint
	$(BIN)/pytest -q

# the style gate `make test` runs first: lint rules, formatting, types (all set in pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) demo-out results work logs .snakemake .pytest_cache .ruff_cache .mypy_cache
