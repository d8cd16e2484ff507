"""What the pages say about a run beyond its row: is its time normal, and what its attempt count means (issue 37).

`typical_durations` reads the typical time of any number of schedules in two statements (never one per run shown).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from statistics import median

from django.db.models import OuterRef, Q, Subquery

from scheduler.models import Run, RunStatus, Schedule

S = RunStatus
TYPICAL_OF = 20  # a schedule's typical duration: the median of its last this many successful live runs
# A running run past this many times its schedule's typical duration is highlighted as unusual (README, On call):
# 3x leaves room for the ordinary spread of a day's volumes, and a hanging run passes it within minutes
UNUSUAL_FACTOR = 3.0


@dataclass(frozen=True)
class Elapsed:
    """A run's time so far beside its schedule's typical duration."""

    seconds: float
    typical: float | None

    @property
    def factor(self) -> float | None:
        return self.seconds / self.typical if self.typical else None

    @property
    def unusual(self) -> bool:
        return self.factor is not None and self.factor >= UNUSUAL_FACTOR

    @property
    def factor_text(self) -> str:
        """'17×', '2.5×'; empty while the run is within its typical time."""
        factor = self.factor
        if factor is None or factor < 1:
            return ""
        return f"{factor:.0f}×" if factor >= 10 else f"{factor:.1f}×"

    @property
    def unusual_factor(self) -> str:
        return f"{UNUSUAL_FACTOR:g}×"


def typical_durations(schedule_ids, *, last: int = TYPICAL_OF) -> dict[int, float]:
    """{schedule id: the median seconds of its last `last` successful live runs}, in two statements: the id of
    each schedule's `last`-th latest success (a walk of `last` entries of run_sched_verdict_idx), then the
    successes from there on, each schedule's its own index range."""
    ids = sorted(set(schedule_ids))
    if not ids:
        return {}
    succeeded = Run.objects.filter(status=S.SUCCEEDED, backfill__isnull=True, started_at__isnull=False,
                                   finished_at__isnull=False)
    nth = dict(Schedule.objects.filter(pk__in=ids).annotate(
        nth=Subquery(succeeded.filter(schedule=OuterRef("pk")).order_by("-id").values("id")[last - 1:last])
    ).values_list("pk", "nth"))
    since = Q()
    for schedule_id, first in nth.items():
        since |= Q(schedule_id=schedule_id, id__gte=first or 0)
    durations: dict[int, list[float]] = defaultdict(list)
    for schedule_id, start, end in succeeded.filter(since).order_by().values_list("schedule_id", "started_at",
                                                                                  "finished_at"):
        durations[schedule_id].append(max((end - start).total_seconds(), 0.0))
    return {schedule_id: median(values) for schedule_id, values in durations.items()}


def attempt_text(run: Run) -> tuple[str, str]:
    """(the attempt as the run page says it, a note beside it): 'attempt 1; not retried' for a failed run with
    attempts left, never '1 of 3' as though two more were coming."""
    begun = run.attempts_begun
    if run.status == S.FAILED and run.attempt < run.max_attempts:
        return f"{begun or 'none'}", f"not retried: {not_retried_why(run)}"
    if run.status == S.FAILED and run.max_attempts > 1:
        return f"{begun} of {run.max_attempts}", "every attempt spent"
    if run.status == S.FAILED:
        return f"{begun}", "its schedule allows no retry (max attempts 1)"
    if run.attempts_begun == run.attempt:
        return f"{run.attempt} of {run.max_attempts}", ""
    if not run.is_final:
        return f"{run.attempt} of {run.max_attempts}", "not begun yet"
    if begun:
        return f"{begun} of {run.max_attempts}", f"{run.status.lower()} before attempt {run.attempt} began"
    return "none", f"{run.status.lower()} before it began"


def not_retried_why(run: Run) -> str:
    """Why a FAILED run with attempts left was not queued again, from how it failed (runs/end.py's plan)."""
    reason = run.reason or ""
    if reason.startswith("permanent error"):
        return "its error is marked permanent"
    if reason.startswith("node '") or reason.startswith("node "):
        return "a workflow's failed node is not retried as a whole; re-run it from its failure"
    if reason.startswith("dependency timeout"):
        return "a dependency timeout is final"
    if "not retried" in reason or "not retried" in (run.error or "")[:300]:
        return "its error is marked permanent (a retry would fail the same way)"
    return "its failure is not one that is retried (only a retryable error, a timeout or a lost worker is)"


__all__ = ["UNUSUAL_FACTOR", "Elapsed", "attempt_text", "not_retried_why", "typical_durations"]
