# Two commands do all the set-up: `make run` and `make test` (`make demo`: try it without
# QQ credentials, docs/demo.md).
# Each creates .venv when it is missing and installs into it, every package pinned and
# checked against its hash, what a lock file holds: requirements/run.txt (the daemon's
# dependencies: `make run`, `make demo`) or requirements/dev.txt (those and every test,
# lint and build tool: `make test`, `make lint`, `make dist`, CI); then the checkout itself,
# editable, built by the locked setuptools. `make lock` refreshes both lock files.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CONFIG ?= examples/config.yml

.PHONY: run demo test bench soak lint venv dist lock catalogs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# $(call install,LOCK): the lock's packages by hash, then the checkout and nothing more
define install
	$(BIN)/python -m pip install --quiet --require-hashes -r $(1)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
endef

$(VENV)/.run-installed: requirements/run.txt pyproject.toml | $(BIN)/python
	$(call install,requirements/run.txt)
	touch $@

$(VENV)/.dev-installed: requirements/dev.txt pyproject.toml | $(BIN)/python
	$(call install,requirements/dev.txt)
	touch $@

venv: $(VENV)/.dev-installed

run: $(VENV)/.run-installed
	$(BIN)/gensokyo-idmap serve --config $(CONFIG)

# the daemon with $(CONFIG)'s listeners, fed by an emulated QQ platform; data in ./data-demo
demo: $(VENV)/.run-installed
	$(BIN)/gensokyo-idmap demo --config $(CONFIG)

test: venv
	$(BIN)/python -m pytest

bench: venv
	$(BIN)/python bench/identity.py
	$(BIN)/python bench/msgid.py
	$(BIN)/python bench/migration.py
	$(BIN)/python bench/inbound.py
	$(BIN)/python bench/inbound.py --bots 10
	$(BIN)/python bench/memory.py   # 15 minutes: 10 of them known users only, for the windows to turn over
	$(BIN)/python bench/stalled_client.py
	$(BIN)/python bench/outbound.py
	$(BIN)/python bench/api.py
	$(BIN)/python bench/logline.py
	$(BIN)/python bench/tables.py
	$(BIN)/python bench/idle_imports.py
	$(BIN)/python bench/cluster.py   # needs PostgreSQL at 127.0.0.1:5432 (--dsn) and Redis at 127.0.0.1:6379 (--redis-url)
	$(BIN)/python bench/store_copy.py   # needs PostgreSQL at 127.0.0.1:5432 (--dsn)

# Not part of bench: a steady load on a real daemon for 15 minutes (MINUTES=… to change).
MINUTES ?= 15
soak: venv
	$(BIN)/python bench/soak.py --minutes $(MINUTES)

# ruff's rules and import-linter's layer contracts live in pyproject.toml; the tools'
# versions in requirements/dev.txt
lint: venv
	$(BIN)/ruff check gensokyo_idmap migrate tests
	$(BIN)/lint-imports
	$(BIN)/mypy gensokyo_idmap migrate

# The sdist and the wheel in dist/, checked as an index would (twine check). The build
# backend is the locked setuptools: no isolated build environment fetched unpinned.
dist: venv
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .
	$(BIN)/twine check --strict dist/*

# The console's translations (docs/translations.md): its messages extracted from the templates
# and Python modules into console.pot (pyproject.toml's [tool.babel] says where), each
# language's console.po brought up to date with it (new messages to translate, changed ones
# marked fuzzy), then compiled into the console.mo files the package ships, committed with
# them. tests/api/console/test_catalogs.py fails while any of the three is out of date. The
# sed drops the extraction's time from the headers, so that a run that changes no message
# changes no file (and parallel branches do not conflict over it).
LOCALE := gensokyo_idmap/api/console/locale
catalogs: venv
	$(BIN)/pybabel --quiet extract -F pyproject.toml --add-location=file --sort-output \
		--add-comments=TRANSLATORS: --project=gensokyo-idmap --no-wrap \
		--header-comment="# The console's messages, as make catalogs extracts them: not edited by hand." \
		-o $(LOCALE)/console.pot gensokyo_idmap/api/console
	$(BIN)/pybabel --quiet update -i $(LOCALE)/console.pot -d $(LOCALE) -D console \
		--no-wrap --ignore-obsolete
	sed -i '/^"POT-Creation-Date: /d' $(LOCALE)/console.pot $(LOCALE)/*/LC_MESSAGES/console.po
	$(BIN)/pybabel compile --statistics -d $(LOCALE) -D console

# Both lock files from pyproject.toml's ranges (and requirements/dev.in): every package at
# its newest release in range for this Python (3.11), with the hashes of all its files on
# the index. `make lock LOCK_UPGRADE=` keeps today's pins and only follows a change of
# pyproject.toml. pip-tools (hashed requirements) rather than uv.lock: plain pip installs
# them with this machine's pip settings, and they name no index. The dev lock is held to
# the run lock's pins (-c in dev.in), so the tests run what a service installs. The sed
# drops the checkout's own file:// line that the test extra's self-reference leaves
# (pip-tools issue 2110).
LOCK_UPGRADE ?= --upgrade
PIP_COMPILE = CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile --quiet --generate-hashes \
	--allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links $(LOCK_UPGRADE)
lock: venv
	$(PIP_COMPILE) --all-build-deps --extra postgres --extra redis \
		-o requirements/run.txt pyproject.toml
	$(PIP_COMPILE) --extra test --extra lint -o requirements/dev.txt \
		pyproject.toml requirements/dev.in
	sed -i -e '/^# WARNING: pip install will require the following package to be hashed/d' \
		-e '/^# Consider using a hashable URL/d' -e '/^gensokyo-idmap @ file:/{N;d}' \
		requirements/dev.txt

clean:
	rm -rf $(VENV) data data-demo dist .pytest_cache .hypothesis
