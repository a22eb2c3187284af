# trainops.multinode: the two set-up commands of the README are `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
PYTEST ?= $(BIN)/python -m pytest
# -q for a target run alone; make test runs its suites side by side with one line per test (-v)
PYTEST_REPORT ?= -q

.PHONY: help deps dev-deps demo test checks static unit functional workload e2e lab-test lint sanity syntax clean lab lab-down lab-status engine container-image \
        dist ee changelog

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.deps: requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev-deps: requirements-dev.txt $(VENV)/.deps
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

deps: $(VENV)/.deps ## Install the runtime requirements into .venv

dev-deps: $(VENV)/.dev-deps ## Install the runtime and development requirements into .venv

demo: deps ## Train 2 nodes x 2 CPU ranks on the local default (launch.yml -e channels=42)
	$(BIN)/ansible-playbook playbooks/launch.yml -e channels=42

# the lab's tests are the critical path: e2e and the static checks run at a lower priority and take the CPU
# the lab leaves (checks, whose tests time process starts and stops, and the image build the lab waits for, at the
# normal one)
test: dev-deps engine ## The whole test suite, side by side: lab (first in line for the CPU), unit/workload/functional, static checks, end-to-end, the container image
	PYTEST_REPORT=-v MAKE="$(MAKE)" bash hack/parallel.sh lab-test checks container-image --nice 10 static e2e

checks: dev-deps ## The tests that need no lab: unit, workload, functional
	$(MAKE) --no-print-directory unit workload functional

static: dev-deps ## The checks that run no job: syntax, lint, sanity (make test runs them next to e2e and lab-test)
	$(MAKE) --no-print-directory syntax lint sanity

unit: dev-deps ## Unit tests of modules, plugins and module_utils (mocked)
	$(PYTEST) -q --durations=5 tests/unit

workload: dev-deps ## The training workload under real torchrun
	$(PYTEST) -q --durations=5 tests/workspace

functional: dev-deps ## The torchrun module against real processes
	$(PYTEST) -q --durations=5 tests/functional

e2e: dev-deps ## Playbooks end to end through the ansible-runner entry
	$(PYTEST) $(PYTEST_REPORT) --durations=10 tests/e2e

N ?= 4
SHAPE ?=
lab: dev-deps ## Bring up an N-node lab (root): make lab N=4 [SHAPE="--shared-home --user trainer --mgmt-net --slurm"]
	$(BIN)/python hack/lab.py up --nodes $(N) $(SHAPE)

lab-down: ## Remove the lab: daemons, namespaces, links, mounts, files (root)
	$(BIN)/python hack/lab.py down

lab-status: ## Show the lab's nodes
	$(BIN)/python hack/lab.py status

engine: ## Container engine (docker.io installed, dockerd started) for the lab's container tests and the test image (root)
	@if [ "$$(id -u)" = 0 ]; then bash hack/engine.sh; else echo "engine: not root, skipped"; fi

container-image: dev-deps engine ## The registry-free test image archive, once (root); the lab's container tests wait for a build under way
	@if [ "$$(id -u)" = 0 ]; then PYTHON=$(BIN)/python bash hack/container_image.sh; else echo "container-image: not root, skipped"; fi

# the lab's container tests build the image themselves (hack/container_image.sh, one build at a time) when
# make test's container-image has not finished it yet: the lab tests start at once
lab-test: dev-deps engine ## Multi-host tests on the lab (root): launch across nodes, fault injection, containers, Molecule, Slurm
	$(PYTEST) $(PYTEST_REPORT) --durations=15 tests/lab

syntax: dev-deps ## ansible-playbook --syntax-check of every playbook
	@for p in playbooks/*.yml; do echo "syntax-check $$p"; $(BIN)/ansible-playbook --syntax-check "$$p" >/dev/null; done

lint: dev-deps ## ansible-lint (production profile), antsibull-changelog lint, a fragment for plugins/ or roles/ changes
	bash hack/lint.sh
	$(BIN)/antsibull-changelog lint
	$(BIN)/python hack/check_fragments.py

sanity: dev-deps ## ansible-test sanity on a copy under ansible_collections/trainops/multinode
	bash hack/sanity.sh

dist: dev-deps ## The collection tarball in build/dist (ansible-galaxy collection build; see docs/installing.md)
	$(BIN)/ansible-galaxy collection build --force --output-path build/dist .

ee: dev-deps ## The execution environment's build context in build/ee/context (ansible-builder create, no registry)
	PYTHON=$(BIN)/python bash hack/ee.sh

changelog: dev-deps ## Regenerate CHANGELOG.md from changelogs/changelog.yaml (antsibull-changelog generate)
	$(BIN)/antsibull-changelog generate

clean: ## Remove the virtual environment and test output (experiments are kept)
	rm -rf $(VENV) tests/output .pytest_cache build
