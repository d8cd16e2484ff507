"""The statement budget of a run's whole path (issue 35), kept in tests/query_counts.json as NetBox keeps its
query counts: a count that grows past its baseline fails here, on every machine, without a timing.

To change a count on purpose (a new capability writes to the run's path, or a cut), run this file on both
databases with ETL_UPDATE_QUERY_COUNTS=1 and commit the file with the reason (docs/benchmarks.md, "The statement
budget"):

    ETL_UPDATE_QUERY_COUNTS=1 ETL_TEST_DB_SUFFIX=me .venv/bin/python -m pytest -p no:xdist \
        tests/services/test_statement_budget.py
    ETL_UPDATE_QUERY_COUNTS=1 DATABASE_URL=postgres://postgres@127.0.0.1:5432/test ETL_TEST_DB_NAME=test_etl_me \
        .venv/bin/python -m pytest -p no:xdist tests/services/test_statement_budget.py
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
from django.db import connection

from scheduler.models import Schedule
from scheduler.services.oversight import alerts
from tests.services import run_path_counts

pytestmark = pytest.mark.django_db(transaction=True)
BASELINE = Path(__file__).resolve().parent.parent / "query_counts.json"
BATCH = 100
UPDATE = os.environ.get("ETL_UPDATE_QUERY_COUNTS") == "1"


@pytest.fixture(autouse=True)
def _steady_cluster(settings, now, monkeypatch):
    """The shipped cluster's shape (2 workers, 64 runs a message at most), a batch written once at its end (the
    flush timer's own connection is not this one's), and the dispatch tick in its steady state: the governance
    watchdog, which reads at most once a minute, checked already."""
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "workers": 2}
    settings.ETL_RUN_BATCH_MAX = 64
    settings.ETL_BATCH_FLUSH_SECONDS = 3600
    settings.ETL_BATCH_BUDGET_SECONDS = 3600
    monkeypatch.setattr(alerts, "_last_watchdog", now)


def _check(case: str, counter: run_path_counts.Counter) -> None:
    """Compare the statements of `case` with the baseline of this database (or write them, in update mode)."""
    measured = {phase: len(sql) for phase, sql in counter.sql.items()}
    measured["total"] = sum(measured.values())
    vendor = connection.vendor
    data = json.loads(BASELINE.read_text())
    if UPDATE:
        data.setdefault(vendor, {})[case] = measured
        BASELINE.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        return
    baseline = data.get(vendor, {}).get(case)
    assert baseline is not None, f"no baseline for {vendor} / {case} in {BASELINE.name}: write it (see this file's doc)"
    grown = {phase: (baseline[phase], n) for phase, n in measured.items() if n > baseline[phase]}
    if grown:
        detail = "\n".join(f"--- {phase}: {len(counter.sql[phase])} statements\n" + "\n".join(
            sql[:200] for sql in counter.sql[phase]) for phase in grown if phase != "total")
        pytest.fail(
            f"the run's path ({case}, {vendor}) takes more statements than its budget in {BASELINE.name}: "
            f"{ {phase: f'{old} -> {new}' for phase, (old, new) in grown.items()} }. If the statement is needed, "
            f"update the baseline on purpose (ETL_UPDATE_QUERY_COUNTS=1, both databases; see {__name__}) and say "
            f"why in docs/benchmarks.md.\n{detail}")
    shrunk = {phase: (baseline[phase], n) for phase, n in measured.items() if n < baseline[phase]}
    if shrunk:
        warnings.warn(f"{case} ({vendor}) takes fewer statements than {BASELINE.name} says: {shrunk}; lock the gain "
                      "in with ETL_UPDATE_QUERY_COUNTS=1", stacklevel=1)


def test_a_lone_manual_run(make_schedule, now):
    _check("lone_manual", run_path_counts.lone(make_schedule("alone"), now))


def test_a_batch_of_manual_runs(make_schedule, now):
    schedules = [make_schedule(f"m{i:03}") for i in range(BATCH)]
    _check(f"batch_{BATCH}_manual", run_path_counts.batch(schedules, now))


def test_a_batch_of_cron_fires(make_schedule, now):
    for i in range(BATCH):
        make_schedule(f"c{i:03}", trigger_kind="cron", trigger_config={"cron": "0 * * * *"})
    Schedule.objects.update(next_fire_at=now)
    _check(f"batch_{BATCH}_cron", run_path_counts.batch(list(Schedule.objects.order_by("pk")), now, cron=True))


def test_the_budget_fails_on_growth(make_schedule, now, monkeypatch):
    """The check itself: one statement more than the baseline fails, and says how to update the file."""
    if UPDATE:
        pytest.skip("update mode writes the baseline")
    counter = run_path_counts.lone(make_schedule("grown"), now)
    counter.sql["execution"].append("SELECT 1")
    with pytest.raises(pytest.fail.Exception, match="ETL_UPDATE_QUERY_COUNTS=1"):
        _check("lone_manual", counter)
