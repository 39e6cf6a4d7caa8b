# Two commands do all setup on a fresh clone:  `make demo`  and  `make test`.
PY := .venv/bin/python
DATA_DIR ?= $(abspath ../shared/datasets)

.PHONY: setup demo test
setup:
	@bash scripts/setup.sh

demo: setup
	$(PY) -m soma_local.cli run --max-tokens 1024

test: setup
	SOMA_DATA_DIR=$(DATA_DIR) $(PY) -m pytest -q tests
