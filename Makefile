# miles-gb10-lab: every entry point a user needs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HARNESS := $(BIN)/harness
# No EXP: the harness takes the lab's default experiment (HARNESS_EXPERIMENT, else
# e2b-dapo-filter) and says so; `make run` and `harness sweep --seeds 1 2 3` agree.
EXP ?=
SEEDS ?= 1 2 3
# SIM=1: run, sweep and smoke on the simulator (the sim image, or the process engine
# where Docker does not answer); captures under capture/sim. SIM_TIME_SCALE: wall
# seconds per simulated second (empty: the harness's default, 0.01, the demo's).
SIM ?=
SIM_TIME_SCALE ?=
sim_on := $(filter-out 0 no false,$(SIM))
# SIM_ENGINE=docker|process: what runs the simulator (empty: Docker where the sim image is, else a process);
# CI's smoke job says docker, so a run that fell back to a process fails rather than proving nothing of the image.
SIM_ENGINE ?=
SIM_FLAGS = $(if $(sim_on),--sim $(if $(SIM_TIME_SCALE),--time-scale $(SIM_TIME_SCALE)) $(if $(SIM_ENGINE),--sim-engine $(SIM_ENGINE)))
# run, sweep and demo: FORCE=1 reruns a run whose capture succeeded (--force); ARGS=
# passes more flags to run and sweep, e.g. ARGS="--max-minutes 30 --set steps=4".
FORCE ?=
ARGS ?=
# NAME=: run (or sweep) the configuration under a run name of its own (--name), e.g. a variant with ARGS="--set ...".
NAME ?=
# PARALLEL=N: a sweep's runs N at a time where they take no GPU; on the simulator every seed at once by default.
PARALLEL ?= $(if $(sim_on),$(words $(SEEDS)))
force_on := $(filter-out 0 no false,$(FORCE))
RUN_FLAGS = $(SIM_FLAGS) $(if $(force_on),--force) $(if $(NAME),--name '$(NAME)') $(ARGS)
# The smoke run's captures stay apart from the lab's, so no summary of capture/gpu or
# capture/sim ever counts one; real and simulated smoke runs apart from each other too.
SMOKE_CAPTURE_ROOT = capture/smoke/$(if $(sim_on),sim,gpu)
# The lab image. MILES_BASE and MILES_COMMIT default to the Dockerfile's ARGs;
# set them to override (an empty MILES_BASE is ignored; MILES_COMMIT= keeps the
# base's Miles).
LAB_IMAGE ?= miles-gb10-lab:latest
DEFAULT_MILES_BASE := $(shell sed -n 's/^ARG MILES_BASE=//p' Dockerfile)
BUILD_ARGS = $(if $(MILES_BASE),--build-arg 'MILES_BASE=$(MILES_BASE)') \
	$(if $(filter undefined,$(origin MILES_COMMIT)),,--build-arg 'MILES_COMMIT=$(MILES_COMMIT)')
# The model and data set (mounted at /data in the container); the experiments
# read the same variable, so `make data MILES_LAB_DATA=/srv/lab` and runs agree.
export MILES_LAB_DATA ?= data
MODEL_REPO ?= Qwen/Qwen3-0.6B
DATASET_REPO ?= zhuzilin/gsm8k

.PHONY: help setup demo test test-fast lint offline-images sim-image sim-ready image data run sweep decide status smoke summarize report

# Targets are grouped by `##@` lines, in the order a newcomer meets them;
# a target's `## text` is its line in `make help`.
help: ## list the targets
	@awk 'BEGIN { FS = ":.*## " } /^##@ / { printf "\n%s\n", substr($$0, 5) } \
		/^[a-z-]+:.*## / { printf "  %-16s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

##@ First steps (any Debian-like machine; Docker optional)

# Set-up and the image build run at once (the one waits on the network and pip, the
# other on Docker), then the demo's ten runs run at once too: each mostly sleeps.
ifneq ($(filter demo,$(MAKECMDGOALS)),)
demo_started := $(shell date +%s)
endif
demo: ## the whole pipeline on the simulator: 10 runs with heat pauses, summary, figures, report, across seeds
	@$(MAKE) --no-print-directory -j2 setup sim-ready
	$(HARNESS) demo $(if $(SIM_TIME_SCALE),--time-scale $(SIM_TIME_SCALE)) $(if $(force_on),--force) $(DEMO_FLAGS)
	@echo "make demo: done in $$(( $$(date +%s) - $(demo_started) )) s, set-up included"

$(BIN)/harness: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,export,cluster,board,wandb]'
	@touch $@

# Said on `make setup` and `make test`, the README's first steps; other targets stay quiet.
VENV_HINT := harness is installed in $(VENV): run $(BIN)/harness, or 'source $(VENV)/bin/activate' to put harness on PATH
setup: $(BIN)/harness ## create .venv and install the harness with its test and lint tools, Ray (--ray), TensorBoard and W&B
	@$(if $(filter setup test,$(MAKECMDGOALS)),echo "$(VENV_HINT)",:)

# Both run on workers (pytest-xdist), each test module whole on one worker (--dist loadfile): a module's
# fixtures are made once, not once a worker (the fast tier, measured on 2 loaded cores: 66 and 73 s against 80
# and 84 s test by test). The longest modules start first (tests/support/order.py); xdist's own reordering, by
# the number of tests, is off. The whole suite mostly waits (on runs, containers, clusters), so it takes two
# workers a core (SUITE_WORKERS; measured on 2 cores loaded by others: 435 s on 4 workers, 624 s on 2); the fast
# tier computes, and takes one a core (TEST_WORKERS). Bytecode is cached even where PYTHONDONTWRITEBYTECODE is
# set: without it pytest rewrites the asserts of every test module again on every run, seconds of the budget.
TEST_WORKERS ?= 2
SUITE_WORKERS ?= $(shell echo $$(( 2 * $$(nproc 2>/dev/null || echo 1) )))
ON_WORKERS = --dist loadfile --no-loadscope-reorder
test: setup ## the whole suite, as CI runs it (Docker tests where an engine answers): 9 to 10 min on 2 cores, 13 to 17 beside a second suite
	@SECONDS=0; env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q -n $(SUITE_WORKERS) $(ON_WORKERS); code=$$?; \
		echo "make test: $$([ $$code = 0 ] && echo done || echo failed) in $$SECONDS s"; exit $$code

# The fast tier: every test not marked docker, gpu, ray, integration or browser, each property test searching a
# tenth of its examples (tests/support/properties.py).
FAST_TIER = not (docker or gpu or ray or integration or browser)
test-fast: setup ## the fast tier: the tests not marked docker, gpu, ray, integration or browser (docs/development.md)
	@SECONDS=0; env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q -n $(TEST_WORKERS) $(ON_WORKERS) --hypothesis-profile=fast \
		-m "$(FAST_TIER)" && echo "make test-fast: done in $$SECONDS s"

# mypy checks the packages [tool.mypy] lists in pyproject.toml; its cache (.mypy_cache) makes a rerun fast.
lint: setup ## ruff (lint and format) and mypy, as CI runs them before the tests
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

offline-images: ## build the busybox and python base images without a registry, from what this machine has
	bash scripts/offline-images.sh

sim-image: ## build the simulator's image (Dockerfile.sim) on Docker, without a registry
	bash scripts/sim-image.sh

# What SIM=1 targets and the demo need: the sim image where Docker answers, else one line
# saying the process engine runs the simulator instead.
sim-ready:
	@bash scripts/sim-image.sh --best-effort

##@ On the GB10

image: ## build the lab image (MILES_BASE=<Miles base for your GPU> MILES_COMMIT=<sha, empty keeps the base's>)
	@$(if $(MILES_BASE),:,! docker version >/dev/null 2>&1 || docker image inspect '$(DEFAULT_MILES_BASE)' >/dev/null 2>&1 \
		|| { echo "make image: set MILES_BASE, the Miles image built for your GPU that the lab image builds on (the default, $(DEFAULT_MILES_BASE), is not on this Docker engine), e.g. make image MILES_BASE=miles-gb10-base:latest (docs/lab-image.md)" >&2; exit 1; })
	docker build $(BUILD_ARGS) --tag $(LAB_IMAGE) .

data: setup ## download the model and the data set into data/ (or MILES_LAB_DATA=<dir>; needs internet)
	@test -f '$(MILES_LAB_DATA)/models/$(notdir $(MODEL_REPO))/config.json' -a -f '$(MILES_LAB_DATA)/$(notdir $(DATASET_REPO))/train.parquet' \
		|| $(BIN)/python -c 'import huggingface_hub' 2>/dev/null || $(BIN)/pip install -q 'huggingface_hub>=0.23' >/dev/null 2>&1 \
		|| { echo "make data: cannot install huggingface_hub: it needs internet, or MILES_LAB_DATA pointing at a prepared directory" >&2; exit 1; }
	@$(BIN)/python scripts/fetch-data.py '$(MODEL_REPO)' '$(MILES_LAB_DATA)/models/$(notdir $(MODEL_REPO))' \
		'$(DATASET_REPO)' '$(MILES_LAB_DATA)/$(notdir $(DATASET_REPO))'
	@echo "data ready in $(MILES_LAB_DATA)/: mount it at /data"

run: setup $(if $(sim_on),sim-ready) ## run one experiment on the GPU: make run EXP=e2b-dapo-filter (SIM=1, FORCE=1, NAME=, ARGS=...)
	$(HARNESS) run $(EXP) $(RUN_FLAGS)

sweep: setup $(if $(sim_on),sim-ready) ## run an experiment over seeds: make sweep EXP=plain-48 SEEDS="1 2 3" (SIM=1, FORCE=1, NAME=, PARALLEL=, ARGS=...)
	$(HARNESS) sweep $(EXP) --seeds $(SEEDS) $(if $(PARALLEL),--parallel $(PARALLEL)) $(RUN_FLAGS)

# EXPS="A B [C ...]": the experiments `make decide` compares (harness decide). On the simulator each interim's
# runs go at once: 5 seeds (the default n) of each experiment; DECIDE_PARALLEL=N says otherwise.
EXPS ?=
DECIDE_PARALLEL ?= $(if $(sim_on),$(words $(EXPS) $(EXPS) $(EXPS) $(EXPS) $(EXPS)))
decide: setup $(if $(sim_on),sim-ready) ## run seeds until AdaStop decides: make decide EXPS="e2b-dapo-filter plain-48" (SIM=1, ARGS=...)
	@$(if $(strip $(EXPS)),:,echo 'make decide: name two experiments or more, e.g. make decide EXPS="e2b-dapo-filter plain-48"' >&2; exit 2)
	$(HARNESS) decide $(EXPS) $(SIM_FLAGS) $(if $(DECIDE_PARALLEL),--parallel $(DECIDE_PARALLEL)) $(ARGS)

status: setup ## every capture: state, steps, pauses, exit code (SIM=1: the simulator's)
	$(HARNESS) status $(if $(sim_on),--sim)

smoke: setup $(if $(sim_on),sim-ready,image) ## smoke test: build the image, run 2 tiny steps under capture/smoke, check them (SIM=1)
	$(HARNESS) run smoke --force $(SIM_FLAGS) --capture-dir $(SMOKE_CAPTURE_ROOT)
	$(BIN)/python scripts/check-capture.py $(SMOKE_CAPTURE_ROOT)/smoke --state succeeded --complete-steps 2

##@ Results

summarize: setup ## captures -> capture/gpu/summary/miles-gb10-lab.json and its SVG figures (SIM=1: capture/sim)
	$(HARNESS) summarize $(if $(sim_on),--sim)

report: summarize ## report.md (tables, verdicts, figures) beside the summary JSON
	$(HARNESS) report $(if $(sim_on),--sim)
