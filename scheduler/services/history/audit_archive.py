"""The audit log's archive: entries past ETL_RETENTION_AUDIT_DAYS go to gzip JSON Lines, one file per month.

The audit log is append-only (models/audit.py refuses every update and delete). With ETL_AUDIT_ARCHIVE_DIR set,
the prune writes old entries to <dir>/audit-YYYY-MM.jsonl.gz, flushes and fsyncs the file (and the directory
when the file is new), and only then deletes those rows; without the setting the log is never pruned. A crash
between the fsync and the delete writes the same entries again on the next pass: readers keep the first line
of each id (`audit_archive_read`).
"""
from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from scheduler.models import AuditEntry, RefusalCount
from scheduler.models.audit import audit_delete_archived
from scheduler.services.common.errors import ServiceError

FIELDS = ("id", "at", "actor", "actor_kind", "action", "target_type", "target_id", "target_repr", "before", "after",
          "reason", "via", "team_id")


def archive_file(directory: str | Path, month: str) -> Path:
    return Path(directory) / f"audit-{month}.jsonl.gz"


def entry_record(entry: AuditEntry) -> dict[str, Any]:
    record = {name: getattr(entry, name) for name in FIELDS}
    record["at"] = entry.at.isoformat()
    return record


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _append(path: Path, records: list[dict[str, Any]]) -> None:
    """Append one gzip member (readers see the members as one stream) and make it durable before returning."""
    new = not path.exists()
    with open(path, "ab") as raw:
        with gzip.GzipFile(fileobj=raw, mode="ab") as gz:
            for record in records:
                gz.write((json.dumps(record, sort_keys=True, default=str) + "\n").encode())
        raw.flush()
        os.fsync(raw.fileno())
    if new:
        _fsync_dir(path.parent)


def audit_archive_batch(*, cutoff: datetime, batch: int, directory: str | Path, dry_run: bool = False) -> int:
    """Archive then delete up to `batch` entries older than `cutoff`, oldest first; returns how many."""
    entries = list(AuditEntry.objects.filter(at__lt=cutoff).order_by("id")[:batch])
    if not entries or dry_run:
        return len(entries)
    target = Path(directory)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ServiceError(f"cannot create the archive directory {target}: {exc.strerror}",
                           field="ETL_AUDIT_ARCHIVE_DIR") from None
    ids = [entry.pk for entry in entries]
    # a refusal entry's repeats (RefusalCount) are part of its record: archived with it, and removed with it
    refusals = dict(RefusalCount.objects.filter(audit_entry_id__in=ids).values_list("audit_entry_id", "count"))
    months: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        record = entry_record(entry)
        if entry.pk in refusals:
            record["refusals"] = refusals[entry.pk]
        months.setdefault(f"{entry.at:%Y-%m}", []).append(record)
    for month, records in sorted(months.items()):
        _append(archive_file(target, month), records)
    # written and fsynced: only now may the rows go
    deleted = audit_delete_archived(ids)
    RefusalCount.objects.filter(audit_entry_id__in=ids).delete()
    return deleted


def audit_archive_read(path: str | Path) -> Iterator[dict[str, Any]]:
    """The entries of one archive file in the order written, each id once; ServiceError naming the file if bad."""
    seen: set[int] = set()
    try:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    raise ServiceError(f"line {number} is not JSON", field=str(path)) from None
                if not isinstance(record, dict) or "id" not in record:
                    raise ServiceError(f"line {number} is not an audit entry", field=str(path)) from None
                if record["id"] in seen:
                    continue
                seen.add(record["id"])
                yield record
    except FileNotFoundError:
        raise ServiceError("no such file", field=str(path)) from None
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise ServiceError(f"not a gzip archive ({exc})", field=str(path)) from None


__all__ = ["archive_file", "audit_archive_batch", "audit_archive_read", "entry_record"]
