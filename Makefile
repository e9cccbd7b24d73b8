# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv if needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
comma  := ,
# torch==2.13.0 is the CPU build that lies on disk on our machines; a bare `torch` pulls CUDA.
TORCH  ?= torch==2.13.0
# llama-cpp-python compiles llama.cpp at install. A native build (-march=native) can use instructions the CPU lists
# but the machine does not grant (AMX on our VMs: SIGILL at the first token), so build for AVX2, which every x86-64
# server here runs. Override on other CPUs, e.g. LLAMA_CMAKE_ARGS="-DGGML_NATIVE=ON".
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
EXTRAS := train,browser,parquet,fast-search,spacy,gguf,dev

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
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	$(BIN)/python -m agentgym_turn.extras $(subst $(comma), ,$(EXTRAS))
	$(BIN)/python -m reference_trainer.models --check
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m reference_trainer demo

test: $(STAMP) system-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

docs: $(STAMP)
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) site .pytest_cache .hypothesis
