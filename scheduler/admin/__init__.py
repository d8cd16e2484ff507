"""Django admin: declarative; every save and action goes through the services.

One module per family of models; importing each registers its models with the admin site:
schedules (and workload classes), runs (and backfills), teams, users (and groups), tokens (API and event),
watermarks, audit (the audit log and the other read-only records), connections. `common` holds what they share.
"""
from scheduler.admin import audit, connections, runs, schedules, teams, tokens, users, watermarks  # noqa: F401
