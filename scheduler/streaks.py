"""Since when a schedule fails, and its recent runs with repeated BLOCKED runs folded (issue 37, point 3).

Both are read in a constant number of statements whatever the number of schedules or runs: the pages call them
once for every schedule they show, never once per schedule. Each count has a bound of the ledger's indexes (one
schedule's FAILED runs since a time, its BLOCKED runs since a time): no read walks a schedule's whole history.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Case, Count, Exists, F, IntegerField, Max, Min, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Coalesce, Substr

from scheduler.core.errors import first_line
from scheduler.models import LatestOutcome, Run, RunStatus

S = RunStatus
# A streak is counted back this far at most: past it the page says "for more than 7 days" with the count so far
STREAK_LOOKBACK = timedelta(days=7)
ERROR_SHOWN = 300  # characters of the last failure's error shown when it gave no reason
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
RECENT_RUNS = 10  # runs a schedule page lists, BLOCKED runs aside (those are folded between them)


@dataclass(frozen=True)
class Streak:
    """The failures of a schedule since its last success: the first one's end, how many, the last one."""

    schedule_id: int
    run_id: int  # the last failed run
    error: str  # its reason, or the start of its error
    last_at: datetime | None
    since: datetime | None  # when the first failure of the streak ended (within STREAK_LOOKBACK)
    count: int
    longer: bool  # the streak began before STREAK_LOOKBACK: `since` and `count` are of that part only

    @property
    def lookback_days(self) -> int:
        return STREAK_LOOKBACK.days


def failure_streaks(last_failures: dict[int, int], *, now: datetime, live: bool = True) -> dict[int, Streak]:
    """{schedule id: its last failed run id} -> {schedule id: Streak}, in two statements.

    The streak is the schedule's FAILED runs that ended after its last success that ended before the last failure
    (`live`: backfill windows count neither as failures nor as successes, as the overview's verdict)."""
    if not last_failures:
        return {}
    success = Run.objects.filter(schedule_id=OuterRef("schedule_id"), status=S.SUCCEEDED,
                                 finished_at__lt=OuterRef("finished_at"))
    if live:
        success = success.filter(backfill__isnull=True)
    # run_sched_status_idx (schedule, status, finished_at), backwards: one seek per shown schedule
    older = Run.objects.filter(schedule_id=OuterRef("schedule_id"), status=S.FAILED,
                               finished_at__lt=OuterRef("finished_at") - STREAK_LOOKBACK,
                               finished_at__gt=Coalesce(OuterRef("ok_at"), Value(EPOCH)))
    if live:
        older = older.filter(backfill__isnull=True)
    rows = list(Run.objects.filter(pk__in=list(last_failures.values())).annotate(
        ok_at=Subquery(success.order_by("-finished_at").values("finished_at")[:1]),
        error_head=Substr("error", 1, ERROR_SHOWN),
    ).annotate(longer=Exists(older)).values_list("pk", "schedule_id", "finished_at", "reason", "error_head", "ok_at",
                                                 "longer"))
    ranges, facts = Q(), {}
    for pk, schedule_id, finished, reason, error, ok_at, longer in rows:
        if finished is None:
            continue
        floor = finished - STREAK_LOOKBACK
        bound = Q(schedule_id=schedule_id, status=S.FAILED, finished_at__gte=max(floor, ok_at or floor),
                  finished_at__lte=finished)
        if ok_at is not None and ok_at >= floor:
            bound &= Q(finished_at__gt=ok_at)
        ranges |= bound
        # the cause: a reason's first line (its context is on the run's page), or else the start of the error
        facts[schedule_id] = (pk, first_line(reason) if reason else (error or "").strip(), finished, bool(longer))
    if not facts:
        return {}
    counted = Run.objects.filter(ranges)
    if live:
        counted = counted.filter(backfill__isnull=True)
    got = {sid: (n, first) for sid, n, first in counted.order_by().values_list("schedule_id").annotate(
        n=Count("id"), first=Min("finished_at")).values_list("schedule_id", "n", "first")}
    out = {}
    for schedule_id, (pk, error, finished, longer) in facts.items():
        n, first = got.get(schedule_id, (1, finished))
        out[schedule_id] = Streak(schedule_id=schedule_id, run_id=pk, error=error, last_at=finished,
                                  since=first, count=max(n, 1), longer=longer)
    return out


def failing_streaks(schedule_ids, *, now: datetime) -> dict[int, Streak]:
    """The streaks of those of `schedule_ids` whose latest live verdict is a failure (LatestOutcome, one row per
    schedule), in three statements."""
    ids = list(schedule_ids)
    if not ids:
        return {}
    failing = dict(LatestOutcome.objects.filter(schedule_id__in=ids, live_failure__isnull=False)
                   .filter(Q(live_success__isnull=True) | Q(live_failure__gt=F("live_success")))
                   .values_list("schedule_id", "live_failure_id"))
    return failure_streaks(failing, now=now)


def with_verdicts(qs):
    """Schedules annotated with their latest live failure and success (a join to LatestOutcome, no statement of
    its own), for `verdict_streaks`."""
    return qs.annotate(verdict_failure=F("outcome__live_failure"), verdict_success=F("outcome__live_success"))


def verdict_streaks(schedules, *, now: datetime) -> dict[int, Streak]:
    """The streaks of those `schedules` (from `with_verdicts`) whose latest live verdict is a failure."""
    return failure_streaks({s.pk: s.verdict_failure for s in schedules if s.verdict_failure and (
        not s.verdict_success or s.verdict_failure > s.verdict_success)}, now=now)


@dataclass(frozen=True)
class BlockedFold:
    """Consecutive BLOCKED runs of a schedule shown as one row."""

    count: int
    first_at: datetime
    last_at: datetime
    latest_id: int
    reason: str


def recent_runs_folded(schedule, *, now: datetime, limit: int = RECENT_RUNS) -> list[dict]:
    """The schedule's last `limit` runs that were not BLOCKED, newest first, with the BLOCKED runs between them
    folded into one row each ({"run": Run} or {"blocked": BlockedFold}), in at most three statements: a breaker
    open for hours blocks a fire every few seconds, and those rows pushed the failures out of sight."""
    shown = list(Run.objects.filter(schedule=schedule).exclude(status=S.BLOCKED).select_related("schedule")
                 .order_by("-id")[:limit])
    # between the oldest run shown and now; with fewer runs than `limit`, a week before the oldest at most
    floor = shown[-1].queued_at if len(shown) == limit else (shown[-1].queued_at if shown else now) - STREAK_LOOKBACK
    ids = [run.pk for run in shown]
    slot = Case(*[When(id__gt=pk, then=Value(i)) for i, pk in enumerate(ids)], default=Value(len(ids)),
                output_field=IntegerField())
    blocked = (Run.objects.filter(schedule=schedule, status=S.BLOCKED, queued_at__gte=floor)
               .filter(id__gt=ids[-1] if len(shown) == limit else 0)
               .annotate(slot=slot).order_by().values_list("slot")
               .annotate(n=Count("id"), first=Min("queued_at"), last=Max("queued_at"), top=Max("id")))
    # (with no run shown the slot is a constant: one row of NULLs when nothing was blocked either)
    groups = {slot: (n, first, last, top) for slot, n, first, last, top in blocked if top is not None}
    reasons = dict(Run.objects.filter(pk__in=[g[3] for g in groups.values()]).values_list("pk", "reason")) \
        if groups else {}
    out: list[dict] = []
    for i in range(len(ids) + 1):
        if i in groups:
            n, first, last, top = groups[i]
            out.append({"blocked": BlockedFold(count=n, first_at=first, last_at=last, latest_id=top,
                                               reason=reasons.get(top, ""))})
        if i < len(ids):
            out.append({"run": shown[i]})
    return out


__all__ = ["STREAK_LOOKBACK", "BlockedFold", "Streak", "failing_streaks", "failure_streaks", "recent_runs_folded",
           "verdict_streaks", "with_verdicts"]
