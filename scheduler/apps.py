import sqlite3

from django.apps import AppConfig
from django.db import connections
from django.db.backends.signals import connection_created
from django.db.models.signals import post_migrate


def sqlite_bound_parameters(sender, connection, **kwargs) -> None:
    """Let bulk statements on SQLite use the bound-parameter limit the library has, not Django's 999.

    Django batches bulk_create at 999 parameters for SQLite builds older than
    3.32, which splits a tick's 100 new runs into four INSERTs and 1,000 audit
    entries into twelve. Builds since 3.32 allow 32,766 (Debian's 250,000);
    the library reports its own limit.
    """
    if connection.vendor == "sqlite" and connection.connection is not None:
        limit = connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        connection.features.max_query_params = max(999, min(limit, 32_766))


def sqlite_statistics_after_migrate(sender, using="default", **kwargs) -> None:
    """Refresh SQLite's planner statistics after a migration, when the database keeps any.

    An index a migration adds has no row in sqlite_stat1 while the others have: the planner then favours the
    new one, and plans went 30 times slower (the runs list 144 ms to 5.1 s at 1,000,000 runs, issue 25). A
    database never analyzed has no statistics at all and the planner's own rules, which are consistent.
    """
    connection = connections[using]
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_stat1'")
        if cursor.fetchone():
            cursor.execute("ANALYZE")


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "ETL scheduler"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from scheduler.pipelines.registry import autodiscover
        from scheduler.triggers.registry import load_entry_point_plugins

        from scheduler import permissions  # noqa: F401  registers the team rules (django-rules)
        from scheduler.services.oversight import alerts  # noqa: F401  connects the alert signal receivers

        connection_created.connect(sqlite_bound_parameters, dispatch_uid="scheduler.sqlite_bound_parameters")
        post_migrate.connect(sqlite_statistics_after_migrate, sender=self,
                             dispatch_uid="scheduler.sqlite_statistics_after_migrate")
        autodiscover()
        load_entry_point_plugins()
