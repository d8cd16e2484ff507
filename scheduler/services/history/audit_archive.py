"""The audit log's archive: entries past ETL_RETENTION_AUDIT_DAYS go to gzip JSON Lines, one file per month.

The audit log is append-only (models/audit.py refuses every update and delete). With ETL_AUDIT_ARCHIVE_DIR set,
the prune writes old entries to <dir>/audit-YYYY-MM.jsonl.gz, flushes and fsyncs the file (and the directory
when the file is new), and only then deletes those rows; without the setting the log is never pruned. A crash
between the fsync and the delete writes the same entries again on the next pass: readers keep the first line
of each id (`audit_archive_read`). The archive holds what the audit log holds (names, reasons, before/after):
its files are written 0600 in a directory of mode 0700, whatever the umask, so only the server's user reads them.
"""
from __future__ import annotations

import gzip
import json
import os
import stat
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


FILE_MODE = 0o600
DIR_MODE = 0o700


def _private_dir(target: Path) -> None:
    """Create the archive directory 0700, or take group and others' access away from an existing one."""
    try:
        target.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        if stat.S_IMODE(target.stat().st_mode) & 0o077:
            os.chmod(target, stat.S_IMODE(target.stat().st_mode) & ~0o077)
    except OSError as exc:
        raise ServiceError(f"cannot create the archive directory {target} (mode 0700): {exc.strerror}",
                           field="ETL_AUDIT_ARCHIVE_DIR") from None


def _append(path: Path, records: list[dict[str, Any]]) -> None:
    """Append one gzip member (readers see the members as one stream) and make it durable before returning."""
    new = not path.exists()
    # 0600 from the first byte (never a moment readable by others), and a file of an older version made 0600 too
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
        os.fchmod(fd, FILE_MODE)
    with os.fdopen(fd, "ab") as raw:
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
    _private_dir(target)
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
