"""The lineage outbox's sender: the cluster's `lineage` loop (leased: one at a time), and a one-shot drain.

Each tick sends the pending events that are due, oldest first and in order per runId (an event waits while an
earlier one of its run is backing off), with the OpenLineage client configured the standard way. A failed send
backs off exponentially (ETL_LINEAGE_RETRY_SECONDS doubling up to ETL_LINEAGE_RETRY_MAX_SECONDS) and ends the
tick: a backend that is down gets one try per tick, and no run ever waits for it. Sent rows are pruned after
ETL_LINEAGE_RETENTION_HOURS, in bounded batches.
"""
from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Min
from django.utils import timezone
from openlineage.client import OpenLineageClient

from scheduler.models import LineageEvent, LineageStatus
from scheduler.services.integrations.lineage import event_from_payload

log = logging.getLogger(__name__)
PRUNE_BATCH = 1000
_client: OpenLineageClient | None = None
_client_guard = threading.Lock()


def lineage_client() -> OpenLineageClient:
    """This process's client, from OPENLINEAGE_URL / OPENLINEAGE_CONFIG / openlineage.yml / OPENLINEAGE__* variables."""
    global _client
    with _client_guard:
        if _client is None:
            _client = OpenLineageClient()
        return _client


def lineage_client_reset() -> None:
    global _client
    with _client_guard:
        _client = None


def lineage_backoff(attempts: int) -> float:
    """Seconds to wait after the `attempts`-th failed try."""
    base, cap = settings.ETL_LINEAGE_RETRY_SECONDS, settings.ETL_LINEAGE_RETRY_MAX_SECONDS
    return min(cap, base * 2 ** max(0, attempts - 1))


def lineage_send_due(*, now: datetime, client: Any = None, limit: int | None = None) -> dict[str, int]:
    """One pass over the due pending events: {'sent': n, 'failed': n, 'dead': n}."""
    limit = limit or settings.ETL_LINEAGE_BATCH
    pending = LineageEvent.objects.filter(status=LineageStatus.PENDING)
    # an event backing off holds back the later events of its run
    held = dict(pending.filter(next_attempt_at__gt=now).values_list("run_uuid").annotate(first=Min("id")).order_by())
    rows = list(pending.filter(next_attempt_at__lte=now).order_by("id")[:limit])
    out = {"sent": 0, "failed": 0, "dead": 0}
    if not rows:
        return out
    client = client or lineage_client()
    for row in rows:
        if row.run_uuid in held and row.id > held[row.run_uuid]:
            continue
        attempts = row.attempts + 1
        try:
            client.emit(event_from_payload(row.payload))
        except Exception as exc:  # the backend is down or refused it: back off, never fail anything else
            error = f"{type(exc).__name__}: {exc}"[:2000]
            max_attempts = settings.ETL_LINEAGE_MAX_ATTEMPTS
            dead = bool(max_attempts) and attempts >= max_attempts
            LineageEvent.objects.filter(pk=row.pk, status=LineageStatus.PENDING).update(
                attempts=attempts, last_error=error, status=LineageStatus.DEAD if dead else LineageStatus.PENDING,
                next_attempt_at=now + timedelta(seconds=lineage_backoff(attempts)))
            out["dead" if dead else "failed"] += 1
            log.warning("lineage event %s (%s of %s) not sent, attempt %d: %s", row.pk, row.event_type,
                        row.job_name, attempts, error)
            break  # one try per tick while the backend is down
        LineageEvent.objects.filter(pk=row.pk, status=LineageStatus.PENDING).update(
            status=LineageStatus.SENT, attempts=attempts, sent_at=now, last_error="")
        out["sent"] += 1
    return out


def lineage_prune(*, now: datetime) -> int:
    """Delete sent events older than ETL_LINEAGE_RETENTION_HOURS (one bounded batch); returns how many."""
    cutoff = now - timedelta(hours=settings.ETL_LINEAGE_RETENTION_HOURS)
    ids = list(LineageEvent.objects.filter(status=LineageStatus.SENT, sent_at__lt=cutoff)
               .order_by("id").values_list("id", flat=True)[:PRUNE_BATCH])
    if not ids:
        return 0
    return LineageEvent.objects.filter(pk__in=ids).delete()[0]


def lineage_tick(*, now: datetime, holder: str = "", client: Any = None) -> dict[str, int]:
    """The `lineage` loop's tick: send what is due, prune what was sent long enough ago."""
    out = lineage_send_due(now=now, client=client)
    out["pruned"] = lineage_prune(now=now)
    return out


def lineage_drain(*, client: Any = None, now: datetime | None = None, retry_now: bool = False,
                  max_passes: int = 1000) -> dict[str, int]:
    """Send every due pending event now (tests, `manage.py lineage_flush`); `retry_now` ignores the back-off.

    Stops at the first failure (the backend is down) or when nothing is due.
    """
    now = now or timezone.now()
    if retry_now:
        LineageEvent.objects.filter(status=LineageStatus.PENDING).update(next_attempt_at=now)
    total = {"sent": 0, "failed": 0, "dead": 0}
    for _ in range(max_passes):
        out = lineage_send_due(now=now, client=client)
        for key, value in out.items():
            total[key] += value
        if not out["sent"] or out["failed"] or out["dead"]:
            break
    total["pending"] = LineageEvent.objects.filter(status=LineageStatus.PENDING).count()
    return total


def lineage_backlog(*, now: datetime) -> dict[str, Any]:
    """For the metrics: the pending and dead rows and the age in seconds of the oldest pending event, in one
    query over lineage_status_idx. The sent rows (two a run, kept for ETL_LINEAGE_RETENTION_HOURS) are not
    counted: a scrape would read them all."""
    rows = {status: (n, first) for status, n, first in
            LineageEvent.objects.filter(status__in=[LineageStatus.PENDING, LineageStatus.DEAD]).order_by()
            .values_list("status").annotate(n=Count("id"), first=Min("created_at"))}
    pending, oldest = rows.get(LineageStatus.PENDING, (0, None))
    return {"pending": pending, "dead": rows.get(LineageStatus.DEAD, (0, None))[0],
            "oldest_pending_seconds": max(0.0, (now - oldest).total_seconds()) if oldest else 0.0}


__all__ = ["lineage_backlog", "lineage_backoff", "lineage_client", "lineage_client_reset", "lineage_drain",
           "lineage_prune", "lineage_send_due", "lineage_tick"]
