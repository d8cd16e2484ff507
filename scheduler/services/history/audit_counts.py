"""The audit log counted per hour, team, actor and action (AuditCount), kept as entries are written.

Every entry written inserts a delta row in its own transaction (models/audit.py: `AuditEntry.save`, the
manager's `bulk_create`, `audit_record_many`), and an entry deleted after its archive a negative one; inserts
only, so no writer waits on another's counter row. `audit_counts_fold` (a governance job) sums the deltas into
one row per key, keeping the table about (hours x keys) long. The audit report reads it (audit_reads.py):
the sum of `n` over a key's rows is, at every commit, the number of the key's entries in the log.
"""
from __future__ import annotations

from collections import Counter
from datetime import datetime

from django.db import connection, transaction

from scheduler.models import AuditCount

FOLD_BATCH = 10_000
FOLD_LOCK = 0x45544C_4143  # the advisory lock one fold at a time holds ("ETL", "AC"), PostgreSQL only
HOURS_PER_QUERY = 1_000

# the UTC start of an entry's hour, as migration 0028 computes it for the log it found
_HOUR_SQL = {"postgresql": "date_trunc('hour', at, 'UTC')", "sqlite": "strftime('%Y-%m-%d %H:00:00', at)"}

Key = tuple[datetime, "int | None", str, str]


def audit_counts_fold(*, now: datetime | None = None, batch: int = FOLD_BATCH) -> int:
    """Fold the oldest `batch` deltas into their keys' folded rows; the number of deltas folded.

    The deltas and the folded rows of their keys are locked, deleted and replaced by one folded row per key
    with the sum (none when the sum is 0: every entry of the key was archived and deleted). The fold is given
    up (rolled back) if the deltas it deletes are not exactly those it summed, so a delta committed meanwhile
    is never lost. One fold at a time: on PostgreSQL a fold that finds another under way folds nothing (the
    next governance tick does), as two folds locking deltas and folded rows in their own orders could deadlock;
    SQLite runs one writer at a time anyway. A key may still hold several folded rows (a fold given up after
    another wrote one); the sum over the key stays exact, and a later fold of that key merges them.
    """
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [FOLD_LOCK])
                if not cursor.fetchone()[0]:
                    return 0
        deltas = list(AuditCount.objects.select_for_update().filter(folded=False).order_by("id")
                      .values_list("id", "hour", "team_id", "actor", "action", "n")[:batch])
        if not deltas:
            return 0
        sums: Counter[Key] = Counter()
        for _, hour, team_id, actor, action, n in deltas:
            sums[(hour, team_id, actor, action)] += n
        folded_ids = []
        hours = sorted({key[0] for key in sums})
        for start in range(0, len(hours), HOURS_PER_QUERY):
            for pk, hour, team_id, actor, action, n in (
                AuditCount.objects.select_for_update()
                .filter(folded=True, hour__in=hours[start : start + HOURS_PER_QUERY])
                .order_by("id")
                .values_list("id", "hour", "team_id", "actor", "action", "n")
            ):
                key = (hour, team_id, actor, action)
                if key in sums:
                    sums[key] += n
                    folded_ids.append(pk)
        # by id range, not an IN list of 10,000 parameters; a delta committed meanwhile below the top makes the
        # count differ, and the fold is given up
        deleted, _ = AuditCount.objects.filter(folded=False, id__lte=deltas[-1][0]).delete()
        if deleted != len(deltas):
            transaction.set_rollback(True)
            return 0
        for start in range(0, len(folded_ids), FOLD_BATCH):
            AuditCount.objects.filter(pk__in=folded_ids[start:start + FOLD_BATCH]).delete()
        AuditCount.objects.bulk_create([
            AuditCount(hour=hour, team_id=team_id, actor=actor, action=action, n=n, folded=True)
            for (hour, team_id, actor, action), n in sums.items() if n
        ])
    return len(deltas)


def audit_counts_from_log(*, after_id: int = 0) -> int:
    """Count the log's entries with ids above `after_id` into folded rows, in one INSERT ... SELECT ... GROUP BY.

    For entries written behind the model's back (the benchmark's bulk SQL); the same statement as migration
    0028's. Returns the rows inserted.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO scheduler_auditcount (hour, team_id, actor, action, n, folded)"
            f" SELECT {_HOUR_SQL[connection.vendor]}, team_id, actor, action, COUNT(*), TRUE"
            " FROM scheduler_auditentry WHERE id > %s GROUP BY 1, 2, 3, 4 ORDER BY 1", [after_id])
        return cursor.rowcount


__all__ = ["audit_counts_fold", "audit_counts_from_log"]
