import sqlite3

from django.apps import AppConfig
from django.db.backends.signals import connection_created


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


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "ETL scheduler"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from scheduler.pipelines.registry import autodiscover
        from scheduler.triggers.registry import load_entry_point_plugins

        from scheduler import permissions  # noqa: F401  registers the team rules (django-rules)
        from scheduler.services import alerts  # noqa: F401  connects the alert signal receivers

        connection_created.connect(sqlite_bound_parameters, dispatch_uid="scheduler.sqlite_bound_parameters")
        autodiscover()
        load_entry_point_plugins()
