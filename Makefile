# miles-gb10-lab: every entry point a user needs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HARNESS := $(BIN)/harness
EXP ?= e2b-dapo-filter
SEEDS ?= 1 2 3

.PHONY: help setup test

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 18

$(BIN)/harness: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

setup: $(BIN)/harness ## create .venv and install the harness with its test tools

test: setup ## run the test suite (Docker tests run when an engine answers)
	$(BIN)/pytest -q
