# The course in two commands:  `make lab` (learn)  and  `make test` (check everything).
# Everything runs inside ./.venv, created on first use; nothing is installed globally.

PYTHON      ?= python3
VENV        ?= .venv
BIN         := $(VENV)/bin
# Which torch to install before the course package. The package itself only asks for torch>=2.5
# (Colab and conda bring their own). The default is the CPU build this project is developed
# and tested with; a plain `torch` from PyPI is a multi-GB CUDA build on Linux. Override it:
#   make lab TORCH_SPEC=torch            # whatever pip picks (CUDA build on Linux)
#   make lab TORCH_SPEC=                 # keep the torch already in the venv, install nothing
#   make lab TORCH_PIP_ARGS="--index-url <PyTorch's CPU wheel index>"
TORCH_SPEC     ?= torch==2.13.0
TORCH_PIP_ARGS ?=
KERNEL_NAME ?= viewlab
LAB_PORT    ?= 8888
LAB_ARGS    ?=
PYTEST_ARGS ?=
NOTEBOOKS   := $(sort $(wildcard notebooks/*.ipynb))
# Same hash seed for every run, so set/dict ordering in outputs cannot drift.
export PYTHONHASHSEED := 0

# Jupyter refuses to start as root unless told; learners in containers and CI run as root.
ifeq ($(shell id -u),0)
ROOT_FLAG := --allow-root
endif

.PHONY: help lab test test-unit test-notebooks notebooks install clean book test-book test-colab stamp lint
help:
	@echo "make lab        - install the course into .venv and open JupyterLab on notebooks/"
	@echo "make test       - unit tests + strict nbval over every notebook"
	@echo "make notebooks  - re-execute every notebook in place (seeded), so stored outputs are fresh"
	@echo "make book       - build the Jupyter Book into book/_build/html (offline, warnings are errors)"
	@echo "make test-book  - build the book, then open every page in headless chromium and check it"
	@echo "make test-colab - the same notebooks and widget tests on Colab's own package versions (.venv-colab)"
	@echo "make stamp      - re-stamp the repository URL everywhere (REPO=https://github.com/OWNER/NAME to move it)"
	@echo "make lint       - ruff (lint + format check) over tools/, benchmarks/ and book/_ext"
	@echo "make clean      - remove .venv and build artefacts"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# One stamp per set of extras: re-run pip when pyproject.toml changes.
$(VENV)/.installed-course: pyproject.toml | $(BIN)/python
	$(if $(strip $(TORCH_SPEC)),$(BIN)/python -m pip install $(TORCH_PIP_ARGS) "$(TORCH_SPEC)")
	$(BIN)/python -m pip install -e ".[course]"
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed-course
	$(BIN)/python -m pip install -e ".[course,test]"
	touch $@

install: $(VENV)/.installed-course

lab: $(VENV)/.installed-course
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL_NAME) --display-name "Python (viewlab course)"
	$(BIN)/jupyter lab --notebook-dir=notebooks --port=$(LAB_PORT) $(ROOT_FLAG) $(LAB_ARGS)

test: lint test-unit test-notebooks

test-unit: $(VENV)/.installed-test
	$(BIN)/python -m pytest tests $(PYTEST_ARGS)

# Strict nbval: every stored output is compared (not --nbval-lax).
test-notebooks: $(VENV)/.installed-test
	$(BIN)/python -m pytest -p tests.notebooks.nbval_hooks --nbval --nbval-current-env --nbval-sanitize-with tests/notebooks/nbval_sanitize.cfg \
		-p no:cacheprovider $(NOTEBOOKS) $(PYTEST_ARGS)

notebooks: $(VENV)/.installed-test
	$(BIN)/python tools/execute_notebooks.py $(NOTEBOOKS)

# The repository URL lives in pyproject.toml ([project.urls] Repository). `make stamp REPO=https://github.com/OWNER/NAME`
# writes a new one there and into the book config, CITATION.cff, README badges and links, and every notebook's
# Colab badge and setup cell; plain `make stamp` re-stamps from the URL already there. Then: make notebooks.
REPO ?=
stamp: $(VENV)/.installed-test
	$(BIN)/python tools/stamp.py $(if $(strip $(REPO)),--repo "$(REPO)")

# Ruff (settings in pyproject.toml [tool.ruff]) over the helper programs, benchmarks and the book's extension.
# src/ and tests/ are not in the list yet. Fix what it reports with `ruff check --fix` / `ruff format`.
# ruff: lint and format check over the code; the notebooks' code cells are linted for real errors (pyflakes:
# undefined or unused names) but not reformatted, since their comments are aligned by hand for reading.
LINT_PATHS := src tests tools benchmarks book/_ext
lint: $(VENV)/.installed-test
	$(BIN)/python -m ruff check $(LINT_PATHS)
	$(BIN)/python -m ruff format --check $(LINT_PATHS)
	$(BIN)/python -m ruff check --select F,E9 $(NOTEBOOKS)

clean:
	rm -rf $(VENV) $(COLAB_VENV) book/_build book/api .pytest_cache .hypothesis src/*.egg-info

# The book: Jupyter Book 1.x (2.x downloads its theme at build time), source folder = repository root
# so book/_toc.yml points straight at notebooks/*.ipynb. Stored outputs only, offline, every warning is
# an error. A clean build each time: an incremental one would not repeat warnings of unchanged pages.
BOOK_HTML := book/_build/html
$(VENV)/.installed-book: pyproject.toml $(VENV)/.installed-test
	$(BIN)/python -m pip install -e ".[course,test,book]"
	touch $@

book: $(VENV)/.installed-book
	rm -rf book/_build book/api
	$(BIN)/jupyter-book build . --config book/_config.yml --toc book/_toc.yml --path-output book -W --keep-going

# Opens every page in Debian's chromium through Playwright (no browser download): install it with
# `apt-get install -y chromium`. Screenshots land in test-artifacts/.
test-book: book
	@command -v chromium >/dev/null || { echo "make test-book needs Debian's chromium: apt-get install -y chromium"; exit 1; }
	VIEWLAB_BOOK_HTML=$(BOOK_HTML) $(BIN)/python -m pytest tests/book/test_book.py tests/book/test_browser_book.py $(PYTEST_ARGS)

# Colab's package stack (tests/tooling/colab-pins.txt: IPython 7, ipykernel 6, ipywidgets 7, ...) in a second venv.
# Installed in three steps so the middle one can be checked: Colab's pins, then viewlab exactly as the
# Colab setup cell installs it (a change to any pinned package would force a runtime restart on Colab:
# tests/tooling/test_colab_stack.py compares the two freezes), then the test runner's extras.
COLAB_VENV ?= .venv-colab
COLAB_BIN  := $(COLAB_VENV)/bin
COLAB_OUT  := $(COLAB_VENV)/executed
$(COLAB_VENV)/.installed: tests/tooling/colab-pins.txt pyproject.toml
	rm -rf $(COLAB_VENV)
	$(PYTHON) -m venv $(COLAB_VENV)
	$(COLAB_BIN)/python -m pip install --quiet --upgrade pip
	$(COLAB_BIN)/python -m pip install $(TORCH_PIP_ARGS) $(if $(strip $(TORCH_SPEC)),"$(TORCH_SPEC)") -r tests/tooling/colab-pins.txt
	$(COLAB_BIN)/python -m pip freeze --exclude-editable > $(COLAB_VENV)/freeze-before.txt
	$(COLAB_BIN)/python -m pip install -e .
	$(COLAB_BIN)/python -m pip freeze --exclude-editable > $(COLAB_VENV)/freeze-after.txt
	$(COLAB_BIN)/python -m pip install "nbval==0.11.0" "pyyaml>=6"
	touch $@

# Widget, monitor, figure and IPython-extension tests; then every notebook executed with Colab's nbclient
# (copies, the committed notebooks stay as they are); then strict nbval of the committed notebooks.
COLAB_TESTS := tests/tooling/test_colab_stack.py tests/unit/test_monitor.py tests/unit/test_draw.py tests/unit/test_memory.py \
	tests/unit/test_cuda_windows.py tests/unit/test_versions.py tests/tooling/test_executor.py tests/unit/test_sentinels.py
test-colab: $(COLAB_VENV)/.installed
	VIEWLAB_COLAB_VENV=$(COLAB_VENV) PYDEVD_DISABLE_FILE_VALIDATION=1 $(COLAB_BIN)/python -m pytest $(COLAB_TESTS) -p no:cacheprovider $(PYTEST_ARGS)
	rm -rf $(COLAB_OUT)
	PYDEVD_DISABLE_FILE_VALIDATION=1 $(COLAB_BIN)/python tools/execute_notebooks.py --out-dir $(COLAB_OUT) $(NOTEBOOKS)
	PYDEVD_DISABLE_FILE_VALIDATION=1 $(COLAB_BIN)/python -m pytest -p tests.notebooks.nbval_hooks --nbval --nbval-current-env \
		--nbval-sanitize-with tests/notebooks/nbval_sanitize.cfg -p no:cacheprovider $(NOTEBOOKS) $(PYTEST_ARGS)
