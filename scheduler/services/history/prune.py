"""Retention: old history pruned in bounded batches, never what the scheduler still stands on.

Each kind of record has its own age (settings ETL_RETENTION_*, docs/deploy.md "Sizing retention"); a schedule's
`retention_days` replaces the default for its runs and its alert deliveries. Every batch is its own short
transaction of at most ETL_PRUNE_BATCH rows, so a prune never holds a long lock: the cluster's `prune` loop
does a few batches a tick, `manage.py prune_history` goes on until nothing is left.

Never deleted, whatever its age (docs/semantics.md, "Retention"): a run that is not final; the latest run of
each schedule and its latest success; a run that a live run (WAITING, QUEUED, RUNNING) refers to as its
upstream, retry or re-run; a run of a backfill that is not finished (active or paused); the run that set a
schedule's current watermark; an event a live run came from. The audit log goes only through its archive.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q, QuerySet

from scheduler.models import (
    Alert, AlertStatus, AuditEntry, BackfillStatus, BackfillWindow, Event, GovernanceTick, LineageEvent, LineageStatus,
    NodeRecord, Run, RunLogLine, RunStatus, RunUpstream, Schedule, WatermarkState,
)
from scheduler.services.common.audit import audit_record
from scheduler.services.history.audit_archive import audit_archive_batch
from scheduler.services.common.errors import ServiceError
from scheduler.services.history.hour_counts import runs_uncounted
from scheduler.services.history.outcomes import outcomes_after_prune

#: The kinds a prune reports, in the order it prunes them.
KINDS: tuple[str, ...] = ("runs", "log_lines", "node_records", "ticks", "events", "alerts", "lineage", "audit")
UNFINISHED_BACKFILL = (BackfillStatus.ACTIVE, BackfillStatus.PAUSED)

Progress = Callable[[str, int], None]
AGE_RE = re.compile(r"^\s*(\d{1,5})\s*([hdw])\s*$")
AGE_UNITS = {"h": "hours", "d": "days", "w": "weeks"}


def parse_age(text: str, *, field: str = "older_than") -> timedelta:
    """'30d', '12h', '2w': an age of at least one hour and at most 100 years."""
    match = AGE_RE.match(str(text))
    age = timedelta(**{AGE_UNITS[match.group(2)]: int(match.group(1))}) if match else None
    if age is None or age < timedelta(hours=1) or age > timedelta(days=36_500):
        raise ServiceError(f"must be an age such as 30d, 12h or 2w, from 1h to 36500d (100 years), got {text!r}",
                           field=field)
    return age


@dataclass(frozen=True)
class Policy:
    """How long each kind is kept; None keeps it for ever."""

    runs: timedelta | None
    ticks: timedelta | None
    events: timedelta | None
    alerts: timedelta | None
    lineage: timedelta | None
    audit: timedelta | None  # None also when no archive is configured: the audit log is never pruned then
    archive_dir: str = ""


def _days(value: int) -> timedelta | None:
    return timedelta(days=value) if value else None


def retention_policy(*, older_than: timedelta | None = None) -> Policy:
    """The retention in force (settings), or `older_than` for every kind (the audit log still only if archived)."""
    archive = settings.ETL_AUDIT_ARCHIVE_DIR
    if older_than is not None:
        return Policy(runs=older_than, ticks=older_than, events=older_than, alerts=older_than, lineage=older_than,
                      audit=older_than if archive else None, archive_dir=archive)
    return Policy(
        runs=_days(settings.ETL_RETENTION_RUNS_DAYS),
        ticks=_days(settings.ETL_RETENTION_TICKS_DAYS),
        events=_days(settings.ETL_RETENTION_EVENTS_DAYS),
        alerts=_days(settings.ETL_RETENTION_ALERTS_DAYS),
        lineage=timedelta(hours=settings.ETL_LINEAGE_RETENTION_HOURS),
        audit=_days(settings.ETL_RETENTION_AUDIT_DAYS) if archive else None,
        archive_dir=archive,
    )


def schedule_runs_retention(schedule: Schedule) -> int | None:
    """Days a schedule's finished runs are kept (its own setting, else the default); None: for ever."""
    return schedule.retention_days or settings.ETL_RETENTION_RUNS_DAYS or None


def retention_summary() -> list[dict[str, Any]]:
    """The retention in force, one row per kind, as the overview shows it (settings only: no query)."""
    policy = retention_policy()

    def text(age: timedelta | None) -> str:
        if age is None:
            return "kept for ever"
        if age % timedelta(days=1):
            return f"{age.total_seconds() / 3600:g} hours"
        return f"{age.days} day{'s' if age.days != 1 else ''}"

    audit = text(policy.audit) + (f", archived to {policy.archive_dir}" if policy.audit else " (no archive set)")
    return [
        {"kind": "runs, logs and node records", "kept": text(policy.runs),
         "note": "a schedule's own retention_days replaces it"},
        {"kind": "governance ticks", "kept": text(policy.ticks), "note": ""},
        {"kind": "received events", "kept": text(policy.events), "note": ""},
        {"kind": "alert deliveries", "kept": text(policy.alerts), "note": "or the schedule's retention_days"},
        {"kind": "lineage outbox (sent)", "kept": text(policy.lineage), "note": ""},
        {"kind": "audit log", "kept": audit, "note": ""},
    ]


def run_pruned_note(run: Run) -> str:
    """What the run page says when this run's older neighbours of its schedule were pruned; empty otherwise."""
    through = run.schedule.runs_pruned_through
    if not through:
        return ""
    previous = (Run.objects.filter(schedule_id=run.schedule_id, pk__lt=run.pk).order_by("-pk")
                .values_list("pk", flat=True).first())
    if previous is not None and previous > through:
        return ""  # its neighbour is still here: the gap, if any, is further back
    days = schedule_runs_retention(run.schedule)
    return f"older runs pruned after {days} days" if days else "older runs pruned"


def latest_prune():
    """The `history.prune` entries, newest first, as (at, counts): one seek into `audit_prune_idx` for the first on
    PostgreSQL (the loop writes one every ETL_PRUNE_INTERVAL that deletes rows, and the log keeps them all); SQLite's
    `action` index holds them in id order already."""
    return AuditEntry.objects.filter(action="history.prune").order_by("-id").values_list("at", "after")


def history_status(now: datetime) -> dict[str, Any]:
    """Whether retention keeps up (for /metrics): the oldest run's age, and the latest prune that deleted rows."""
    # run_queued_at_idx: the oldest run is the first entry of the index
    oldest = Run.objects.order_by("queued_at").values_list("queued_at", flat=True).first()
    last = latest_prune().first()
    return {
        "oldest_run_age_seconds": max((now - oldest).total_seconds(), 0.0) if oldest else 0.0,
        "last_prune_age_seconds": max((now - last[0]).total_seconds(), 0.0) if last else -1.0,
        "last_prune": {kind: int((last[1] or {}).get(kind, 0)) for kind in KINDS} if last else dict.fromkeys(KINDS, 0),
    }


# --- what is never deleted ---------------------------------------------------------------------------------------

def _referenced_by_live_runs() -> set[int]:
    """Runs a live run stands on: its upstream runs, the run it retries, the run it re-runs."""
    live = Run.objects.filter(status__in=RunStatus.active())
    found = set(RunUpstream.objects.filter(run__status__in=RunStatus.active(), upstream_run__isnull=False)
                .values_list("upstream_run_id", flat=True))
    for field in ("retry_of_id", "rerun_of_id"):
        found.update(live.filter(**{f"{field[:-3]}__isnull": False}).values_list(field, flat=True))
    return found


def _pinned_each_batch() -> set[int]:
    """What can change from one moment to the next: read again inside every batch's transaction."""
    found = _referenced_by_live_runs()
    found.update(WatermarkState.objects.filter(updated_by_run__isnull=False)
                 .values_list("updated_by_run_id", flat=True))
    found.update(BackfillWindow.objects.filter(backfill__status__in=UNFINISHED_BACKFILL, run__isnull=False)
                 .values_list("run_id", flat=True))
    return found


def protected_run_ids() -> set[int]:
    """Every run a prune must keep whatever its age (besides the runs that are not final)."""
    found: set[int] = set()
    # one index seek per schedule (run_sched_recent_idx, run_sched_status_idx), never a scan of the history
    for schedule_id in Schedule.objects.values_list("pk", flat=True):
        latest = Run.objects.filter(schedule_id=schedule_id).order_by("-id").values_list("pk", flat=True).first()
        success = (Run.objects.filter(schedule_id=schedule_id, status=RunStatus.SUCCEEDED)
                   .order_by("-finished_at", "-id").values_list("pk", flat=True).first())
        found.update(pk for pk in (latest, success) if pk is not None)
    return found | _pinned_each_batch()


# --- the candidates of each kind ------------------------------------------------------------------------------

def _aged(field: str, cutoff: datetime) -> Q:
    return Q(**{f"{field}__lt": cutoff})


def _per_schedule(default: timedelta | None, now: datetime, aged: Callable[[datetime], Q], prefix: str,
                  bound: str) -> Q | None:
    """Rows older than their schedule's retention: its own `retention_days`, else `default` (None: keep).

    `bound` (an indexed time column no later than the one `aged` reads) is also held under the loosest cutoff,
    so that once the old rows are gone a pass reads the index's few old entries, not the whole table.
    """
    terms: list[Q] = []
    ages: list[timedelta] = []
    if default is not None:
        terms.append(Q(**{f"{prefix}retention_days__isnull": True}) & aged(now - default))
        ages.append(default)
    for days in (Schedule.objects.filter(retention_days__isnull=False).order_by()
                 .values_list("retention_days", flat=True).distinct()):
        terms.append(Q(**{f"{prefix}retention_days": days}) & aged(now - timedelta(days=days)))
        ages.append(timedelta(days=days))
    if not terms:
        return None
    combined = terms[0]
    for term in terms[1:]:
        combined |= term
    return combined & Q(**{f"{bound}__lt": now - min(ages)})


def run_candidates(policy: Policy, now: datetime) -> QuerySet:
    """Final runs past their retention, outside an unfinished backfill (the protected ones still to be removed)."""
    # a run is queued before it ends: queued_at (indexed) bounds the scan
    cond = _per_schedule(policy.runs, now, lambda c: Q(finished_at__lt=c) | Q(finished_at__isnull=True,
                                                                               queued_at__lt=c), "schedule__",
                         "queued_at")
    if cond is None:
        return Run.objects.none()
    return (Run.objects.filter(cond, status__in=RunStatus.final())
            .exclude(backfill__status__in=UNFINISHED_BACKFILL))


def _alert_candidates(policy: Policy, now: datetime) -> QuerySet:
    done = Q(status=AlertStatus.SENT) | Q(status=AlertStatus.FAILED, next_attempt_at__isnull=True)
    # an alert of no schedule reads retention_days as empty through the join: the default applies
    aged = _per_schedule(policy.alerts, now, lambda c: Q(created_at__lt=c), "schedule__", "created_at")
    if aged is None:
        return Alert.objects.none()
    return Alert.objects.filter(done, aged)


def simple_candidates(policy: Policy, now: datetime) -> dict[str, QuerySet]:
    """The kinds pruned by age alone (the audit log goes through its archive)."""
    none = {"ticks": GovernanceTick.objects.none(), "events": Event.objects.none(),
            "lineage": LineageEvent.objects.none()}
    out = dict(none)
    if policy.ticks:
        out["ticks"] = GovernanceTick.objects.filter(_aged("started_at", now - policy.ticks))
    if policy.events:
        # an event a live run came from stays until that run has ended
        out["events"] = (Event.objects.filter(_aged("received_at", now - policy.events))
                         .exclude(runs__status__in=RunStatus.active()))
    if policy.lineage is not None:  # 0 hours: sent rows go at once, as the lineage loop reads the setting
        out["lineage"] = LineageEvent.objects.filter(status=LineageStatus.SENT, sent_at__lt=now - policy.lineage)
    out["alerts"] = _alert_candidates(policy, now)
    return out


# --- pruning ---------------------------------------------------------------------------------------------------

def _delete_ids(queryset: QuerySet, ids: list[int]) -> int:
    return queryset.model.objects.filter(pk__in=ids).delete()[0] if ids else 0


def _runs_batch(candidates: QuerySet, protected: set[int], after: int, batch: int,
                dry_run: bool) -> tuple[dict[str, int], int] | None:
    """One batch of runs past `after` (by id); None when no candidate is left. Returns (counts, last id read)."""
    ids = list(candidates.filter(pk__gt=after).order_by("pk").values_list("pk", flat=True)[:batch])
    if not ids:
        return None
    with transaction.atomic():
        pinned = protected | _pinned_each_batch()
        chosen = [pk for pk in ids if pk not in pinned]
        if dry_run:
            counts = {"log_lines": RunLogLine.objects.filter(run_id__in=chosen).count(),
                      "node_records": NodeRecord.objects.filter(run_id__in=chosen).count(), "runs": len(chosen)}
            return counts, ids[-1]
        # still final and still outside an unfinished backfill, read under this transaction; locked, so a prune
        # beside this one waits and then finds them gone instead of taking their hour counts back a second time
        chosen = list(candidates.filter(pk__in=chosen).select_for_update(of=("self",)).values_list("pk", flat=True))
        counts = {"log_lines": RunLogLine.objects.filter(run_id__in=chosen).delete()[0],
                  "node_records": NodeRecord.objects.filter(run_id__in=chosen).delete()[0]}
        through = sorted(Run.objects.filter(pk__in=chosen).order_by().values("schedule_id")
                         .annotate(top=Max("pk")).values_list("schedule_id", "top"))
        runs_uncounted(chosen)  # the timeline's hour counts keep matching the ledger
        _, by_model = Run.objects.filter(pk__in=chosen).delete()
        counts["runs"] = by_model.get(Run._meta.label, 0)
        # a schedule's latest live success or latest failure may be among them: its kept row moves to the next
        # one the ledger holds (the last locks the batch takes, as a run's end takes them last)
        outcomes_after_prune(chosen)
    # Each schedule's note ("older runs pruned") after the batch has committed, one row per statement: a batch
    # that held up to every schedule's row lock through its whole delete deadlocked with dispatch's multi-row
    # UPDATE of due schedules, and made a due schedule wait for the batch (issue 25).
    for schedule_id, top in through:
        (Schedule.objects.filter(pk=schedule_id)
         .filter(Q(runs_pruned_through__isnull=True) | Q(runs_pruned_through__lt=top))
         .update(runs_pruned_through=top))
    return counts, ids[-1]


def _prune_runs(policy: Policy, now: datetime, batch: int, max_batches: int | None, dry_run: bool,
                progress: Progress | None) -> dict[str, int]:
    totals = {"runs": 0, "log_lines": 0, "node_records": 0}
    candidates = run_candidates(policy, now)
    protected = protected_run_ids()
    after, done = 0, 0
    while max_batches is None or done < max_batches:
        result = _runs_batch(candidates, protected, after, batch, dry_run)
        if result is None:
            break
        counts, after = result
        done += 1
        for kind, n in counts.items():
            totals[kind] += n
        if progress:
            progress("runs", counts["runs"])
    return totals


def _prune_simple(kind: str, queryset: QuerySet, batch: int, max_batches: int | None, dry_run: bool,
                  progress: Progress | None) -> int:
    total, after, done = 0, 0, 0
    while max_batches is None or done < max_batches:
        ids = list(queryset.filter(pk__gt=after).order_by("pk").values_list("pk", flat=True)[:batch])
        if not ids:
            break
        after = ids[-1]
        done += 1
        if dry_run:
            n = len(ids)
        else:
            with transaction.atomic():
                # read again under the transaction: a row that stopped qualifying (a live run now uses the event) stays
                n = _delete_ids(queryset, list(queryset.filter(pk__in=ids).values_list("pk", flat=True)))
        total += n
        if progress:
            progress(kind, n)
    return total


def _prune_audit(policy: Policy, now: datetime, batch: int, max_batches: int | None, dry_run: bool,
                 progress: Progress | None) -> int:
    if policy.audit is None:
        return 0
    cutoff = now - policy.audit
    if dry_run:
        total = audit_count_older(cutoff)
        if progress:
            progress("audit", total)
        return total
    total, done = 0, 0
    while max_batches is None or done < max_batches:
        n = audit_archive_batch(cutoff=cutoff, batch=batch, directory=policy.archive_dir)
        if not n:
            break
        done += 1
        total += n
        if progress:
            progress("audit", n)
    return total


def audit_count_older(cutoff: datetime) -> int:
    return AuditEntry.objects.filter(at__lt=cutoff).count()


def history_estimate(*, now: datetime, policy: Policy | None = None) -> dict[str, int]:
    """Rows past their age per kind, before the never-deleted list is applied: a progress bar's totals."""
    policy = policy or retention_policy()
    out = {kind: qs.count() for kind, qs in simple_candidates(policy, now).items()}
    out["runs"] = run_candidates(policy, now).count()
    out["audit"] = audit_count_older(now - policy.audit) if policy.audit else 0
    return out


def history_prune(*, now: datetime, policy: Policy | None = None, batch: int | None = None,
                  max_batches: int | None = None, dry_run: bool = False, progress: Progress | None = None,
                  actor: Any = "prune", always_audit: bool = False) -> dict[str, int]:
    """Prune every kind past its retention, in batches; returns the rows deleted (or, dry, that would be) per kind.

    `max_batches` bounds the batches of each kind (the loop's tick); None goes on until nothing is left. A prune
    that deleted anything (or `always_audit`) writes one audit entry `history.prune` with its counts.
    """
    policy = policy or retention_policy()
    batch = batch or settings.ETL_PRUNE_BATCH
    counts = dict.fromkeys(KINDS, 0)
    counts.update(_prune_runs(policy, now, batch, max_batches, dry_run, progress))
    for kind, queryset in simple_candidates(policy, now).items():
        counts[kind] = _prune_simple(kind, queryset, batch, max_batches, dry_run, progress)
    counts["audit"] = _prune_audit(policy, now, batch, max_batches, dry_run, progress)
    if not dry_run and (always_audit or any(counts.values())):
        ages = {field: (getattr(policy, field).total_seconds() if getattr(policy, field) else None)
                for field in ("runs", "ticks", "events", "alerts", "lineage", "audit")}
        audit_record(actor=actor, action="history.prune", target=("history", ""), after=counts,
                     before={"kept_seconds": ages}, at=now, reason="retention")
    return counts


def prune_tick(*, now: datetime, holder: str = "") -> dict[str, int]:
    """The `prune` loop's tick: a bounded number of batches of each kind."""
    return history_prune(now=now, max_batches=settings.ETL_PRUNE_MAX_BATCHES, actor="prune")


__all__ = ["KINDS", "Policy", "history_estimate", "history_prune", "history_status", "parse_age",
           "protected_run_ids", "prune_tick", "retention_policy", "retention_summary", "run_candidates",
           "run_pruned_note", "schedule_runs_retention", "simple_candidates"]
