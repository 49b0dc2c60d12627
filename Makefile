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

# llama.cpp builds from source once (~5 min) into a wheel kept in $(WHEELS), for a
# portable x86-64 baseline (AVX2, FMA, F16C) rather than this CPU: a native build turns on
# AMX and AVX-512 kernels, and a VM that advertises AMX without granting it kills every
# generation with a general-protection fault in ldtilecfg (seen 2026-12-02).
LLAMA_VERSION := 0.3.36
LLAMA_CPP := llama-cpp-python==$(LLAMA_VERSION)
WHEELS    ?= $(HOME)/.cache/userturn/wheels/llama-portable

# Core + llama.cpp.
$(VENV)/.stamp-run: pyproject.toml | $(VENV)/bin/python
	@ls $(WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || \
	  CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PIP) wheel --no-cache-dir --no-deps -w $(WHEELS) '$(LLAMA_CPP)'
	$(PIP) install --find-links $(WHEELS) '$(LLAMA_CPP)'
	$(PIP) install --find-links $(WHEELS) -e '.[llamacpp]'
	$(UT) data pull gsm8k
	$(UT) data pull smollm2-135m
	$(PY) -m userturn.judges.offline_embed
	touch $@

# Everything the tests exercise. CPU torch first: `torch==2.13.0` is a local file here,
# a plain `torch` would pull a multi-GB CUDA build.
$(VENV)/.stamp-test: $(VENV)/.stamp-run
	$(PIP) install torch==2.13.0
	$(PIP) install --find-links $(WHEELS) -e '.[llamacpp,report,hf,train,ray,annotate,ifeval,inspect,dev]'
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
