"""Backfills: windows created up front, pumped into the queue oldest first.

A backfill run carries its own fixed window (run.window_low/high) and never
moves the live watermark (execution.py checks run.backfill_id).
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from scheduler.core import INT64_MAX, ConfigError, split_windows
from scheduler.core.limits import MAX_SECONDS
from scheduler.models import (
    Backfill,
    BackfillStatus,
    BackfillWindow,
    Run,
    RunStatus,
    Schedule,
    TriggerKind,
    WindowStatus,
)
from scheduler.services.common.audit import actor_name, audit_record
from scheduler.services.common.errors import Conflict, ErrorCollector, NotFound, ServiceError, check_text
from scheduler.services.history.backfill_progress import OPEN_WINDOWS, backfill_complete_if_done, backfill_progress
from scheduler.services.runs.stop import run_cancel
from scheduler.services.runs.queue import check_target_params, run_enqueue, validate_params
from scheduler.services.runs.queue import schedule_get
from scheduler.services.runs.watermarks import encode_value, parse_user_value, watermark_config

S = RunStatus
#: what a new backfill runs: every window of the range, or only those without a SUCCEEDED run ("failed and missing")
REPROCESS = ("all", "failed")
AUDITED_SKIPS = 100  # the audit entry names at most this many skipped windows (window start -> its succeeded run)
# --- submit -------------------------------------------------------------------

def _window_size(config, window: Any) -> timedelta | int:
    if isinstance(window, bool):
        raise ServiceError(f"must be a positive number, got {window!r}", field="window")
    if config.is_datetime:
        if isinstance(window, timedelta):
            seconds = window.total_seconds()
        else:
            try:
                seconds = float(str(window).strip())
            except ValueError:
                raise ServiceError(f"must be a number of seconds, got {window!r}", field="window") from None
        if math.isnan(seconds) or seconds <= 0 or math.isinf(seconds):
            raise ServiceError(f"must be a positive number of seconds, got {window!r}", field="window")
        if seconds > MAX_SECONDS:
            raise ServiceError(f"must be at most {MAX_SECONDS} seconds (the largest allowed), got {window!r}",
                               field="window")
        try:
            return timedelta(seconds=seconds)
        except OverflowError:
            raise ServiceError(f"is too large, got {window!r}", field="window") from None
    try:
        size = int(str(window).strip())
    except ValueError:
        raise ServiceError(f"must be a whole number (integer watermark), got {window!r}", field="window") from None
    if size <= 0:
        raise ServiceError(f"must be a positive whole number, got {window!r}", field="window")
    if size > INT64_MAX:  # stored as text of at most 32 characters; a 64-bit key range needs no more
        raise ServiceError(f"must be at most {INT64_MAX} (64-bit integer watermark), got {window!r}", field="window")
    return size


def _positive_int(value: Any, field: str) -> int:
    if isinstance(value, bool):
        raise ServiceError(f"must be a whole number >= 1, got {value!r}", field=field)
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ServiceError(f"must be a whole number >= 1, got {value!r}", field=field) from None
    if not 1 <= number <= 2**31 - 1:  # the column is a 32-bit integer
        raise ServiceError(f"must be a whole number from 1 to {2**31 - 1}, got {value!r}", field=field)
    return number


def _text_pair(pair) -> tuple[str, str]:
    return tuple(v if isinstance(v, str) else encode_value(v) for v in pair)  # type: ignore[return-value]


def backfill_already_succeeded(schedule: Schedule, pairs) -> dict[tuple[str, str], int]:
    """The windows of `pairs` that have a SUCCEEDED run of this schedule for exactly that window: (low, high) as
    stored text -> the latest such run's id. A window merely inside a longer succeeded run's does not count."""
    wanted = {_text_pair(pair) for pair in pairs}
    found: dict[tuple[str, str], int] = {}
    succeeded = (Run.objects.filter(schedule=schedule, status=S.SUCCEEDED).exclude(window_low="", window_high="")
                 .order_by("id").values_list("window_low", "window_high", "id"))
    for low, high, run_id in succeeded.iterator():
        if (low, high) in wanted:
            found[(low, high)] = run_id
    return found


def _reprocess(value: Any) -> str:
    if not isinstance(value, str) or value.strip() not in REPROCESS:
        raise ServiceError(f"must be 'all' (every window) or 'failed' (only windows without a succeeded run), "
                           f"got {value!r}", field="reprocess")
    return value.strip()


def backfill_submit(*, schedule: Schedule | str | int, start: Any, end: Any, window: Any, reason: str,
                    requested_by: Any, max_parallel: Any = 1, params: dict | None = None,
                    newest_first: bool = False, reprocess: Any = "all", now: datetime | None = None) -> Backfill:
    """Split the range into windows, store them all, and let the dispatcher pump them.

    Datetime ranges are [start, end): a backfill of March is from March 1
    00:00 to April 1 00:00 and loads exactly March. Integer ranges are
    (start, end], like an integer mark. `params` go to every window's run
    over the schedule's own (a different target table, say); the pipeline
    sees `ctx.backfill` set. `newest_first` queues the latest window first (the
    most recent data comes back soonest); by default the oldest goes first.
    `reprocess="failed"` creates only the windows with no SUCCEEDED run of this
    schedule for exactly that window (failed or missing ones); the others are
    not created, so the backfill's total and progress count only what it runs
    (the skipped ones and their runs are in the audit entry; the returned
    backfill's `skipped_windows` says how many). "all" (the default) runs
    every window.
    """
    schedule = schedule_get(schedule)
    config = watermark_config(schedule)
    if config is None:
        raise ServiceError(f"schedule '{schedule.name}' has no watermark config; a backfill replays watermark windows",
                           field="schedule")
    # every input is checked and every problem reported together, so a form can mark each field at once
    found = ErrorCollector()
    low = high = size = parallel = None
    with found.check():
        low = parse_user_value(config, start, field="from")
    with found.check():
        high = parse_user_value(config, end, field="to")
    with found.check():
        size = _window_size(config, window)
    with found.check():
        parallel = _positive_int(max_parallel, "max_parallel")
    with found.check():
        params = check_target_params(schedule, validate_params(params))
    with found.check():
        if not isinstance(newest_first, bool):
            raise ServiceError(f"must be true or false, got {newest_first!r}", field="newest_first")
    with found.check():
        reprocess = _reprocess(reprocess)
    with found.check():
        if not reason or not str(reason).strip():
            raise ServiceError("a reason is required", field="reason")
        check_text(reason, field="reason")
    if not found.failed("from", "to") and low >= high:
        # the end is the field at fault: it is checked against the start, as a date range is read
        found.errors.insert(0, ServiceError(
            f"must be after from ({encode_value(high)} <= {encode_value(low)})", field="to"))
    found.raise_any()
    try:
        pairs = split_windows(low, high, size, max_windows=settings.ETL_MAX_BACKFILL_WINDOWS)
    except ConfigError as exc:
        raise ServiceError(str(exc), field=exc.field) from None
    skipped: dict[tuple[str, str], int] = {}
    if reprocess == "failed":
        skipped = backfill_already_succeeded(schedule, pairs)
        if len(skipped) == len(pairs):
            raise ServiceError(f"all {len(pairs)} windows already succeeded; nothing to reprocess "
                               f"(choose 'all' to run them again)", field="reprocess")
        pairs = [pair for pair in pairs if _text_pair(pair) not in skipped]
    now = now or timezone.now()
    who = actor_name(requested_by)[0]
    seconds = size.total_seconds() if isinstance(size, timedelta) else None
    window_text = str(size) if seconds is None else str(int(seconds)) if seconds.is_integer() else str(seconds)
    with transaction.atomic():
        backfill = Backfill.objects.create(
            schedule=schedule, range_from=encode_value(low), range_to=encode_value(high), window_size=window_text,
            reason=str(reason).strip()[:500], requested_by=who[:150], max_parallel=parallel,
            total_windows=len(pairs), created_at=now, params=params, newest_first=newest_first,
        )
        _insert_windows(backfill.pk, pairs)
        audit_record(actor=requested_by, action="backfill.submit", target=backfill,
                     after={"schedule": schedule.name, "from": backfill.range_from, "to": backfill.range_to,
                            "window": window_text, "windows": len(pairs), "max_parallel": parallel,
                            "params": params, **({"order": "newest first"} if newest_first else {}),
                            **({"reprocess": "failed", "skipped": len(skipped), "already_succeeded": {
                                low: run_id for (low, _), run_id in list(skipped.items())[:AUDITED_SKIPS]}}
                               if reprocess == "failed" else {})},
                     reason=backfill.reason, at=now)
    backfill.skipped_windows = len(skipped)  # not stored: the windows left out by reprocess="failed", for the caller
    return backfill


# --- the dispatcher's side ----------------------------------------------------

def backfill_pump(*, now: datetime) -> int:
    """Queue the next pending windows of each active backfill, up to its max_parallel."""
    created = 0
    for backfill in Backfill.objects.filter(status=BackfillStatus.ACTIVE).select_related("schedule"):
        in_flight = BackfillWindow.objects.filter(
            backfill=backfill, status__in=[WindowStatus.QUEUED, WindowStatus.RUNNING]
        ).count()
        free = backfill.max_parallel - in_flight
        if free <= 0:
            continue
        pending = list(BackfillWindow.objects.filter(backfill=backfill, status=WindowStatus.PENDING)
                       .order_by("-seq" if backfill.newest_first else "seq")[:free])
        if not pending:
            with transaction.atomic():
                backfill_complete_if_done(backfill, now=now)
            continue
        for window in pending:
            with transaction.atomic():
                attempt = window.attempts + 1
                # claim the window first: one cancelled between our read and here gets no run
                if not BackfillWindow.objects.filter(pk=window.pk, status=WindowStatus.PENDING).update(
                    status=WindowStatus.QUEUED, attempts=attempt
                ):
                    continue
                run = run_enqueue(
                    schedule=backfill.schedule, trigger_kind=TriggerKind.BACKFILL,
                    trigger_key=f"backfill:{backfill.pk}:{window.seq}:{attempt}", backfill=backfill,
                    params=backfill.params,
                    window=(window.low, window.high), triggered_by=backfill.requested_by, now=now,
                )
                if run is None:
                    transaction.set_rollback(True)  # queued already by another dispatcher: undo the claim
                    continue
                BackfillWindow.objects.filter(pk=window.pk).update(run=run)
                created += 1
    return created


def backfill_on_run_started(run) -> None:
    """The worker began a window's run (hook in execution.py)."""
    if run.backfill_id is None:
        return
    BackfillWindow.objects.filter(backfill_id=run.backfill_id, run_id=run.pk, status=WindowStatus.QUEUED).update(
        status=WindowStatus.RUNNING
    )


# --- operator actions -----------------------------------------------------------

def _locked(backfill: Backfill | int) -> Backfill:
    pk = backfill.pk if isinstance(backfill, Backfill) else backfill
    found = Backfill.objects.select_for_update().filter(pk=pk).first()
    if found is None:
        raise NotFound(f"unknown backfill {pk}", field="backfill")
    return found


def _change_status(backfill: Backfill | int, *, allowed: tuple[str, ...], new: str, action: str, actor: Any,
                   reason: str, now: datetime | None, fields: dict | None = None) -> Backfill:
    now = now or timezone.now()
    locked = _locked(backfill)
    if locked.status not in allowed:
        raise Conflict(f"backfill {locked.pk} is {locked.status}; cannot {action.split('.')[-1]} it",
                           field="backfill")
    Backfill.objects.filter(pk=locked.pk, status=locked.status).update(status=new, **(fields or {}))
    audit_record(actor=actor, action=action, target=locked, before={"status": locked.status},
                 after={"status": new}, reason=reason, at=now)
    locked.status = new
    for key, value in (fields or {}).items():
        setattr(locked, key, value)
    return locked


def backfill_pause(*, backfill: Backfill | int, actor: Any, reason: str = "", now: datetime | None = None) -> Backfill:
    """No new windows start; queued ones wait ("backfill N paused"), running ones finish."""
    with transaction.atomic():
        return _change_status(backfill, allowed=(BackfillStatus.ACTIVE,), new=BackfillStatus.PAUSED,
                              action="backfill.pause", actor=actor, reason=reason, now=now)


def backfill_resume(*, backfill: Backfill | int, actor: Any, reason: str = "", now: datetime | None = None) -> Backfill:
    with transaction.atomic():
        return _change_status(backfill, allowed=(BackfillStatus.PAUSED,), new=BackfillStatus.ACTIVE,
                              action="backfill.resume", actor=actor, reason=reason, now=now)


def backfill_retry_failed(*, backfill: Backfill | int, actor: Any, reason: str = "",
                          now: datetime | None = None) -> int:
    """Failed windows go back to PENDING (a new run each); a completed backfill becomes active again."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = _locked(backfill)
        if locked.status == BackfillStatus.CANCELLED:
            raise Conflict(f"backfill {locked.pk} is CANCELLED; submit a new one", field="backfill")
        count = BackfillWindow.objects.filter(backfill=locked, status=WindowStatus.FAILED).update(
            status=WindowStatus.PENDING
        )
        if count and locked.status == BackfillStatus.COMPLETED:
            Backfill.objects.filter(pk=locked.pk, status=BackfillStatus.COMPLETED).update(
                status=BackfillStatus.ACTIVE, finished_at=None
            )
        audit_record(actor=actor, action="backfill.retry_failed", target=locked, after={"windows": count},
                     reason=reason, at=now)
    return count


def backfill_cancel(*, backfill: Backfill | int, actor: Any, reason: str = "", now: datetime | None = None) -> Backfill:
    """Stop for good, leaving nothing stranded: queued and running runs and pending windows are cancelled."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = _change_status(backfill, allowed=(BackfillStatus.ACTIVE, BackfillStatus.PAUSED),
                                new=BackfillStatus.CANCELLED, action="backfill.cancel", actor=actor, reason=reason,
                                now=now, fields={"finished_at": now})
        why = f"backfill {locked.pk} cancelled" + (f": {reason}" if reason else "")
        for run in Run.objects.filter(backfill=locked, status__in=RunStatus.active()).select_related("schedule"):
            # a window not begun ends CANCELLED now; a running one is asked to stop (cancel means the code stops,
            # and its slot is free only when its work has ended); a worker finishing at this instant wins or
            # loses cleanly
            run_cancel(run=run, actor=actor, reason=why, now=now)
        BackfillWindow.objects.filter(backfill=locked, status__in=OPEN_WINDOWS).update(status=WindowStatus.CANCELLED)
    return locked


__all__ = [
    "REPROCESS", "backfill_already_succeeded", "backfill_cancel", "backfill_on_run_started", "backfill_pause",
    "backfill_progress", "backfill_pump",
    "backfill_resume", "backfill_retry_failed", "backfill_submit",
]


def _insert_windows(backfill_id: int, pairs) -> None:
    """All windows as plain tuples in multi-row INSERTs: building 87,600 model
    instances for bulk_create cost more than the inserts themselves."""
    table = BackfillWindow._meta.db_table
    pending = WindowStatus.PENDING.value
    rows = [(backfill_id, i, encode_value(a), encode_value(b), pending, 0) for i, (a, b) in enumerate(pairs)]
    head = f'INSERT INTO "{table}" ("backfill_id", "seq", "low", "high", "status", "attempts") VALUES '
    # multi-row VALUES: one round trip per 500 windows (executemany is one per row on PostgreSQL);
    # 500 x 6 parameters stays under SQLite's 32,766 bound-variable limit
    if connection.vendor == "postgresql":
        # COPY streams every window in one statement: 87,600 rows in a fraction of a second
        with connection.cursor() as cursor:
            columns = '"backfill_id", "seq", "low", "high", "status", "attempts"'
            with cursor.cursor.copy(f'COPY "{table}" ({columns}) FROM STDIN') as copy:
                for row in rows:
                    copy.write_row(row)
        return
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 500):
            chunk = rows[start:start + 500]
            cursor.execute(head + ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(chunk)),
                           [value for row in chunk for value in row])
