# Set-up and the two jobs the README names. `make demo` and `make test` both build .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The second test environment: numpy 2 and pandas 3 (as on the GPU machines), without Triton.
VENV2  := .venv-numpy2
BIN2   := $(VENV2)/bin
# pip prints what it collects and installs (no -q): the set-up takes minutes and should show it is alive.
PIP    := pip install
STEP   = @echo "==> [$(1)] $(2)"

.PHONY: setup demo test test-main test-numpy2 docs clean

setup: $(VENV)/.installed

# torch is pinned to the local CPU build (any other spec downloads GBs of CUDA packages), and
# torchvision 0.28.0 (its match) goes in with --no-deps; perfmodel/_torchvision.py explains why.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(call STEP,1/4,$(VENV): a virtual environment for $(shell $(PYTHON) --version))
	$(PYTHON) -m venv $(VENV)
	$(BIN)/$(PIP) -q --upgrade pip
	$(call STEP,2/4,torch 2.13.0 (CPU build))
	$(BIN)/$(PIP) torch==2.13.0
	$(call STEP,3/4,torchvision 0.28.0 (architectures only))
	$(BIN)/$(PIP) --no-deps torchvision==0.28.0
	$(call STEP,4/4,perfmodel and its extras: profile triton run report test)
	$(BIN)/$(PIP) -c constraints.txt -e '.[profile,triton,run,report,test,docs]' 'pandas<3'
	@touch $@
	@echo "==> $(VENV) is ready: $(BIN)/perfmodel --help"

demo: setup
	$(BIN)/perfmodel plan --images 100000 --deadline 60s

# Both environments: numpy 1 / pandas 2 with the Triton server (pandas<3 above keeps pandas 2 tested),
# then numpy 2 / pandas 3 without it; then the documentation, built strictly (a broken link fails).
test: test-main test-numpy2 docs

test-main: setup
	$(BIN)/python -m pytest -q

$(VENV2)/.installed: pyproject.toml
	$(call STEP,1/3,$(VENV2): numpy 2 and pandas 3 without Triton (the GPU machines' versions))
	$(PYTHON) -m venv $(VENV2)
	$(BIN2)/$(PIP) -q --upgrade pip
	$(call STEP,2/3,torch 2.13.0 and torchvision 0.28.0)
	$(BIN2)/$(PIP) torch==2.13.0
	$(BIN2)/$(PIP) --no-deps torchvision==0.28.0
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
