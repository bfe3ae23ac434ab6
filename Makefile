# The course in two commands:  `make lab` (learn)  and  `make test` (check everything).
# Everything runs inside ./.venv, created on first use; nothing is installed globally.

PYTHON      ?= python3
VENV        ?= .venv
BIN         := $(VENV)/bin
# Torch, installed before the course package. Its version is written here once: the workflows and the
# README's table read it from this line (tests/tooling/test_workflows.py checks them). The package itself
# only asks for torch>=2.5 (Colab and conda bring their own). Which build:
#   with an NVIDIA GPU (nvidia-smi found)  the default build from PyPI (CUDA)
#   macOS                                  torch from PyPI (its macOS wheels are CPU builds already)
#   otherwise (Linux, Windows, no GPU)     the CPU build from PyTorch's CPU wheel index; a plain `torch`
#                                          from PyPI would be a multi-GB CUDA build on Linux
# Override: make lab TORCH_SPEC=torch (whatever pip picks), TORCH_SPEC= (keep the torch already in the venv),
# TORCH_PIP_ARGS="--index-url ..." (another index).
TORCH_VERSION   := 2.13.0
CPU_TORCH_INDEX := https://download.pytorch.org/whl/cpu
ifneq ($(shell command -v nvidia-smi 2>/dev/null),)
TORCH_BUILD     := default (nvidia-smi found)
TORCH_SPEC      ?= torch==$(TORCH_VERSION)
TORCH_PIP_ARGS  ?=
else ifeq ($(shell uname -s 2>/dev/null),Darwin)
TORCH_BUILD     := macOS (CPU)
TORCH_SPEC      ?= torch==$(TORCH_VERSION)
TORCH_PIP_ARGS  ?=
else
TORCH_BUILD     := CPU
TORCH_SPEC      ?= torch==$(TORCH_VERSION)+cpu
TORCH_PIP_ARGS  ?= --extra-index-url $(CPU_TORCH_INDEX)
endif
KERNEL_NAME ?= viewlab
LAB_PORT    ?= 8888
LAB_ARGS    ?=
PYTEST_ARGS ?=
NOTEBOOKS   := $(sort $(wildcard notebooks/*.ipynb))
# Same hash seed for every run, so set/dict ordering in outputs cannot drift.
export PYTHONHASHSEED := 0
# Hypothesis tries the same examples on every run (tests/conftest.py); only make test-random changes this.
export VIEWLAB_HYPOTHESIS_PROFILE := fixed

# Jupyter refuses to start as root unless told; learners in containers and CI run as root.
ifeq ($(shell id -u),0)
ROOT_FLAG := --allow-root
endif

.PHONY: help lab test test-unit test-random test-notebooks notebooks install clean book test-book test-colab stamp lint bench
help:
	@echo "make lab            - install the course into .venv and open JupyterLab on notebooks/"
	@echo "make test           - lint, unit tests and doctests, then strict nbval over every notebook (what CI runs)"
	@echo "make install        - only install the course into .venv (torch: $(TORCH_SPEC), $(TORCH_BUILD) build)"
	@echo "make test-unit      - unit tests and the doctests of src/viewlab (python -m pytest), slowest 15 listed"
	@echo "make test-random    - the unit tests with new hypothesis examples, more of them, seed printed (weekly in CI)"
	@echo "make test-notebooks - strict nbval over every notebook, under watch_broadcasts (python -m pytest notebooks)"
	@echo "make lint           - ruff (lint + format check) over src, tests, tools, benchmarks, book/_ext; pyflakes over the notebooks"
	@echo "make notebooks      - re-execute every notebook in place (seeded), so stored outputs are fresh"
	@echo "make book           - build the Jupyter Book into book/_build/html (offline, warnings are errors)"
	@echo "make test-book      - build the book, then open every page in headless chromium and check it"
	@echo "make test-colab     - the Colab-stack suite (-m colab) and every notebook on Colab's package versions (.venv-colab)"
	@echo "make bench          - what watching memory costs, as ratios (one interleaved run): benchmarks/results.md"
	@echo "make stamp          - re-stamp the repository URL everywhere (REPO=https://github.com/OWNER/NAME to move it)"
	@echo "make clean          - remove .venv, .venv-colab, the built book, test-artifacts/, gpu-check-out/ and caches"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Torch alone from its index (--no-deps: only torch is looked up there, so an index that answers slowly or
# not at all costs one wait, not one per package); its dependencies come from PyPI with the next install,
# which names $(TORCH_SPEC) again. $(1) is the venv's python.
define install_torch
$(if $(strip $(TORCH_SPEC)),$(1) -m pip install --no-deps $(TORCH_PIP_ARGS) "$(TORCH_SPEC)")
endef
TORCH_AGAIN = $(if $(strip $(TORCH_SPEC)),"$(TORCH_SPEC)")

# One stamp per set of extras: re-run pip when pyproject.toml changes.
$(VENV)/.installed-course: pyproject.toml | $(BIN)/python
	@echo "torch: $(if $(strip $(TORCH_SPEC)),$(TORCH_SPEC) ($(TORCH_BUILD) build),keep the installed one)"
	$(call install_torch,$(BIN)/python)
	$(BIN)/python -m pip install $(TORCH_AGAIN) -e ".[course,lab]"
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed-course
	$(BIN)/python -m pip install -e ".[course,lab,test]"
	touch $@

install: $(VENV)/.installed-course

lab: $(VENV)/.installed-course
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL_NAME) --display-name "Python (viewlab course)"
	$(BIN)/jupyter lab --notebook-dir=notebooks --port=$(LAB_PORT) $(ROOT_FLAG) $(LAB_ARGS)

test: lint test-unit test-notebooks

# The flags live in pyproject.toml ([tool.pytest.ini_options]: tests/ and src/viewlab's doctests).
# Both suites use every core (pytest-xdist): one test file (one notebook) per worker at a time, so what a
# file shares (a kernel, the claims table) is built once. PYTEST_JOBS= runs them in one process.
PYTEST_JOBS ?= -n auto --dist loadfile
test-unit: $(VENV)/.installed-test
	$(BIN)/python -m pytest --durations=15 $(PYTEST_JOBS) $(PYTEST_ARGS)

# Hypothesis runs derandomized everywhere else (tests/conftest.py: the "fixed" profile), so make test tries the
# same examples on every run. This target looks for new failures: the "random" profile (new examples, more of
# them), a seed picked here and printed before and after; HYPOTHESIS_SEED=N repeats a run exactly.
# .github/workflows/random.yml runs it weekly.
HYPOTHESIS_SEED ?=
test-random: $(VENV)/.installed-test
	@seed="$(HYPOTHESIS_SEED)"; [ -n "$$seed" ] || seed=$$(od -An -N4 -tu4 /dev/urandom | tr -d ' '); \
	echo "hypothesis seed $$seed (make test-random HYPOTHESIS_SEED=$$seed repeats this run)"; \
	VIEWLAB_HYPOTHESIS_PROFILE=random $(BIN)/python -m pytest --hypothesis-seed=$$seed $(PYTEST_JOBS) $(PYTEST_ARGS) \
	  || { echo "make test-random failed with hypothesis seed $$seed: make test-random HYPOTHESIS_SEED=$$seed"; exit 1; }

# Strict nbval, configured once in notebooks/pytest.ini (and notebooks/conftest.py).
test-notebooks: $(VENV)/.installed-test
	$(BIN)/python -m pytest notebooks $(PYTEST_JOBS) $(PYTEST_ARGS)

notebooks: $(VENV)/.installed-test
	$(BIN)/python tools/execute_notebooks.py $(NOTEBOOKS)

# The repository URL lives in pyproject.toml ([project.urls] Repository). `make stamp REPO=https://github.com/OWNER/NAME`
# writes a new one there and into the book config, CITATION.cff, README badges and links, and every notebook's
# Colab badge and setup cell; plain `make stamp` re-stamps from the URL already there. Then: make notebooks.
REPO ?=
stamp: $(VENV)/.installed-test
	$(BIN)/python tools/stamp.py $(if $(strip $(REPO)),--repo "$(REPO)")

# Ruff (settings in pyproject.toml [tool.ruff]): lint and format check over the package, the tests, the helper
# programs, benchmarks and the book's extension. Fix what it reports with `ruff check --fix` / `ruff format`.
# The notebooks' code cells are linted for real errors (pyflakes: undefined or unused names) but not
# reformatted, since their comments are aligned by hand for reading.
LINT_PATHS := src tests tools benchmarks book/_ext notebooks/conftest.py
lint: $(VENV)/.installed-test
	$(BIN)/python -m ruff check $(LINT_PATHS)
	$(BIN)/python -m ruff format --check $(LINT_PATHS)
	$(BIN)/python -m ruff check --select F,E9 $(NOTEBOOKS)

# What watching memory costs: the tracker, the monitor's frame paths and peers against an empty dispatch mode and
# no tracking, on small and on 1 MiB operators, in one interleaved run (benchmarks/overhead.py). Writes the table to
# benchmarks/results.md and the numbers to benchmarks/results/overhead.json; BENCH_ARGS="--rounds 9" to change it.
BENCH_ARGS ?=
bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/overhead.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(COLAB_VENV) book/_build book/api test-artifacts gpu-check-out .pytest_cache .hypothesis notebooks/.hypothesis src/*.egg-info

# The book: Jupyter Book 1.x (2.x downloads its theme at build time), source folder = repository root
# so book/_toc.yml points straight at notebooks/*.ipynb. Stored outputs only, offline, every warning is
# an error. A clean build each time: an incremental one would not repeat warnings of unchanged pages.
BOOK_HTML := book/_build/html
$(VENV)/.installed-book: pyproject.toml $(VENV)/.installed-test
	$(BIN)/python -m pip install -e ".[course,lab,test,book]"
	touch $@

book: $(VENV)/.installed-book
	rm -rf book/_build book/api
	$(BIN)/jupyter-book build . --config book/_config.yml --toc book/_toc.yml --path-output book -W --keep-going

# Opens every page in Debian's chromium through Playwright (no browser download): install it with
# `apt-get install -y chromium`. Screenshots land in test-artifacts/.
test-book: book
	@command -v chromium >/dev/null || { echo "make test-book needs Debian's chromium: apt-get install -y chromium"; exit 1; }
	VIEWLAB_BOOK_HTML=$(BOOK_HTML) $(BIN)/python -m pytest tests/book \
	  tests/unit/test_browser_monitor.py::test_the_monitor_plot_in_the_book_is_readable_at_100_percent $(PYTEST_ARGS)

# Colab's package stack (tests/tooling/colab-pins.txt: IPython 7, ipykernel 6, ipywidgets 7, ...) in a second venv.
# Installed in three steps so the middle one can be checked: Colab's pins, then viewlab exactly as the
# Colab setup cell installs it (with the course extra; a change to any pinned package would force a runtime
# restart on Colab: tests/tooling/test_colab_stack.py compares the two freezes), then the test runner's extras.
COLAB_VENV ?= .venv-colab
COLAB_BIN  := $(COLAB_VENV)/bin
COLAB_OUT  := $(COLAB_VENV)/executed
$(COLAB_VENV)/.installed: tests/tooling/colab-pins.txt pyproject.toml
	rm -rf $(COLAB_VENV)
	$(PYTHON) -m venv $(COLAB_VENV)
	$(COLAB_BIN)/python -m pip install --quiet --upgrade pip
	$(call install_torch,$(COLAB_BIN)/python)
	$(COLAB_BIN)/python -m pip install $(TORCH_AGAIN) -r tests/tooling/colab-pins.txt
	$(COLAB_BIN)/python -m pip freeze --exclude-editable > $(COLAB_VENV)/freeze-before.txt
	$(COLAB_BIN)/python -m pip install -e ".[course]"
	$(COLAB_BIN)/python -m pip freeze --exclude-editable > $(COLAB_VENV)/freeze-after.txt
	$(COLAB_BIN)/python -m pip install "nbval==0.11.0" "pyyaml>=6"
	touch $@

# The tests marked colab (widgets, monitor, figures, memory, versions, sentinels, the stack itself); then every
# notebook executed with Colab's nbclient (copies: the committed notebooks stay as they are); then strict
# nbval of the committed notebooks.
COLAB_ENV := VIEWLAB_COLAB_VENV=$(COLAB_VENV) PYDEVD_DISABLE_FILE_VALIDATION=1
test-colab: $(COLAB_VENV)/.installed
	$(COLAB_ENV) $(COLAB_BIN)/python -m pytest tests -m colab -p no:cacheprovider $(PYTEST_ARGS)
	rm -rf $(COLAB_OUT)
	$(COLAB_ENV) $(COLAB_BIN)/python tools/execute_notebooks.py --out-dir $(COLAB_OUT) $(NOTEBOOKS)
	$(COLAB_ENV) $(COLAB_BIN)/python -m pytest notebooks $(PYTEST_ARGS)
