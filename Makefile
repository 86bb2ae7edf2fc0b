# miles-gb10-lab: every entry point a user needs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HARNESS := $(BIN)/harness
EXP ?= e2b-dapo-filter
SEEDS ?= 1 2 3
# The lab image. MILES_BASE and MILES_COMMIT default to the Dockerfile's ARGs;
# set them to override (an empty MILES_BASE is ignored; MILES_COMMIT= keeps the
# base's Miles).
LAB_IMAGE ?= miles-gb10-lab:latest
BUILD_ARGS = $(if $(MILES_BASE),--build-arg 'MILES_BASE=$(MILES_BASE)') \
	$(if $(filter undefined,$(origin MILES_COMMIT)),,--build-arg 'MILES_COMMIT=$(MILES_COMMIT)')
# The model and data set (mounted at /data in the container); the experiments
# read the same variable, so `make data MILES_LAB_DATA=/srv/lab` and runs agree.
export MILES_LAB_DATA ?= data
MODEL_REPO ?= Qwen/Qwen3-0.6B
DATASET_REPO ?= zhuzilin/gsm8k

.PHONY: help setup test offline-images image data run sweep status smoke summarize report

# Targets are grouped by `##@` lines, in the order a newcomer meets them;
# a target's `## text` is its line in `make help`.
help: ## list the targets
	@awk 'BEGIN { FS = ":.*## " } /^##@ / { printf "\n%s\n", substr($$0, 5) } \
		/^[a-z-]+:.*## / { printf "  %-16s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

##@ First steps (any Debian-like machine; Docker optional)

$(BIN)/harness: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,export]'
	@touch $@

# Said on `make setup` and `make test`, the README's first steps; other targets stay quiet.
VENV_HINT := harness is installed in $(VENV): run $(BIN)/harness, or 'source $(VENV)/bin/activate' to put harness on PATH
setup: $(BIN)/harness ## create .venv and install the harness with its test tools
	@$(if $(filter setup test,$(MAKECMDGOALS)),echo "$(VENV_HINT)",:)

test: setup ## run the test suite (the Docker tests run where an engine answers)
	$(BIN)/pytest -q

offline-images: ## build the busybox and python base images without a registry, from what this machine has
	bash scripts/offline-images.sh

##@ On the GB10

image: ## build the lab image (MILES_BASE=<Miles base for your GPU> MILES_COMMIT=<sha, empty keeps the base's>)
	docker build $(BUILD_ARGS) --tag $(LAB_IMAGE) .

data: setup ## download the model and the data set into data/ (or MILES_LAB_DATA=<dir>; needs internet)
	$(BIN)/pip install -q 'huggingface_hub>=0.23'
	$(BIN)/python -c 'import sys; from huggingface_hub import snapshot_download as get; \
		get(sys.argv[1], local_dir=sys.argv[2]); get(sys.argv[3], repo_type="dataset", local_dir=sys.argv[4])' \
		'$(MODEL_REPO)' '$(MILES_LAB_DATA)/models/$(notdir $(MODEL_REPO))' '$(DATASET_REPO)' '$(MILES_LAB_DATA)/$(notdir $(DATASET_REPO))'
	@test -f '$(MILES_LAB_DATA)/models/$(notdir $(MODEL_REPO))/config.json' && test -f '$(MILES_LAB_DATA)/$(notdir $(DATASET_REPO))/train.parquet' \
		|| { echo "make data: no config.json or train.parquet after the download, see above" >&2; exit 1; }
	@echo "data ready in $(MILES_LAB_DATA)/: mount it at /data"

run: setup ## run one experiment on the GPU: make run EXP=e2b-dapo-filter
	$(HARNESS) run $(EXP)

sweep: setup ## run an experiment over seeds: make sweep EXP=plain-48 SEEDS="1 2 3"
	$(HARNESS) sweep $(EXP) --seeds $(SEEDS)

status: setup ## every capture: state, steps, pauses, exit code
	$(HARNESS) status

smoke: setup image ## GPU smoke test: build the image, run 2 tiny steps, check they completed
	$(HARNESS) run smoke --force
	$(BIN)/python scripts/check-capture.py capture/gpu/smoke --state succeeded --complete-steps 2

##@ Results

summarize: setup ## captures -> capture/gpu/summary/miles-gb10-lab.json and its SVG figures
	$(HARNESS) summarize

report: summarize ## report.md (tables, verdicts, figures) beside the summary JSON
	$(HARNESS) report
