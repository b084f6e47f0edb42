# ICLR 2025 in Code: the two commands are `make book` and `make test` (see README.md).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
SCALE  ?= full
# The environment that makes runs reproducible (hash seed, threads, offline hubs) is set by the
# runner itself (iclr25.book.environment), so `python -m iclr25 ...` behaves the same without make.

.PHONY: venv book test golden readme notebooks clean

venv: $(VENV)/.installed

# torch first, alone: `pip install torch==2.13.0` takes the local CPU wheel; then the rest, pinned.
$(VENV)/.installed: pkg/pyproject.toml pkg/constraints.txt pkg/requirements-nodeps.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c pkg/constraints.txt torch==2.13.0
	$(PY) -m pip install -q -c pkg/constraints.txt -e "pkg[book,test]"
	$(PY) -m pip install -q --no-deps -r pkg/requirements-nodeps.txt
	touch $@

book: venv
	$(PY) -m iclr25 book --scale $(SCALE)

test: venv
	$(PY) -m iclr25 test

golden: venv
	$(PY) -m iclr25 golden

readme: venv
	$(PY) -m iclr25 readme

notebooks: venv
	$(PY) -m iclr25 notebooks

clean:
	rm -rf _build
