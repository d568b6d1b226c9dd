# Two commands do all the set-up: `make run` and `make test` (`make demo`: try it without
# QQ credentials, docs/demo.md).
# Each creates .venv when it is missing and installs the project with its test extras.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CONFIG ?= examples/config.yml

.PHONY: run demo test bench soak lint venv clean

$(BIN)/gensokyo-idmap: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

venv: $(BIN)/gensokyo-idmap

run: venv
	$(BIN)/gensokyo-idmap serve --config $(CONFIG)

# the daemon with $(CONFIG)'s listeners, fed by an emulated QQ platform; data in ./data-demo
demo: venv
	$(BIN)/gensokyo-idmap demo --config $(CONFIG)

test: venv
	$(BIN)/python -m pytest

bench: venv
	$(BIN)/python bench/identity.py
	$(BIN)/python bench/msgid.py
	$(BIN)/python bench/migration.py
	$(BIN)/python bench/inbound.py
	$(BIN)/python bench/stalled_client.py
	$(BIN)/python bench/outbound.py
	$(BIN)/python bench/api.py
	$(BIN)/python bench/logline.py
	$(BIN)/python bench/cluster.py   # needs PostgreSQL at 127.0.0.1:5432 (--dsn) and Redis at 127.0.0.1:6379 (--redis-url)
	$(BIN)/python bench/store_copy.py   # needs PostgreSQL at 127.0.0.1:5432 (--dsn)

# Not part of bench: a steady load on a real daemon for 15 minutes (MINUTES=… to change).
MINUTES ?= 15
soak: venv
	$(BIN)/python bench/soak.py --minutes $(MINUTES)

# The lint tools join the venv once (and again when pyproject.toml changes).
$(VENV)/.lint-installed: $(BIN)/gensokyo-idmap
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	touch $@

# ruff's rules and import-linter's layer contracts live in pyproject.toml
lint: $(VENV)/.lint-installed
	$(BIN)/ruff check gensokyo_idmap migrate tests
	$(BIN)/lint-imports
	$(BIN)/mypy gensokyo_idmap migrate

clean:
	rm -rf $(VENV) data data-demo .pytest_cache .hypothesis
