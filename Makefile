# Two commands do all the set-up: `make run` and `make test`.
# Each creates .venv when it is missing and installs the project with its test extras.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CONFIG ?= examples/config.yml

.PHONY: run test bench lint venv clean

$(BIN)/gensokyo-idmap: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

venv: $(BIN)/gensokyo-idmap

run: venv
	$(BIN)/gensokyo-idmap serve --config $(CONFIG)

test: venv
	$(BIN)/python -m pytest

bench: venv
	$(BIN)/python bench/identity.py
	$(BIN)/python bench/msgid.py
	$(BIN)/python bench/migrate.py
	$(BIN)/python bench/inbound.py
	$(BIN)/python bench/outbound.py
	$(BIN)/python bench/api.py

lint: venv
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	$(BIN)/ruff check gensokyo_idmap migrate --select E,F,W
	$(BIN)/mypy gensokyo_idmap

clean:
	rm -rf $(VENV) data .pytest_cache .hypothesis
