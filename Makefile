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
# the tests of e2e and lab-test that cost the most CPU time, listed at their end (tests/cpu_report.py)
CPU_REPORT ?= 15

.PHONY: help deps dev-deps demo test checks static unit functional workload e2e lab-test lab-test-1 lab-test-2 lint sanity syntax clean lab lab-down lab-status engine container-image \
        dist ee changelog

help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

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
# one lab shard under 4 cores, two from 4 on (lab-test, below); set before `test`, whose recipe depends on it
LAB_SHARDS ?= $(if $(filter 1 2 3,$(shell nproc)),1,2)

# With one lab shard (under 4 cores) the lab ran its last quarter of an hour alone once e2e had ended, on one core of
# two: its tests in LAB_LATE then run on a second lab (TRAINOPS_LAB=2) after e2e, beside the rest of the first.
test: dev-deps engine ## The whole test suite, side by side: lab (first in line for the CPU), unit/workload/functional, static checks, end-to-end, the container image
ifeq ($(LAB_SHARDS),1)
	PYTEST_REPORT=-v MAKE="$(MAKE)" bash hack/parallel.sh lab-test-early checks container-image --nice 10 static e2e-then-lab-late
else
	PYTEST_REPORT=-v MAKE="$(MAKE)" bash hack/parallel.sh lab-test checks container-image --nice 10 static e2e
endif

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
	$(PYTEST) $(PYTEST_REPORT) --durations=10 --cpu-report=$(CPU_REPORT) tests/e2e

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

# The lab's tests can run in two shards at once, each on a lab of its own (hack/lab.py's TRAINOPS_LAB: the
# second lab has its own namespaces, addresses, state directory, inventory and session lock). That pays where
# CPU is left over: on the 2-core machine make test keeps both cores busy from start to end with one lab, and
# two labs beside e2e ran slower (docs/contributing/development.md), so `lab-test` shards from 4 cores on (LAB_SHARDS=1|2 to
# choose). The second shard takes the tests of jobs on a plain or container lab; the first keeps everything else
# (the lab's own up/down tests, its shapes, the shapes with a training user, Slurm, Molecule, any new module).
# The lab's container tests build the image themselves (hack/container_image.sh, one build at a time) when
# make test's container-image has not finished it yet: the lab tests start at once.
LAB_SHARD_2 := $(addprefix tests/lab/,test_launch_lab.py test_failure_judgment.py test_code_sync.py test_sweep_lab.py \
               test_setup_lab.py test_container.py)

lab-test: dev-deps engine ## Multi-host tests on the lab (root): launch across nodes, fault injection, containers, Molecule, Slurm
ifeq ($(LAB_SHARDS),1)
	$(PYTEST) $(PYTEST_REPORT) --durations=15 --cpu-report=$(CPU_REPORT) tests/lab
else
	PYTEST_REPORT="$(PYTEST_REPORT)" MAKE="$(MAKE)" bash hack/parallel.sh lab-test-1 lab-test-2
endif

lab-test-1: dev-deps engine ## The first shard of lab-test, on the lab
	$(PYTEST) $(PYTEST_REPORT) --durations=15 --cpu-report=$(CPU_REPORT) $(addprefix --ignore=,$(LAB_SHARD_2)) tests/lab

lab-test-2: dev-deps engine ## The second shard of lab-test, on a second lab beside the first (TRAINOPS_LAB=2)
	TRAINOPS_LAB=2 $(PYTEST) $(PYTEST_REPORT) --durations=15 --cpu-report=$(CPU_REPORT) $(LAB_SHARD_2)

# make test under 4 cores: the lab's tests but LAB_LATE from the start; then, once e2e has ended, LAB_LATE on a
# second lab (its jobs need no Slurm and no container engine, and take about 6 of the lab's 42 minutes)
LAB_LATE := $(addprefix tests/lab/,test_spares_lab.py test_ssh_mesh.py test_sweep_lab.py test_setup_lab.py)

lab-test-early: dev-deps engine ## lab-test without LAB_LATE (make test under 4 cores)
	$(PYTEST) $(PYTEST_REPORT) --durations=15 --cpu-report=$(CPU_REPORT) $(addprefix --ignore=,$(LAB_LATE)) tests/lab

e2e-then-lab-late: dev-deps engine ## e2e, then LAB_LATE on a second lab (TRAINOPS_LAB=2): both run, either failing fails
	@e2e=0; $(MAKE) --no-print-directory e2e || e2e=$$?; \
	late=0; TRAINOPS_LAB=2 $(PYTEST) $(PYTEST_REPORT) --durations=15 --cpu-report=$(CPU_REPORT) $(LAB_LATE) || late=$$?; \
	echo "e2e-then-lab-late: e2e exited $$e2e, the late lab tests $$late"; [ $$e2e -eq 0 ] && [ $$late -eq 0 ]

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
