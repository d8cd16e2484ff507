"""A team's project, scaffolded by `manage.py new_project NAME`: a package with its pipelines, installed beside the
scheduler and found through the entry point group `etl_scheduler.pipelines` (docs/your-code.md).

    NAME-etl/
      pyproject.toml          the package, its entry point and its console script
      README.md               install, test, apply, run, change
      schedules.yaml          an incremental SQL sync (watermark with lag and overlap) and a command after it
      src/NAME_etl/pipelines.py   the pipeline NAME.events
      src/NAME_etl/export.py      the command NAME-export
      tests/test_events.py    one window of the pipeline against a test database (scheduler.testing.run_window)
"""
from __future__ import annotations

import re
from datetime import date
from pathlib import Path

from scheduler.core import ConfigError

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,29}$")

PYPROJECT = '''\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"  # raise it with each release: every run records the version it ran
description = "{name}'s pipelines for the ETL scheduler"
requires-python = ">=3.11"
dependencies = []  # the scheduler itself is already there: this package is installed into its environment

# how the scheduler finds the pipelines: every process imports this module as it starts
[project.entry-points."etl_scheduler.pipelines"]
{name} = "{package}.pipelines"

# the command target of schedules.yaml, installed beside the scheduler's own Python
[project.scripts]
{name}-export = "{package}.export:main"

[tool.setuptools.packages.find]
where = ["src"]

[tool.pytest.ini_options]
testpaths = ["tests"]
'''

PIPELINES = '''\
"""{name}'s pipelines. The scheduler imports this module through the entry point in pyproject.toml; each
`@pipeline` registers one, by id. Where the data lives comes from the environment of the processes that run it
(the clusters, `run_pipeline`, your tests), never from run params:

    {env}_SOURCE_DB     the database the events are read from (postgres://user:pass@host/db, sqlite:////abs/path)
    {env}_WAREHOUSE_DB  the database the table {name}_events is loaded into (created on the first load)
"""
import os

from scheduler.core import ConfigError, Pipeline
from scheduler.pipelines.registry import pipeline
from scheduler.pipelines.sql import SqlSink, SqlSource
from scheduler.pipelines.transforms import MapTransform

SOURCE_DB = "{env}_SOURCE_DB"
WAREHOUSE_DB = "{env}_WAREHOUSE_DB"


def database(variable: str) -> str:
    value = os.environ.get(variable, "").strip()
    if not value:
        raise ConfigError(variable, "is not set: a database URL (postgres://..., sqlite:////...) or a Django alias")
    return value


def shape(row: dict) -> dict:
    """One source row as the warehouse keeps it: your logic goes here."""
    return {{"id": row["id"], "kind": row["kind"].lower(), "amount": row["amount"], "updated_at": row["updated_at"]}}


@pipeline("{name}.events", description="events changed in the window -> {name}_events", watermark_column="updated_at")
def events(ctx):
    # ctx.window is the schedule's next window, [low, high) on updated_at (watermark_config in schedules.yaml)
    return Pipeline(
        SqlSource(database(SOURCE_DB), table="events", watermark_column="updated_at", window=ctx.window),
        MapTransform(shape),
        # an upsert on id: a row read again (the watermark's overlap) replaces itself, never doubles
        SqlSink(database(WAREHOUSE_DB), table="{name}_events", key="id", create=True),
        watermark_column="updated_at",
    )
'''

EXPORT = '''\
"""`{name}-export`: the command target of schedules.yaml, run after each sync (any program would do; this one is
Python so it ships in the package). A run's facts come in ETL_* variables; it reports its rows in
ETL_RESULT_FILE. Exit 0 is success. A command gets none of the worker's environment unless it is named: the
clusters pass {env}_WAREHOUSE_DB on with ETL_COMMAND_ENV_PASSTHROUGH={env}_WAREHOUSE_DB (README)."""
import json
import os
import sys
from collections import Counter

from scheduler.pipelines.sql import SqlSource

from .pipelines import WAREHOUSE_DB, database


def main() -> int:
    try:
        rows = list(SqlSource(database(WAREHOUSE_DB), table="{name}_events").extract())
    except Exception as exc:  # no sync has loaded a row yet: the table is made by the first load
        if "no such table" not in str(exc) and "does not exist" not in str(exc):
            raise
        rows = []
    for kind, count in sorted(Counter(row["kind"] for row in rows).items()):
        print(f"{{kind}}: {{count}}")
    print(f"{{len(rows)}} events in the warehouse (run {{os.environ.get('ETL_RUN_ID', '-')}})")
    if os.environ.get("ETL_RESULT_FILE"):
        with open(os.environ["ETL_RESULT_FILE"], "w") as result:
            json.dump({{"rows": len(rows)}}, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

SCHEDULES = '''\
# {name}'s schedules: `manage.py apply_schedules schedules.yaml` (the format: docs/semantics.md, "Schedules as code")
version: 1
schedules:
  - name: {name}_events
    target_id: {name}.events
    trigger_kind: interval
    trigger_config: {{seconds: 300}}
    watermark_config:
      type: datetime
      column: updated_at
      initial: "{today}T00:00:00+00:00"  # where your history begins: the first run reads from here
      # lag: read nothing newer than 2 minutes ago. A row is visible only once its transaction commits, and a
      # long transaction commits after rows stamped later than its own updated_at: without lag, a window that
      # closed at "now" would be moved past that row before it was visible, and the row skipped for good.
      lag: 120
      # overlap: each run also re-reads the 5 minutes before the mark, for rows that still came late (a clock
      # behind, a transaction longer than the lag). The sink upserts on id, so a row read twice stays one row.
      overlap: 300
      max_window: 86400  # a long gap (a first run, a pause) is read one day per run
    # team: {name}   # the owning team (manage.py team create {name}); without it, the default team
  - name: {name}_export
    target_kind: command
    command: {{argv: [{name}-export]}}  # the console script this package installs beside the scheduler
    trigger_kind: upstream
    depends_on: [{name}_events]   # runs after each successful sync
    timeout_seconds: 600
'''

TEST = '''\
"""One window of {name}.events against a test database: what a scheduled run of that window would load."""
import sqlite3
from datetime import UTC, datetime

import pytest

from scheduler.testing import failures, run_window

DAY = (datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, tzinfo=UTC))


def stamp(text: str) -> str:
    return datetime.fromisoformat(text).isoformat(timespec="microseconds")  # how SQLite windows compare times


@pytest.fixture
def warehouse(tmp_path, monkeypatch):
    """A source with four events around one day, and an empty warehouse (SQLite files of the test's own)."""
    source, warehouse = tmp_path / "source.sqlite3", tmp_path / "warehouse.sqlite3"
    with sqlite3.connect(source) as db:
        db.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT, amount REAL, updated_at TEXT)")
        db.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", [
            (1, "Signup", 0, stamp("2026-02-28T23:59:59+00:00")),   # the day before
            (2, "Order", 12.5, stamp("2026-03-01T00:00:00+00:00")),  # the first instant of the day: in
            (3, "Refund", -2, stamp("2026-03-01T23:59:59+00:00")),   # in
            (4, "Order", 7, stamp("2026-03-02T00:00:00+00:00")),     # the next day's first instant: out
        ])
    monkeypatch.setenv("{env}_SOURCE_DB", f"sqlite:///{{source}}")
    monkeypatch.setenv("{env}_WAREHOUSE_DB", f"sqlite:///{{warehouse}}")
    return warehouse


def test_one_day_loads_the_events_changed_that_day(warehouse):
    report = run_window("{name}.events", *DAY)
    assert report.ok, failures(report)
    with sqlite3.connect(warehouse) as db:
        loaded = db.execute("SELECT id, kind FROM {name}_events ORDER BY id").fetchall()
    assert loaded == [(2, "order"), (3, "refund")]
    assert report.rows == 2
'''

README = '''\
# {dist}

{name}'s pipelines for the ETL scheduler: `{name}.events` loads the events changed in each window of a watermark
on `updated_at` into `{name}_events`, and `{name}-export` runs after each sync.

## Install it beside the scheduler

Into the scheduler's environment (the one that runs its web side, its clusters and its commands):

```sh
/srv/etl/.venv/bin/pip install -e .        # while you work on it; `pip install .` (or a wheel) for production
```

The scheduler finds the pipelines through the entry point in `pyproject.toml`: no setting to edit.
Where the data lives comes from the environment of each process that runs them (the clusters' too):

```sh
export {env}_SOURCE_DB=postgres://reader:...@db.internal/shop
export {env}_WAREHOUSE_DB=postgres://loader:...@warehouse.internal/dwh
export ETL_COMMAND_ENV_PASSTHROUGH={env}_WAREHOUSE_DB   # a command gets only what is named: {name}-export reads it
python manage.py run_pipeline {name}.events --window 2026-03-01 2026-03-02   # one window, in this process
```

## Test it

```sh
/srv/etl/.venv/bin/python -m pytest tests
```

`tests/test_events.py` runs the pipeline for one day against a SQLite database of the test's own
(`scheduler.testing.run_window`, the same as `manage.py run_pipeline {name}.events --window LOW HIGH`).

## Apply the schedules, run it

```sh
python manage.py apply_schedules /path/to/{dist}/schedules.yaml --dry-run   # the plan
python manage.py apply_schedules /path/to/{dist}/schedules.yaml
python manage.py trigger {name}_events --wait                              # or wait for the interval
```

The run page shows the code each run ran (`{dist} 0.1.0 · <digest of pipelines.py>`).

## Change it

Edit the code (or install a new version). Each running cluster notices the newer code within
`ETL_CODE_CHECK_SECONDS`, finishes its running runs and restarts its workers on it; `manage.py reload_workers`
asks at once. The next run records the new version, and its page says "code changed since run #N".
'''


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ConfigError("name", f"must be 1-30 lowercase letters, digits or '_', starting with a letter, "
                                  f"got {name!r}")
    return name


def project_files(name: str, *, today: date) -> dict[str, str]:
    """Relative path -> text of every file of NAME's project."""
    name = check_name(name)
    facts = {"name": name, "package": f"{name}_etl", "dist": f"{name.replace('_', '-')}-etl", "env": name.upper(),
             "today": today.isoformat()}
    package = f"src/{facts['package']}"
    return {
        "pyproject.toml": PYPROJECT.format(**facts),
        "README.md": README.format(**facts),
        "schedules.yaml": SCHEDULES.format(**facts),
        f"{package}/__init__.py": f'"""{name}\'s pipelines for the ETL scheduler."""\n',
        f"{package}/pipelines.py": PIPELINES.format(**facts),
        f"{package}/export.py": EXPORT.format(**facts),
        "tests/test_events.py": TEST.format(**facts),
    }


def scaffold(name: str, *, directory: Path, today: date) -> list[Path]:
    """Write NAME's project into `directory` (made; it must not exist or be empty); the files written."""
    files = project_files(name, today=today)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise ConfigError("dir", f"{directory} exists and is not an empty directory: nothing was written")
    written = []
    for relative, text in files.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


__all__ = ["check_name", "project_files", "scaffold"]
