# Set-up and the two jobs the README names. `make demo` and `make test` both build .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The second test environment: numpy 2 and pandas 3 (as on the GPU machines), without Triton.
VENV2  := .venv-numpy2
BIN2   := $(VENV2)/bin
# pip prints what it collects and installs (no -q): the set-up takes minutes and should show it is alive.
# constraints.txt holds the exact versions of these environments; pyproject.toml asks for ranges.
PIP    := pip install -c constraints.txt
STEP   = @echo "==> [$(1)] $(2)"

.PHONY: setup demo test test-main test-numpy2 test-fast lint docs clean

setup: $(VENV)/.installed

# torch first, on its own: constraints.txt pins the local CPU build (any other spec downloads GBs of
# CUDA packages); torchvision (its match) goes in with --no-deps; perfmodel/_torchvision.py explains why.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(call STEP,1/4,$(VENV): a virtual environment for $(shell $(PYTHON) --version))
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(call STEP,2/4,torch (CPU build))
	$(BIN)/$(PIP) torch
	$(call STEP,3/4,torchvision (architectures only))
	$(BIN)/$(PIP) --no-deps torchvision
	$(call STEP,4/4,perfmodel and its extras: all test docs)
	$(BIN)/$(PIP) -e '.[all,test,docs]' 'pandas<3'
	@touch $@
	@echo "==> $(VENV) is ready: $(BIN)/perfmodel --help"

demo: setup
	$(BIN)/perfmodel plan --images 100000 --deadline 60s

# The linter and the formatter's check, both environments' suites (numpy 1 / pandas 2 with the Triton
# server, then numpy 2 / pandas 3 without it), then the documentation built strictly (a broken link fails).
test: lint test-main test-numpy2 docs

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test-main: setup
	$(BIN)/python -m pytest -q

# The inner loop: the suite without the slow and integration tests (subprocesses, Ray, Triton).
test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow and not integration"

$(VENV2)/.installed: pyproject.toml constraints.txt
	$(call STEP,1/3,$(VENV2): numpy 2 and pandas 3 without Triton (the GPU machines' versions))
	$(PYTHON) -m venv $(VENV2)
	$(BIN2)/pip install -q --upgrade pip
	$(call STEP,2/3,torch and torchvision)
	$(BIN2)/$(PIP) torch
	$(BIN2)/$(PIP) --no-deps torchvision
	$(call STEP,3/3,perfmodel with numpy>=2 and pandas>=3)
	$(BIN2)/$(PIP) -e '.[profile,run,report,test]' 'numpy>=2' 'pandas>=3'
	@touch $@

test-numpy2: $(VENV2)/.installed
	$(BIN2)/python -c 'import numpy, pandas; print(f"==> tests on numpy {numpy.__version__}, pandas {pandas.__version__}")'
	$(BIN2)/python -m pytest -q

# The user documentation (docs/, mkdocs.yml) as a site in site/.
docs: setup
	$(BIN)/mkdocs build --strict --quiet

clean:
	rm -rf $(VENV) $(VENV2) .pytest_cache .hypothesis site
