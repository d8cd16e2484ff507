# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PG_URL ?= postgres://postgres@127.0.0.1:5432/test

lint: $(VENV)/.installed-test
	$(PY) -m ruff check .

.PHONY: lint run test test-fast test-sqlite test-postgres install install-test install-bench bench bench-peers soak clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

install: $(PY)
	$(PY) -m pip install --quiet -e .

install-test: $(PY)
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(VENV)/.installed-test

# the inner loop installs only when pyproject.toml changed (pip takes ~40 s even with nothing to do)
$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(MAKE) --no-print-directory install-test

# the demo, always on the embedded default (SQLite in var/, the ORM broker), whatever DATABASE_URL or REDIS_URL the
# shell exports: a real database is prepared with `manage.py init_production` (docs/deploy.md), never seeded with it
DEMO_ENV := env -u DATABASE_URL -u REDIS_URL

run: install
	$(DEMO_ENV) $(PY) manage.py migrate --noinput
	$(DEMO_ENV) $(PY) manage.py setup_demo
	$(DEMO_ENV) $(PY) manage.py serve

# Each pass runs on WORKERS pytest-xdist workers, each with its own test database (pytest-django adds _gw0, _gw1 to
# its name), temporary directories and block of ports (tests/throwaway.py). `make test` runs the two passes side by
# side, as most of a pass's time is spent waiting on the processes its tests start: the SQLite pass prints as it
# goes, the PostgreSQL pass into var/test-postgres.log, printed after it; it fails when either pass fails.
WORKERS ?= 2
PYTEST := $(PY) -m pytest -q -p no:cacheprovider -n $(WORKERS) --dist worksteal $(PYTEST_ARGS)

test: install-test
	@mkdir -p var; $(MAKE) --no-print-directory test-postgres > var/test-postgres.log 2>&1 & pg=$$!; \
	$(MAKE) --no-print-directory test-sqlite; sqlite=$$?; \
	wait $$pg; postgres=$$?; \
	echo "=== SQLite pass: exit $$sqlite; PostgreSQL pass: exit $$postgres. The PostgreSQL pass's output:"; \
	cat var/test-postgres.log; \
	[ $$sqlite -eq 0 ] && [ $$postgres -eq 0 ]

# the inner loop: the pure core, the services and the views, on SQLite (docs/testing.md)
test-fast: $(VENV)/.installed-test
	$(PYTEST) tests/core tests/services tests/views

test-sqlite:
	$(PYTEST)

test-postgres:
	DATABASE_URL=$(PG_URL) $(PYTEST)

install-bench: $(PY)
	$(PY) -m pip install --quiet -e ".[test,bench]"

bench: install-bench
	$(PY) bench/run.py $(BENCH_ARGS)

# the peers live in their own venvs under /tmp/etl-peers (installs take minutes)
bench-peers: install-bench
	bash bench/peers/install.sh || true
	$(PY) bench/peers/run.py $(BENCH_ARGS)

soak: install-test
	$(PY) scripts/soak.py --duration 600

clean:
	rm -rf var/test_*.sqlite3* var/test-postgres.log .pytest_cache
