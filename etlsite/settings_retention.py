"""How long each kind of record is kept, and the prune that deletes older rows (docs/deploy.md, "Sizing retention").

Part of the settings (etlsite/settings.py imports every name of `__all__`), kept apart for the reader who looks
for these alone.
"""
from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from etlsite.env import envfloat, envint, envstr

__all__ = [
    "ETL_AUDIT_ARCHIVE_DIR",
    "ETL_PRUNE_BATCH",
    "ETL_PRUNE_INTERVAL",
    "ETL_PRUNE_MAX_BATCHES",
    "ETL_RETENTION_ALERTS_DAYS",
    "ETL_RETENTION_AUDIT_DAYS",
    "ETL_RETENTION_EVENTS_DAYS",
    "ETL_RETENTION_RUNS_DAYS",
    "ETL_RETENTION_TICKS_DAYS",
]

# How long each kind of record is kept (docs/deploy.md, "Sizing retention"); the cluster's `prune` loop deletes
# older rows in bounded batches, and `manage.py prune_history` does the same by hand. 0 days keeps a kind for ever.
# A schedule's own `retention_days` replaces ETL_RETENTION_RUNS_DAYS for its runs (with their log lines and node
# records) and its alert deliveries. Never deleted whatever the age: docs/semantics.md, "Retention".
ETL_RETENTION_RUNS_DAYS = envint("ETL_RETENTION_RUNS_DAYS", 90, minimum=0)  # runs, their log lines and node records
ETL_RETENTION_TICKS_DAYS = envint("ETL_RETENTION_TICKS_DAYS", 7, minimum=0)  # governance ticks
ETL_RETENTION_EVENTS_DAYS = envint("ETL_RETENTION_EVENTS_DAYS", 30, minimum=0)  # received events
ETL_RETENTION_ALERTS_DAYS = envint("ETL_RETENTION_ALERTS_DAYS", 90, minimum=0)  # sent or given-up alert deliveries
# the lineage outbox keeps sent rows ETL_LINEAGE_RETENTION_HOURS (etlsite/settings_lineage.py)
# The audit log is pruned only once archived: with ETL_AUDIT_ARCHIVE_DIR set, entries older than
# ETL_RETENTION_AUDIT_DAYS are written to <dir>/audit-YYYY-MM.jsonl.gz (fsynced) and only then deleted.
ETL_AUDIT_ARCHIVE_DIR = envstr("ETL_AUDIT_ARCHIVE_DIR", "")
if ETL_AUDIT_ARCHIVE_DIR and not Path(ETL_AUDIT_ARCHIVE_DIR).is_absolute():
    raise ImproperlyConfigured(f"ETL_AUDIT_ARCHIVE_DIR: must be an absolute path, got {ETL_AUDIT_ARCHIVE_DIR!r}")
ETL_RETENTION_AUDIT_DAYS = envint("ETL_RETENTION_AUDIT_DAYS", 365, minimum=1)
ETL_PRUNE_INTERVAL = envfloat("ETL_PRUNE_INTERVAL", 300.0, minimum=1.0)  # the prune loop's pace (seconds)
ETL_PRUNE_BATCH = envint("ETL_PRUNE_BATCH", 500, minimum=1)  # rows (runs) deleted per transaction
ETL_PRUNE_MAX_BATCHES = envint("ETL_PRUNE_MAX_BATCHES", 20, minimum=1)  # batches per kind in one loop tick
