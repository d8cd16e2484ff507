"""OpenLineage: whether run events are sent, as what, and how the outbox retries (docs/lineage.md).

Part of the settings (etlsite/settings.py imports every name of `__all__`), kept apart for the reader who looks
for these alone.
"""
from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from etlsite.env import envfloat, envint, envstr

__all__ = [
    "ETL_LINEAGE",
    "ETL_LINEAGE_BATCH",
    "ETL_LINEAGE_INTERVAL",
    "ETL_LINEAGE_MAX_ATTEMPTS",
    "ETL_LINEAGE_NAMESPACE",
    "ETL_LINEAGE_PRODUCER",
    "ETL_LINEAGE_RETENTION_HOURS",
    "ETL_LINEAGE_RETRY_MAX_SECONDS",
    "ETL_LINEAGE_RETRY_SECONDS",
    "ETL_LINEAGE_SCHEMA_URL",
]

# OpenLineage run events through the outbox (docs/lineage.md). auto: on when the OpenLineage client is configured
# (OPENLINEAGE_URL, OPENLINEAGE_CONFIG / openlineage.yml, OPENLINEAGE__TRANSPORT__* variables); on: always (an
# unconfigured client prints to the console); off: never, whatever is configured.
ETL_LINEAGE = envstr("ETL_LINEAGE", "auto").strip().lower()
if ETL_LINEAGE not in ("auto", "on", "off"):
    raise ImproperlyConfigured(f"ETL_LINEAGE: expected one of auto, on, off, got {ETL_LINEAGE!r}")
ETL_LINEAGE_NAMESPACE = envstr("ETL_LINEAGE_NAMESPACE", "etl-scheduler")  # the jobs' OpenLineage namespace
ETL_LINEAGE_PRODUCER = envstr("ETL_LINEAGE_PRODUCER", "urn:etl-scheduler")  # the events' producer URI
# where this product's custom facets' JSON schema is served (a copy is docs/lineage-facets.json)
ETL_LINEAGE_SCHEMA_URL = envstr("ETL_LINEAGE_SCHEMA_URL", "urn:etl-scheduler:lineage-facets:1")
ETL_LINEAGE_INTERVAL = envfloat("ETL_LINEAGE_INTERVAL", 2.0, minimum=0.05)  # the sending loop's pace
ETL_LINEAGE_BATCH = envint("ETL_LINEAGE_BATCH", 200, minimum=1)  # rows read per tick
ETL_LINEAGE_RETRY_SECONDS = envfloat("ETL_LINEAGE_RETRY_SECONDS", 5.0, minimum=0.0)  # first back-off
ETL_LINEAGE_RETRY_MAX_SECONDS = envfloat("ETL_LINEAGE_RETRY_MAX_SECONDS", 900.0, minimum=0.0)  # back-off cap
ETL_LINEAGE_MAX_ATTEMPTS = envint("ETL_LINEAGE_MAX_ATTEMPTS", 0, minimum=0)  # 0: retry forever; else give up (DEAD)
ETL_LINEAGE_RETENTION_HOURS = envfloat("ETL_LINEAGE_RETENTION_HOURS", 24.0, minimum=0.0)  # sent rows kept this long
