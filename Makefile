# The two set-up commands of the README. Both create .venv/ when it is missing, install ladder into it,
# and are safe to run again.
#   make demo   the main job: the built-in `default` study end to end on this machine's CPUs
#   make test   ruff (lint and format check), then the whole test suite (what CI runs), with a local SLURM
#               cluster when run as root

VENV   ?= .venv
PYTHON ?= python3
STAMP  := $(VENV)/.ladder-installed
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: demo test lint install clean-venv bench

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@# -qq: pip's errors only. Its warnings here are the host's (index locations it lacks) and setuptools' notice
	@# on editable installs, pages of them before the tool's own first line; a failed install still says why
	@$(VENV)/bin/python -m pip install -qq --upgrade pip
	@# torch first: 2.13.0 is a local CPU wheel on the reference machines; elsewhere any torch>=2.4 will do
	@$(VENV)/bin/python -c "import torch" 2>/dev/null || $(VENV)/bin/python -m pip install -qq torch==2.13.0 \
	  || $(VENV)/bin/python -m pip install -qq "torch>=2.4"
	@# every other package at the version constraints.txt pins (the main job's embedded corpus reads their source)
	@$(VENV)/bin/python -m pip install -qq -c constraints.txt -e ".[test]"
	@touch $(STAMP)
	@echo "installed: $(VENV)/bin/ladder"

demo: $(STAMP)
	$(VENV)/bin/ladder run default

test: $(STAMP) lint
	bash scripts/test.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/bench_fit.py
	$(VENV)/bin/python benchmarks/bench_trainer.py

clean-venv:
	rm -rf $(VENV)
