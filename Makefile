# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv if needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# torch==2.13.0 is the CPU build that lies on disk on our machines; a bare `torch` pulls CUDA.
TORCH  ?= torch==2.13.0

.PHONY: install demo test docs bench clean

install: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml Makefile | $(BIN)/python
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[train,browser,dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m reference_trainer demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

docs: $(STAMP)
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) site .pytest_cache .hypothesis
