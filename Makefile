# Two commands on a fresh machine (Python 3.11+, Java 17+, Maven):
#   make demo   - set up, start local dc1/dc2 and run drkit's main job on them
#   make test   - set up and run the whole test suite against real Kafka
# Both are idempotent: the virtualenv is (re)built only when pyproject.toml or constraints.txt
# (the exact versions tested) changes, and Kafka's
# jars are fetched from Maven Central once and cached (~/.cache/drkit).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test lint bench clean down

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
	  || { echo "Python 3.11+ is required ($(PYTHON) is older)"; exit 1; }
	@command -v java >/dev/null || { echo "Java 17+ is required for the local Kafka clusters"; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven is required to fetch Kafka's jars"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: setup
	$(BIN)/drkit demo

test: setup
	scripts/test

lint: setup
	$(BIN)/ruff check drkit tests bench migrations runbooks
	$(BIN)/ruff format --check drkit tests bench migrations runbooks
	$(BIN)/mypy

bench: setup
	$(BIN)/python -m bench

down:
	-$(BIN)/drkit local down

clean: down
	rm -rf $(VENV) .drkit-test .pytest_cache .mypy_cache .ruff_cache
