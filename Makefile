# Two commands matter: `make demo` and `make test`. Both build .venv from nothing first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-all lint bench bench-quick clean help

help:
	@echo "make demo    run ctrlz end to end on a scratch workspace"
	@echo "make test    run every test (and ruff); the long crash and load loops run a slice"
	@echo "make test-all  the same, with the long loops in full (tests marked slow)"
	@echo "make bench   compare ctrlz with git, tar+zstd and rsync (takes several minutes)"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	@PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

test: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/python -m pytest -m "not slow"

test-all: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

bench: $(STAMP)
	$(BIN)/python bench/run.py

bench-quick: $(STAMP)
	$(BIN)/python bench/run.py --quick

clean:
	rm -rf $(VENV) bench/out .pytest_cache

# Pre-install the real agents tests/agents/real drives (npm, ~1.7 GB, into .cache/agents)
# Remote benchmark (bench/remote.py): ctrlz against restic's S3 backend on a local moto server.
# Installs Debian's restic first when it is missing and apt-get can be used.
.PHONY: bench-remote
bench-remote: $(STAMP)
	@command -v restic >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] \
	  && (apt-get update -qq && apt-get install -y -qq restic) >/dev/null 2>&1; } \
	  || echo "note: restic not installed; its columns are skipped"
	$(BIN)/python bench/remote.py $(ARGS)

.PHONY: agents
agents: $(STAMP)
	$(BIN)/python -m tests.agents.real.conftest

# Re-take the dashboard screenshots in docs/img (headless Chromium; see tests/service/test_browser.py)
.PHONY: screenshots
screenshots: $(STAMP)
	CTRLZ_SCREENSHOTS=1 $(BIN)/python -m pytest -q tests/service/test_browser.py
