# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PG_URL ?= postgres://postgres@127.0.0.1:5432/test

.PHONY: run test test-sqlite test-postgres install install-test install-bench bench bench-peers soak clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

install: $(PY)
	$(PY) -m pip install --quiet -e .

install-test: $(PY)
	$(PY) -m pip install --quiet -e ".[test]"

run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py setup_demo
	$(PY) manage.py serve

test: install-test
	$(MAKE) test-sqlite
	$(MAKE) test-postgres

test-sqlite:
	$(PY) -m pytest -q -p no:cacheprovider

test-postgres:
	DATABASE_URL=$(PG_URL) $(PY) -m pytest -q -p no:cacheprovider

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
	rm -rf var/test_*.sqlite3* .pytest_cache
