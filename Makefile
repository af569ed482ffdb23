# Two commands matter: `make demo` and `make test`. Both build .venv from nothing first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-portable test-all lint bench bench-quick bench-tools clean help

help:
	@echo "make demo    run ctrlz end to end on a scratch workspace"
	@echo "make test    run every test (and ruff); the long crash and load loops run a slice"
	@echo "make test-all  the same, with the long loops in full (tests marked slow)"
	@echo "make test-portable  the restore, crash, CLI, hook, MCP, service and remote tests again"
	@echo "              with every Linux-only fast path off (CTRLZ_PLATFORM=portable)"
	@echo "make bench   compare ctrlz with git, tar+zstd and rsync, and time ctrlz run --sandbox"
	@echo "             (takes several minutes)"

$(STAMP): pyproject.toml setup.py $(wildcard src/ctrlz/door/*.c src/ctrlz/door/*.h src/ctrlz/door/ctrlz src/ctrlz/door/ctrlz-hook \
	src/ctrlz/sandbox/*.c src/ctrlz/sandbox/*.h)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	@PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

test: $(STAMP)
	$(BIN)/ruff check src tests bench setup.py
	$(BIN)/python -m pytest -m "not slow"

# The portable pass (issue 44): the tests of the restore engine (faults and kill -9 crashes
# included), copy-on-write, the CLI, agent hooks, MCP, the service and remotes, run again with
# CTRLZ_PLATFORM=portable: no renameat2, syncfs, O_DIRECT, FICLONE, inotify or strace, as if the
# calls did not exist (src/ctrlz/platform.py). What has no portable twin skips with its reason.
# Left out, for time (the pass is held under 10 minutes): the real agents' end-to-end runs
# (tests/agents/real: the hooks they exercise are tested in tests/agents) and the dashboard's
# browser and load tests (nothing in them touches a fast path). Measured on the 2-core machine:
# 415 s for 684 tests (50 skipped with their reasons), and 15 s for the two installs.
PORTABLE_TESTS := tests/test_platform.py tests/engine tests/cow tests/cli tests/agents \
	tests/mcp tests/service tests/remote --ignore=tests/agents/real \
	--ignore=tests/service/test_browser.py --ignore=tests/service/test_load.py
test-portable: $(STAMP)
	CTRLZ_PLATFORM=portable $(BIN)/python -m pytest -m "not slow" $(PORTABLE_TESTS)
	$(BIN)/python -m pytest -m slow tests/test_packaging.py  # installs with no C door

test-all: $(STAMP)
	$(BIN)/ruff check src tests bench setup.py
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench setup.py

# the tools make bench compares with (git, tar, zstd, rsync) and the filesystems of its
# copy-on-write rows: installed from Debian when missing and apt-get can be used
BENCH_TOOLS = git tar zstd rsync mkfs.xfs mkfs.btrfs
bench-tools:
	@missing=""; for t in $(BENCH_TOOLS); do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && apt-get install -y -qq git tar zstd rsync xfsprogs btrfs-progs) >/dev/null 2>&1 \
	    || echo "note: could not install$$missing; their rows are skipped or fail"; \
	  else echo "note:$$missing missing (install them as root); their rows are skipped or fail"; fi; \
	fi

bench: $(STAMP) bench-tools
	$(BIN)/python bench/run.py
	$(BIN)/python bench/sandbox.py  # what ctrlz run --sandbox costs (issue 42's targets)

bench-quick: $(STAMP) bench-tools
	$(BIN)/python bench/run.py --quick
	$(BIN)/python bench/sandbox.py --repeat 3

clean:
	rm -rf $(VENV) bench/out .pytest_cache

# Remote benchmark (bench/remote.py): ctrlz against restic's S3 backend on a local moto server.
# Installs Debian's restic first when it is missing and apt-get can be used.
.PHONY: bench-remote
bench-remote: $(STAMP)
	@command -v restic >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] \
	  && (apt-get update -qq && apt-get install -y -qq restic) >/dev/null 2>&1; } \
	  || echo "note: restic not installed; its columns are skipped"
	$(BIN)/python bench/remote.py $(ARGS)

# Pre-install the real agents tests/agents/real drives (npm, ~1.7 GB, into .cache/agents)
.PHONY: agents
agents: $(STAMP)
	$(BIN)/python -m tests.agents.real.conftest

# Re-take the dashboard screenshots in docs/img (headless Chromium; see tests/service/test_browser.py)
.PHONY: screenshots
screenshots: $(STAMP)
	CTRLZ_SCREENSHOTS=1 $(BIN)/python -m pytest -q tests/service/test_browser.py
