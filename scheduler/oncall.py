"""The overview and the on-call work: open breakers, what needs a person, stuck, lost and late runs."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from scheduler.core.errors import first_line
from scheduler.models import BackfillStatus, BreakerStatus, Run, RunStatus, Schedule
from scheduler.models.run import LOST_WORKER
from scheduler.timefmt import moment_text
from scheduler.selectors import (
    active_runs, as_written, backfills_with_progress, fold_runs, governance_health, owned_by, queue_by_class,
)

# --- overview ----------------------------------------------------------------


def open_breakers(team_ids=None):
    return owned_by(
        Schedule.objects.exclude(breaker_status=BreakerStatus.CLOSED)
        .only(
            "id",
            "name",
            "breaker_status",
            "breaker_failures",
            "breaker_opened_at",
            "breaker_current_cooldown_seconds",
        )
        .order_by("name"),
        team_ids, "owner_id",
    )


def overview(now: datetime | None = None, *, team_ids=None) -> dict:
    """The overview's parts; `team_ids` narrows everything but the shared queue and health to those teams."""
    now = now or timezone.now()
    running = []
    for run in active_runs(team_ids)[:100]:
        running.append(
            {
                "run": run,
                "elapsed": (now - run.started_at).total_seconds() if run.started_at else None,
                "heartbeat_age": (now - run.heartbeat_at).total_seconds() if run.heartbeat_at else None,
                "stale": bool(
                    run.heartbeat_at and (now - run.heartbeat_at).total_seconds() > settings.ETL_STUCK_SECONDS
                ),
            }
        )
    breakers = list(open_breakers(team_ids))
    return {
        "now": now,
        "running": running,
        "queue": queue_by_class(),
        "breakers": breakers,
        "latest": fold_runs(
            list(
                owned_by(Run.objects.all(), team_ids).select_related("schedule")
                .only("id", "status", "trigger_kind", "queued_at", "started_at", "finished_at",
                      "stop_requested_at", "stop_kind", "schedule__id", "schedule__name", "schedule__owner_id")
                .order_by("-id")[:100]
            )
        ),
        "health": governance_health(now),
        "attention": needs_attention(now, breakers=breakers, team_ids=team_ids),
    }


def blocked_or_skipped(status: str, *, before: int | None = None, size: int = 50, team_ids=None) -> dict:
    qs = owned_by(Run.objects.filter(status=status), team_ids).select_related("schedule", "blocked_by")
    if before is not None:
        qs = qs.filter(id__lt=before)
    rows = list(qs.order_by("-id")[: size + 1])
    return {"runs": rows[:size], "older": rows[size - 1].id if len(rows) > size else None}


# --- on-call: what needs a person, run logs, time ---------------------------

ATTENTION_LIMIT = 50


def failing_schedules(team_ids=None):
    """Enabled schedules whose latest verdict (success or failure, backfills aside) is a failure.

    From each schedule's kept latest success and failure (LatestOutcome, services/outcomes.py): a row per
    schedule, not two seeks into the ledger per schedule on every refresh (issue 25)."""

    return (
        owned_by(Schedule.objects.filter(enabled=True, outcome__live_failure__isnull=False), team_ids, "owner_id")
        .filter(Q(outcome__live_success__isnull=True) | Q(outcome__live_failure__gt=F("outcome__live_success")))
        .annotate(verdict_run=F("outcome__live_failure"), verdict_reason=F("outcome__live_failure__reason"))
        .only("id", "name")
        .order_by("name")
    )


def stuck_runs(now: datetime, team_ids=None):
    """RUNNING runs whose worker has been silent longer than the stuck threshold."""

    threshold = now - timedelta(seconds=settings.ETL_STUCK_SECONDS)
    return (
        owned_by(Run.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=threshold), team_ids)
        .select_related("schedule")
        .only("id", "heartbeat_at", "worker_id", "schedule__id", "schedule__name")
        .order_by("heartbeat_at")
    )


def lost_runs(now: datetime, *, hours: int = 24, team_ids=None):
    """Runs governance failed or re-queued for a lost worker in the last `hours`."""

    return (
        owned_by(Run.objects.filter(
            # run_lost_idx holds only these runs: the condition written as the index's (a parameter would not do)
            as_written(LOST_WORKER), queued_at__gte=now - timedelta(hours=hours),
            status__in=[RunStatus.FAILED, RunStatus.QUEUED],
        ), team_ids)
        .select_related("schedule")
        .only("id", "status", "reason", "schedule__id", "schedule__name")
        .order_by("-queued_at", "-id")
    )


def long_waiting_runs(now: datetime, team_ids=None) -> list[tuple[Run, float]]:
    """WAITING runs past half their schedule's max wait, with the seconds they have waited."""
    out = []
    for run in (
        # oldest first by id, which run_status_recent_idx (status, -id) gives: ordered by queued_at, SQLite walked
        # the whole queued_at index for want of a WAITING run (a run waits from its creation: same order)
        owned_by(Run.objects.filter(status=RunStatus.WAITING), team_ids)
        .select_related("schedule")
        .only("id", "queued_at", "reason", "schedule__id", "schedule__name", "schedule__max_wait_seconds")
        .order_by("id")[:500]
    ):
        waited = (now - run.queued_at).total_seconds()
        if waited > run.schedule.max_wait_seconds / 2:
            out.append((run, waited))
    return out


def backfills_with_failed_windows(team_ids=None):
    return [
        b for b in backfills_with_progress(team_ids).exclude(status=BackfillStatus.CANCELLED)[:200] if b.n_failed
    ]


def late_schedules(team_ids=None):
    """Schedules whose data is older than their freshness objective (governance stored the breach)."""

    return list(
        owned_by(Schedule.objects.filter(freshness_breached_at__isnull=False), team_ids, "owner_id").order_by(
            "freshness_breached_at", "name"
        )[:ATTENTION_LIMIT]
    )


MISSED_DEADLINE_SHOWN = timedelta(days=1)


def missed_deadlines(now: datetime, team_ids=None):
    """Runs governance found past their deadline in the last day that have not succeeded since (nor were
    cancelled: a person already decided about those), latest first."""

    return (
        owned_by(Run.objects.filter(deadline_missed_at__gte=now - MISSED_DEADLINE_SHOWN), team_ids)
        .exclude(status__in=[RunStatus.SUCCEEDED, RunStatus.CANCELLED])
        .select_related("schedule")
        .only("id", "status", "stop_requested_at", "logical_time", "deadline_missed_at", "reason", "schedule__id",
              "schedule__name", "schedule__deadline_seconds")
        .order_by("-deadline_missed_at", "-id")
    )


def deadline_text(run: Run, *, at: bool = False) -> str:
    """'missed its deadline (N s after logical time)', as the run page and the overview say it;
    `at` adds the logical time itself."""
    seconds = run.schedule.deadline_seconds
    when = f" {moment_text(run.logical_time)}" if at and run.logical_time else ""
    return f"missed its deadline ({seconds} s after logical time{when})" if seconds else "missed its deadline"


def needs_attention(now: datetime, *, breakers=None, team_ids=None) -> list[dict]:
    """Everything on the overview that needs a person, most urgent kind first; each item links somewhere."""

    def schedule_url(pk):
        return reverse("scheduler:schedule_detail", args=[pk])

    def run_url(pk):
        return reverse("scheduler:run_detail", args=[pk])

    items: list[dict] = []
    for run in stuck_runs(now, team_ids)[:ATTENTION_LIMIT]:
        items.append({"kind": "stuck", "label": "Stuck run", "href": run_url(run.pk),
                      "title": f"run #{run.pk} of {run.schedule.name}",
                      "detail": f"no heartbeat for {(now - run.heartbeat_at).total_seconds():.0f} s"
                                f"{' from ' + run.worker_id if run.worker_id else ''}"})
    broken = set()
    for s in (open_breakers(team_ids) if breakers is None else breakers)[:ATTENTION_LIMIT]:
        broken.add(s.pk)
        items.append({"kind": "breaker", "label": "Breaker " + s.get_breaker_status_display().lower(),
                      "href": schedule_url(s.pk), "title": s.name,
                      "detail": f"{s.breaker_failures} consecutive failures"})
    for s in failing_schedules(team_ids)[:ATTENTION_LIMIT]:
        if s.pk in broken:
            continue  # its open breaker already says so, once
        why = first_line(s.verdict_reason) or "no reason given"  # the cause; its context is on the run's page
        items.append({"kind": "failing", "label": "Failing", "href": run_url(s.verdict_run), "title": s.name,
                      "detail": f"last run #{s.verdict_run} failed: {why}"})
    for s in late_schedules(team_ids):
        items.append({"kind": "late", "label": "Data late", "href": schedule_url(s.pk), "title": s.name,
                      "detail": f"freshness objective ({s.freshness_max_age_seconds or 0} s, "
                                f"{s.freshness_measure.replace('_', ' ')}) breached since "
                                f"{moment_text(s.freshness_breached_at)}"})
    for run in missed_deadlines(now, team_ids)[:ATTENTION_LIMIT]:
        items.append({"kind": "deadline", "label": "Missed deadline", "href": run_url(run.pk),
                      "title": f"run #{run.pk} of {run.schedule.name}",
                      "detail": f"{deadline_text(run, at=True)}; it is {run.shown_status}"
                                f"{': ' + run.reason if run.reason else ''}"})
    for run, waited in long_waiting_runs(now, team_ids)[:ATTENTION_LIMIT]:
        items.append({"kind": "waiting", "label": "Waiting long", "href": run_url(run.pk),
                      "title": f"run #{run.pk} of {run.schedule.name}",
                      "detail": f"waiting {waited:.0f} s of at most {run.schedule.max_wait_seconds} s"
                                f"{': ' + run.reason if run.reason else ''}"})
    for run in lost_runs(now, team_ids=team_ids)[:ATTENTION_LIMIT]:
        items.append({"kind": "lost", "label": "Lost worker", "href": run_url(run.pk),
                      "title": f"run #{run.pk} of {run.schedule.name}", "detail": run.reason})
    for b in backfills_with_failed_windows(team_ids):
        items.append({"kind": "backfill", "label": "Backfill windows failed",
                      "href": reverse("scheduler:backfill_detail", args=[b.pk]),
                      "title": f"backfill {b.pk} of {b.schedule.name}",
                      "detail": f"{b.n_failed} of {b.total_windows} windows failed"})
    return items
