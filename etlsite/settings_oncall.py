"""What on-call reads: a run's log (its caps and level) and the timeline's default range.

Part of the settings (etlsite/settings.py imports every name of `__all__`), kept apart for the reader who looks
for these alone.
"""
from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from etlsite.env import envint, envstr

__all__ = [
    "ETL_RUN_LOG_LEVEL",
    "ETL_RUN_LOG_MAX_BYTES",
    "ETL_RUN_LOG_MAX_LINE",
    "ETL_RUN_LOG_MAX_LINES",
    "ETL_TIMELINE_HOURS",
]

# The run log's cap in bytes per run (a command's output too); later lines are counted, not kept.
# ETL_LOG_MAX_BYTES is the same setting under the name issue 20 gave it; ETL_RUN_LOG_MAX_BYTES wins when both are set.
ETL_RUN_LOG_MAX_BYTES = envint("ETL_RUN_LOG_MAX_BYTES", envint("ETL_LOG_MAX_BYTES", 256 * 1024, minimum=1024),
                               minimum=1024)
ETL_RUN_LOG_MAX_LINE = envint("ETL_RUN_LOG_MAX_LINE", 16 * 1024, minimum=200)  # one line (a traceback is one line)
# lines per run, empty ones too (each is a row); below 1,000,000, so each attempt's lines keep to their own seq range
ETL_RUN_LOG_MAX_LINES = envint("ETL_RUN_LOG_MAX_LINES", 10_000, minimum=10)
if ETL_RUN_LOG_MAX_LINES > 1_000_000:
    raise ImproperlyConfigured(f"ETL_RUN_LOG_MAX_LINES: must be at most 1000000, got {ETL_RUN_LOG_MAX_LINES}")
ETL_RUN_LOG_LEVEL = envstr("ETL_RUN_LOG_LEVEL", "INFO").upper()
if ETL_RUN_LOG_LEVEL not in ("DEBUG", "INFO", "WARNING", "ERROR"):
    raise ImproperlyConfigured(f"ETL_RUN_LOG_LEVEL: must be DEBUG, INFO, WARNING or ERROR, not {ETL_RUN_LOG_LEVEL!r}")
ETL_TIMELINE_HOURS = envint("ETL_TIMELINE_HOURS", 6, minimum=1)  # how far back the timeline looks by default
