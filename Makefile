# Set-up and the two jobs the README names. `make demo` and `make test` both build .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup demo test clean

setup: $(VENV)/.installed

# torch is pinned to the local CPU build (any other spec downloads GBs of CUDA packages), and
# torchvision 0.28.0 (its match) goes in with --no-deps; perfmodel/_torchvision.py explains why.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q --no-deps torchvision==0.28.0
	$(BIN)/pip install -q -e '.[profile,triton,report,run,test]'
	touch $@

demo: setup
	$(BIN)/perfmodel plan --images 100000 --deadline 60s

test: setup
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
