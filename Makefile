# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Both are idempotent: they install only what is missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_VERSION ?= 2.13.0
STAMP := $(VENV)/.devicerl-installed
EXTRAS ?= all
# Two test workers; the tests that start a Ray cluster share one (tests/conftest.py).
PYTEST_ARGS ?= -n 2 --dist loadgroup

.PHONY: demo test setup system venv lint format bench clean

demo: setup
	$(PY) -m devicerl demo --overwrite

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

setup: system $(STAMP)

# System packages: Chromium and its driver through apt, only when root and missing.
system:
	@bash scripts/install_system.sh

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip setuptools wheel

# torch first, pinned, so nothing later pulls a CUDA build from the registry.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$(TORCH_VERSION)')" 2>/dev/null \
	  || $(PIP) install --quiet torch==$(TORCH_VERSION)
	$(PIP) install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

venv: $(STAMP)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache runs
