"""After a migration, an analyzed SQLite database has statistics for every index, the new ones too (issue 25)."""
import pytest
from django.apps import apps
from django.db import connection

from scheduler.apps import sqlite_statistics_after_migrate

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's planner statistics")]


def _stat_indexes() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT idx FROM sqlite_stat1 WHERE tbl = 'scheduler_schedule'")
        return {row[0] for row in cursor.fetchall()}


def test_an_index_added_after_analyze_gets_statistics_when_migrations_end(make_schedule):
    for name in ("a", "b", "c"):
        make_schedule(name)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        cursor.execute("CREATE INDEX test_new_idx ON scheduler_schedule (description)")  # as a migration adds one
    assert "test_new_idx" not in _stat_indexes()
    try:
        sqlite_statistics_after_migrate(sender=apps.get_app_config("scheduler"), using="default")
        assert "test_new_idx" in _stat_indexes()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX test_new_idx")
            cursor.execute("DROP TABLE IF EXISTS sqlite_stat1")  # later tests start without statistics
