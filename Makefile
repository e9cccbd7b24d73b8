# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv if needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# torch==2.13.0 is the CPU build that lies on disk on our machines; a bare `torch` pulls CUDA.
TORCH  ?= torch==2.13.0

.PHONY: install system-deps demo test docs clean

install: $(STAMP)

# Headless Chromium + its driver for TurnWebShopBrowser-v0 and the site's browser tests (Debian packages).
system-deps:
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
		else \
			echo "Install Chromium and its driver (Debian: sudo apt-get install chromium chromium-driver) for the browser tests."; \
		fi; \
	fi

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml Makefile | $(BIN)/python
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[train,browser,parquet,fast-search,spacy,dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m reference_trainer demo

test: $(STAMP) system-deps
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

docs: $(STAMP)
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) site .pytest_cache .hypothesis
