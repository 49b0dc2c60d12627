# userturn: two commands on a fresh machine, `make run` and `make test`.
# Each sets up what it needs (venv, llama-cpp-python build, model and data cache).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
UT     := $(PY) -m userturn
CHROMIUM ?= /usr/bin/chromium

.PHONY: setup setup-test run test test-all test-slow check bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

# Core + llama.cpp (builds from source once, ~5 min; pip caches the wheel).
$(VENV)/.stamp-run: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -e '.[llamacpp]'
	$(UT) data pull gsm8k
	$(UT) data pull smollm2-135m
	$(PY) -m userturn.judges.offline_embed
	touch $@

# Everything the tests exercise. CPU torch first: `torch==2.13.0` is a local file here,
# a plain `torch` would pull a multi-GB CUDA build.
$(VENV)/.stamp-test: $(VENV)/.stamp-run
	$(PIP) install torch==2.13.0
	$(PIP) install -e '.[llamacpp,report,hf,train,ray,annotate,ifeval,inspect,dev]'
	for d in ifeval ifbench healthbench mtbench sharegpt gsm-symbolic; do $(UT) data pull $$d || exit 1; done
	@test -x $(CHROMIUM) || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)
	touch $@

setup: $(VENV)/.stamp-run
setup-test: $(VENV)/.stamp-test

run: setup
	$(UT) run --config examples/quickstart.yaml

test: setup-test
	$(PY) -m pytest -m "not slow and not gpu" -q

test-all: setup-test
	$(PY) -m pytest -m "not gpu" -q

# What make test leaves out (tests marked slow); CI runs it after make test.
test-slow: setup-test
	$(PY) -m pytest -m "slow and not gpu" -q

check: setup-test
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

bench: setup-test
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
