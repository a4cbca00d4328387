# Every target creates what it needs (virtual environment, local binaries) when it is missing.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# The Airflow stand-in image installs with the same uv (its ARG AIRFLOW_UV_VERSION; test_pins.py).
UV_VERSION := 0.13.9
# Where local-up writes its state (kubeconfig, logs, pids); outside the repo, one per user.
export KAI_LOCALENV_HOME ?= $(HOME)/.local/state/kai-scale-pipeline

NODE_COUNT ?= 500
# make demo: what this 2-core machine runs and passes (docs/scenarios.md, "The local scenario set");
# SCENARIOS= (empty) runs every enabled scenario, as a night does.
DEMO_NODE_COUNT ?= 100
# A NODE_COUNT given on the command line or in the environment wins over the demo's default.
DEMO_NODES := $(if $(filter environment command%,$(origin NODE_COUNT)),$(NODE_COUNT),$(DEMO_NODE_COUNT))
SCENARIOS ?= sanity-fill-cluster whole-gpu-pending-background reclaim-full-node
# make calibrate: how many of the newest comparable runs, and the margin in the bad direction.
LAST ?= 5
MARGIN ?= 0.2
# Where `make demo` and `make view` serve the deployed Airflow's UI on loopback (Airflow's own port).
VIEW_PORT ?= 8080

.PHONY: help venv test check lint typecheck local-deps local-images images-without-local-binaries view-assets browser local-up local-down local-env local-status demo view bench calibrate lock clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -ts $$'\t'

# The three distributions of packages/ and the root's localenv, editable, over the locked dependencies.
DISTRIBUTIONS := packages/model packages/runner packages/provider .

# Quiet, its one line on stderr: `make calibrate > proposal.yaml` may have to make the venv first.
$(BIN)/.installed: requirements-dev.txt requirements.txt $(addsuffix /pyproject.toml,$(DISTRIBUTIONS))
	@echo "installing the virtual environment $(VENV) from the lock files" >&2
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	@$(BIN)/uv pip sync --quiet --python $(BIN)/python requirements-dev.txt
	@$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps $(addprefix -e ,$(DISTRIBUTIONS))
	@touch $@

venv: $(BIN)/.installed ## create the virtual environment from the lock files

lint: venv ## ruff (lint + format check), hadolint on the Dockerfiles (the compose file: tests/unit/deploy)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/hadolint docker/*/Dockerfile localenv/images/*/Dockerfile

typecheck: venv ## mypy strict on the packages, the plugin, the local environment, tests and benchmarks
	$(BIN)/mypy

test: lint typecheck local-images view-assets browser ## the whole suite: lint, types, unit, DAG and integration tests
	$(BIN)/pytest

check: lint typecheck ## the fast loop: lint, types, unit, DAG and packaging tests (no local environment)
	localenv/build.sh helm
	$(BIN)/pytest tests/unit tests/dags tests/packaging

local-deps: venv ## build (once, cached) the control plane, Prometheus and helm from Go modules
	localenv/build.sh >/dev/null

# Two jobs, unless make was given its own -j (a sub-make that forces one leaves the jobserver).
SIDE_BY_SIDE = $(if $(filter -j%,$(MAKEFLAGS)),,-j2)

# Before the tests: on a fresh machine these builds outlast a test's 600 s time limit. The images that
# need none of build.sh's binaries are built beside them: one after another they leave a core idle at
# times (cold: 38 min 51 s, side by side 33 min 10 s, docs/benchmarks.md); build.sh installs the Debian
# packages (buildah) both need first.
local-images: venv ## build (once, cached) the images the local environment runs: KAI, the runner, Airflow, ...
	localenv/build.sh debian-packages
	$(MAKE) --no-print-directory $(SIDE_BY_SIDE) local-deps images-without-local-binaries
	localenv/images.sh --build-only

images-without-local-binaries: venv
	localenv/images.sh --build-only --without-local-binaries

# The trend view's browser libraries (Apache ECharts; D3 and d3-flame-graph), installed from the npm
# lock and copied, with their licences, into the provider's static files by the package's build script
# (the Airflow image runs the same); git-ignored, so every checkout builds its own.
VIEW_UI := packages/provider/ui
VIEW_VENDOR := packages/provider/src/kai_scale/views/static/vendor

$(VIEW_VENDOR)/.built: $(addprefix $(VIEW_UI)/,package.json package-lock.json build.mjs)
	tools/require_debian_packages.sh npm=npm
	cd $(VIEW_UI) && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build
	touch $@

view-assets: $(VIEW_VENDOR)/.built ## the trend view's browser libraries, from packages/provider/ui's npm lock

browser: ## headless Chromium and its driver for the browser test (Debian's, installed when missing)
	tools/require_debian_packages.sh chromium=chromium chromedriver=chromium-driver

local-up: local-images ## start the local cluster (control plane, the real node, registry) and S3 endpoint
	$(BIN)/python -m localenv up

demo: local-up ## deploy Airflow (official chart, Postgres, KubernetesExecutor), run the nightly DAG once through its REST API (NODE_COUNT=100, SCENARIOS: the local set), print the results; its UI stays up
	$(BIN)/python -m localenv.demo --node-count $(DEMO_NODES) --scenarios "$(SCENARIOS)" --view-port $(VIEW_PORT)

view: local-up ## the deployed Airflow's UI with the trend view ("Scale tests") on localhost:8080 (VIEW_PORT), up until local-down
	$(BIN)/python -m localenv.demo --serve-view --view-port $(VIEW_PORT)

local-down: venv ## stop everything local-up started
	$(BIN)/python -m localenv down

local-env: venv ## print export lines for the running local environment
	@$(BIN)/python -m localenv env

local-status: venv ## show what is running
	$(BIN)/python -m localenv status

bench: local-deps ## benchmarks (results go to docs/benchmarks.md by hand)
	$(BIN)/python benchmarks/local_env.py

# Quiet (@): no command line echoed among the proposal on stdout (`make calibrate > proposal.yaml`).
calibrate: venv ## propose thresholds YAML from the published history (NODE_COUNT, LAST=5, MARGIN=0.2; the DAG's KAI_SCALE_AWS_CONN_ID, KAI_SCALE_RESULTS_BUCKET, KAI_SCALE_RESULTS_PREFIX)
	@$(BIN)/python -m kai_scale.publishing.calibrate --node-count $(NODE_COUNT) --last $(LAST) --margin $(MARGIN)

lock: ## re-resolve the locks: requirements*.txt (pipeline, dev), the runner's and the local stand-in Airflow image's
	test -x $(BIN)/uv || { $(PYTHON) -m venv $(VENV) && $(BIN)/pip install --quiet uv==$(UV_VERSION); }
	$(BIN)/uv pip compile --quiet --python-version 3.11 requirements.in -o requirements.txt
	$(BIN)/uv pip compile --quiet --python-version 3.11 requirements-dev.in -o requirements-dev.txt
	cd packages/runner && ../../$(BIN)/uv pip compile --quiet --python-version 3.11 requirements.in -o requirements.txt
	cd localenv/images/airflow && ../../../$(BIN)/uv pip compile --quiet --python-version 3.11 requirements.in -o requirements.txt

clean: local-down ## stop the local environment and remove the virtual environment
	rm -rf $(VENV)
