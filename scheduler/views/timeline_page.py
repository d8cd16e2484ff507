"""The timeline page: a Gantt of the chosen range, run by run when few, else grouped in slices that fit the range
(issue 37 point 1: minutes for 15 minutes, hours for days), with backfill windows' runs hidden on request, and
every bar's link keeping its slice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from scheduler import timeline as timeline_reads
from scheduler.timefmt import span_words, utc_iso
from scheduler.views import timeline_charts
from scheduler.views.common import page, partial, team_scope
from scheduler.views.forms import TimelineForm

# Past this many runs in the range the timeline groups them (a bar per schedule and time slice): each run's bar
# costs ~350 bytes of HTML, and the page must stay under 100 KB whatever the history (issues 23 and 25).
TIMELINE_MAX_BARS = 200
TIMELINE_MAX_GROUPS = 200  # groups on the whole page; each row gets its share of time slices
TIMELINE_MAX_ROWS = 40  # schedules drawn when grouped: those with failed or blocked runs first, then the busiest
# a crowded range up to this long is counted from the ledger in slices of minutes (its runs are a few thousand at
# most); a longer one from the hour rollup, in whole hours
SHORT_RANGE = 3 * 3600
SPARSE_RUNS = 60  # runs of one row in a short range drawn one by one: 15 px apart on average over 900 px


def runs_href(*, start: datetime, end: datetime, hide_backfills: bool, team: str, **more) -> str:
    """The runs list of a slice of the timeline: its bounds (UTC, to the second) and the chart's team and switch."""
    query = {**more, "from": utc_iso(start), "to": utc_iso(end), "team": team}
    if hide_backfills:
        query["hide_backfills"] = "on"
    return f"{reverse('scheduler:runs')}?{urlencode(query)}"


def _choose(per_schedule: list[dict]) -> tuple[list[dict], dict]:
    """The rows to draw (those with failed or blocked runs first, then the busiest) and what is left out."""
    total = sum(row["n"] for row in per_schedule)
    chosen = sorted(per_schedule, key=lambda r: (r["trouble"] == 0, -r["n"], r["name"]))[:TIMELINE_MAX_ROWS]
    left_out = {"schedules": len(per_schedule) - len(chosen), "runs": total - sum(row["n"] for row in chosen),
                "trouble": sum(r["trouble"] for r in per_schedule) - sum(r["trouble"] for r in chosen)}
    return chosen, left_out


def _sparse(chosen: list[dict]) -> set[int]:
    """The rows of a crowded short range drawn run by run: those whose runs would not overlap on screen (at most
    SPARSE_RUNS each), the quietest first, TIMELINE_MAX_BARS runs in all (as Dagster batches only what overlaps)."""
    picked, bars = set(), 0
    for row in sorted(chosen, key=lambda r: r["n"]):
        if row["n"] > SPARSE_RUNS or bars + row["n"] > TIMELINE_MAX_BARS:
            break
        picked.add(row["schedule_id"])
        bars += row["n"]
    return picked


def _short_counts(window: dict, *, span: float, backfills: bool):
    """A crowded short range from the ledger: its start on a round slice, the slice, the counts, the rows."""
    one = int(span) + 3600  # one slice over the whole range: the per-schedule totals that choose the rows
    totals = timeline_reads.ledger_slice_counts(step=one, backfills=backfills, **window)
    chosen, left_out = _choose(timeline_reads.schedules(totals))
    step = timeline_charts.short_step(span=span, rows=len(chosen), max_groups=TIMELINE_MAX_GROUPS)
    start = datetime.fromtimestamp(window["start"].timestamp() // step * step, tz=UTC)  # slices on round times
    window = {**window, "start": start}
    counts = timeline_reads.ledger_slice_counts(step=step, backfills=backfills,
                                                schedule_ids={r["schedule_id"] for r in chosen}, **window)
    return start, step, counts, chosen, left_out


def _hour_counts(window: dict, *, span: float, backfills: bool):
    """A crowded long range from the hour rollup (less the backfill windows' runs, when hidden)."""
    start = window["start"] = timeline_reads.hour_start(window["start"])
    span = (window["end"] - start).total_seconds()
    outside = timeline_reads.outside_rows(**window)

    def counted(step: int, ids=None) -> list[tuple]:
        counts = timeline_reads.slice_counts(step=step, outside=outside, schedule_ids=ids, **window)
        if not backfills:  # the rollup does not tell a backfill's runs apart: the ledger's count of them is taken off
            counts = timeline_reads.without(counts, timeline_reads.ledger_slice_counts(
                step=step, schedule_ids=ids, only_backfills=True, **window))
        return counts

    # one pass over the range's counts, in the slices of as many rows as can be drawn
    step = timeline_charts.hour_step(span=span, rows=TIMELINE_MAX_ROWS, max_groups=TIMELINE_MAX_GROUPS)
    counts = counted(step)
    chosen, left_out = _choose(timeline_reads.schedules(counts))
    ids = {row["schedule_id"] for row in chosen}
    finer = timeline_charts.hour_step(span=span, rows=len(chosen), max_groups=TIMELINE_MAX_GROUPS)
    if finer < step:  # fewer rows to draw: their share of the bars is larger, the slices shorter
        step, counts = finer, counted(finer, ids)
    return start, step, counts, chosen, left_out


@page("scheduler.view_run")
def timeline(request):
    """A Gantt of the chosen range: one row per schedule, queue wait pale, execution solid; grouped when crowded."""
    form = TimelineForm(request.GET or None, default_hours=settings.ETL_TIMELINE_HOURS)
    value, words, seconds = form.chosen()
    hide = form.hides_backfills()
    now = timezone.now()
    start = now - timedelta(seconds=seconds)
    scope = team_scope(request)
    window = {"start": start, "end": now, "team_ids": scope["team_ids"]}
    options = {"start": start, "end": now, "tz": timezone.get_current_timezone(),
               "schedule_href": lambda pk: reverse("scheduler:schedule_detail", args=[pk])}
    total = timeline_reads.count_upto(limit=TIMELINE_MAX_BARS, backfills=not hide, **window)
    left_out = {"schedules": 0, "runs": 0}
    if total <= TIMELINE_MAX_BARS:
        chart = timeline_charts.timeline_chart(timeline_reads.runs(backfills=not hide, **window),
                                               href=lambda run: reverse("scheduler:run_detail", args=[run.pk]),
                                               **options)
    else:
        short = seconds <= SHORT_RANGE
        start, step, counts, chosen, left_out = (_short_counts if short else _hour_counts)(
            window, span=seconds, backfills=not hide)
        options["start"] = start
        total = sum(row["n"] for row in chosen) + left_out["runs"]
        sparse = _sparse(chosen) if short else set()
        ids = {row["schedule_id"] for row in chosen} - sparse
        chart = timeline_charts.timeline_groups(
            [(row["schedule_id"], row["name"]) for row in chosen if row["schedule_id"] in ids],
            [c for c in counts if c[0] in ids], step=step,
            group_href=lambda name, status, low, high: runs_href(start=low, end=high, hide_backfills=hide,
                                                                 team=scope["team_choice"], schedule=name,
                                                                 status=status),
            **options)
        if sparse:  # their runs do not overlap on screen: each is its own bar beside the busy rows' groups
            chart = timeline_charts.merged(chart, timeline_charts.timeline_chart(
                timeline_reads.runs(backfills=not hide, schedule_ids=sparse, **{**window, "start": start}),
                href=lambda run: reverse("scheduler:run_detail", args=[run.pk]), **options))
        chart.by_hour, chart.group_words, chart.one_by_one = not short, span_words(step), len(sparse)
    context = {"form": form, "chart": chart, "range_value": value, "range_words": words, "seconds": seconds,
               "start": start, "now": now, "total": total, "total_text": f"{total:,}", "left_out": left_out,
               "hide_backfills": hide, **scope,
               "runs_href": runs_href(start=start, end=now, hide_backfills=hide, team=scope["team_choice"])}
    return render(request, partial(request, "scheduler/timeline.html", "chart"), context)
