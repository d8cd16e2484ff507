"""The timeline of runs per schedule (a Gantt of runs, or of slices of them in a crowded range): pure layout.

Like charts.py, these functions only decide where the bars go; a row writes its own SVG (every value escaped).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Iterable

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from scheduler.timefmt import moment_text

# --- timeline (Gantt) of runs per schedule ----------------------------------

TICK_STEPS = (60, 300, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


@dataclass
class TimelineBar:
    run_id: int
    status: str
    x: float
    w: float
    wait_x: float
    wait_w: float
    title: str
    href: str = ""
    count: int = 0  # a group of runs (a crowded range): how many


# A timeline row's bars are written here, not by a template loop: a crowded page draws 200 of them, and the
# template's per-bar nodes were a third of its time (issue 25).
_GROUP_BAR = ('<a href="{}" class="tl-run tl-group" data-count="{}"><title>{}</title>'
              '<rect class="tl-bar t-{}" x="{}" y="{}" width="{}" height="18"/></a>')
_RUN_BAR = ('<a href="{}" class="tl-run" data-run="{}" data-status="{}"><title>{}</title>{}'
            '<rect class="tl-bar t-{}" x="{}" y="{}" width="{}" height="18" rx="2"/></a>')
_WAIT = '<rect class="tl-wait" x="{}" y="{}" width="{}" height="12"/>'


@dataclass
class TimelineRow:
    label: str
    href: str
    y: float
    bars: list[TimelineBar] = field(default_factory=list)

    def svg(self) -> SafeString:
        """The row's bars as SVG (every value escaped)."""
        y = self.y
        return format_html_join("", "{}", ((
            format_html(_GROUP_BAR, b.href, b.count, b.title, b.status, b.x, y + 3, b.w) if b.count else
            format_html(_RUN_BAR, b.href, b.run_id, b.status, b.title,
                        format_html(_WAIT, b.wait_x, y + 6, b.wait_w) if b.wait_w else "",
                        b.status, b.x, y + 3, b.w),) for b in self.bars))


@dataclass
class Timeline:
    rows: list[TimelineRow]
    ticks: list[tuple[float, str]]
    width: float
    height: float
    label_w: float
    plot_w: float
    row_h: float
    now_x: float
    zone: str = "UTC"
    span_seconds: float = 0
    grouped: int = 0  # runs drawn in groups (0: each run is its own bar)
    group_seconds: float = 0
    group_words: str = ""  # the slice as words: "1 minute", "2 hours"
    by_hour: bool = False  # grouped from the hour rollup (whole UTC hours), not from the ledger
    one_by_one: int = 0  # rows of a grouped chart drawn run by run (their runs do not overlap)


def merged(grouped: Timeline, runs: Timeline) -> Timeline:
    """A grouped chart with the rows of another of the same range and size drawn run by run, in name order."""
    rows = sorted(grouped.rows + runs.rows, key=lambda r: r.label)
    for i, row in enumerate(rows):
        row.y = 22 + i * grouped.row_h
    return replace(grouped, rows=rows, height=22 + max(len(rows), 1) * grouped.row_h + 6, now_x=runs.now_x)


def timeline_chart(runs: Iterable, *, start, end, plot_w: int = 900, label_w: int = 170, row_h: int = 24,
                   href=lambda run: "", schedule_href=lambda schedule_id: "", tz=timezone.utc) -> Timeline:
    """One row per schedule; per run a pale bar for its queue wait and a solid bar for its execution.

    A run still waiting or running reaches `end` (now). A run that never
    started (blocked, skipped, cancelled in the queue) is a thin mark at the
    time it was queued, so it is seen without pretending it ran.
    """
    span = max((end - start).total_seconds(), 1.0)

    def x_of(moment) -> float:
        seconds = min(max((moment - start).total_seconds(), 0.0), span)
        return round(label_w + plot_w * seconds / span, 1)

    rows: dict[int, TimelineRow] = {}
    for run in runs:
        row = rows.get(run.schedule_id)
        if row is None:
            row = rows[run.schedule_id] = TimelineRow(run.schedule.name, schedule_href(run.schedule_id), 0)
        started = run.started_at
        stop = run.finished_at or end
        wait_end = started or (end if run.finished_at is None else run.finished_at)
        wait_x, wait_x2 = x_of(run.queued_at), x_of(wait_end)
        if started is None:
            x, x2 = x_of(run.finished_at or end), x_of(run.finished_at or end)
        else:
            x, x2 = x_of(started), x_of(stop)
        wait = (started - run.queued_at).total_seconds() if started else None
        ran = (stop - started).total_seconds() if started else None
        shown = getattr(run, "shown_status", run.status).lower()  # a run asked to stop is drawn as stopping
        title = f"#{run.pk} {run.schedule.name} {shown}: queued {moment_text(run.queued_at, tz)}"
        if wait is not None:
            title += f", waited {wait:.1f} s, ran {ran:.1f} s"
        elif run.finished_at is None:
            title += ", not started yet"
        else:
            title += ", never started"
        row.bars.append(TimelineBar(run.pk, shown, x, max(x2 - x, 2.0), wait_x,
                                    max(wait_x2 - wait_x, 0.0), title, href(run)))
    ordered = sorted(rows.values(), key=lambda r: r.label)
    top = 22
    for i, row in enumerate(ordered):
        row.y = top + i * row_h
    ticks = _ticks(start, end, span=span, label_w=label_w, plot_w=plot_w, tz=tz)
    height = top + max(len(ordered), 1) * row_h + 6
    zone = end.astimezone(tz).tzname() or "UTC"
    return Timeline(ordered, ticks, label_w + plot_w + 10, height, label_w, plot_w, row_h, x_of(end), zone, span)


def _ticks(start, end, *, span: float, label_w: float, plot_w: float, tz) -> list[tuple[float, str]]:
    step = next((s for s in TICK_STEPS if span / s <= 12), TICK_STEPS[-1])
    # ticks on round local times: a whole-hour zone offset keeps UTC's round marks round
    offset = end.astimezone(tz).utcoffset().total_seconds()
    t = (start.timestamp() + offset) // step * step + step - offset
    ticks = []
    while t < end.timestamp():
        moment = datetime.fromtimestamp(t, tz=tz)
        x = round(label_w + plot_w * (t - start.timestamp()) / span, 1)
        ticks.append((x, moment.strftime("%H:%M" if step < 86400 else "%m-%d")))
        t += step
    return ticks


# how bad a group is: the worst run in it colours it
SEVERITY = ["succeeded", "skipped", "cancelled", "queued", "waiting", "running", "stopping", "blocked", "failed"]


HOUR_STEPS = (1, 2, 3, 4, 6, 8, 12, 24, 48)  # hours


def hour_step(*, span: float, rows: int, max_groups: int) -> int:
    """The fewest whole hours per slice (a round number of them when one fits) that keep `rows` rows of the
    slices of `span` seconds under `max_groups` bars: the grouped timeline's slices are the rollup's hours."""
    rows = max(rows, 1)

    def fits(hours: int) -> bool:
        return rows * -(-span // (hours * 3600)) <= max_groups

    whole = max(int(-(-span // 3600)), 1)  # one slice a row: the fewest there can be
    hours = next((h for h in HOUR_STEPS if fits(h)), None)
    if hours is None:
        hours = next((h for h in range(HOUR_STEPS[-1], whole) if fits(h)), whole)
    return hours * 3600


# a short range's slices (counted from the ledger): minutes for 15 minutes, never finer than a minute
SHORT_STEPS = (60, 120, 180, 300, 600, 900, 1200, 1800, 3600, 7200, 10800)


def short_step(*, span: float, rows: int, max_groups: int) -> int:
    """The shortest round slice (a minute at least) that keeps `rows` rows of slices of `span` seconds under
    `max_groups` bars: a crowded 15 minutes is grouped by the minute, not into one bar per schedule."""
    rows = max(rows, 1)
    fits = (s for s in SHORT_STEPS if rows * -(-span // s) <= max_groups)
    return next(fits, max(int(-(-span // 60)) * 60, 60))


def timeline_groups(schedules: list[tuple[int, str]], counts: Iterable[tuple], *, start, end, step: float,
                    plot_w: int = 900, label_w: int = 170, row_h: int = 24,
                    group_href=lambda name, status, low, high: "",
                    schedule_href=lambda schedule_id: "", tz=timezone.utc) -> Timeline:
    """A crowded range: per schedule, one bar per time slice holding runs, coloured by its worst run.

    `schedules` are the (id, name) rows to draw, `counts` the database's (schedule id, slice, status, runs)
    (timeline.slice_counts); a slice before the range or past it is clamped to the first or last.
    The caller picks `step` (hour_step) so the page's size has a bound whatever the history; `start` is then
    on the hour, as the counts are.
    """
    span = max((end - start).total_seconds(), 1.0)
    last = max(int(-(-span // step)) - 1, 0)
    slices: dict[int, dict[int, dict[str, int]]] = {}
    for schedule_id, index, status, n in counts:
        index = min(max(int(index if index is not None else 0), 0), last)
        row = slices.setdefault(schedule_id, {}).setdefault(index, {})
        key = str(status).lower()
        row[key] = row.get(key, 0) + n
    rows = []
    total = 0
    for schedule_id, name in sorted(schedules, key=lambda s: s[1]):
        row = TimelineRow(name, schedule_href(schedule_id), 0)
        for index, counted in sorted(slices.get(schedule_id, {}).items()):
            worst = max(counted, key=lambda s: SEVERITY.index(s) if s in SEVERITY else 0)
            n = sum(counted.values())
            total += n
            x0 = label_w + plot_w * index * step / span
            x1 = label_w + plot_w * min((index + 1) * step, span) / span
            low = start + timedelta(seconds=index * step)
            high = min(low + timedelta(seconds=step), end)
            words = ", ".join(f"{c} {s}" for s, c in sorted(counted.items(), key=lambda kv: -kv[1]))
            title = (f"{name}: {n} run{'s' if n != 1 else ''} from {moment_text(low, tz)} to "
                     f"{moment_text(high, tz)}: {words}")
            # the link keeps the slice: those runs, of the worst status, started in [low, high)
            row.bars.append(TimelineBar(0, worst, round(x0, 1), round(max(x1 - x0 - 1, 1.0), 1), 0, 0, title,
                                        group_href(name, worst.upper(), low, high), n))
        rows.append(row)
    top = 22
    for i, row in enumerate(rows):
        row.y = top + i * row_h
    height = top + max(len(rows), 1) * row_h + 6
    zone = end.astimezone(tz).tzname() or "UTC"
    ticks = _ticks(start, end, span=span, label_w=label_w, plot_w=plot_w, tz=tz)
    return Timeline(rows, ticks, label_w + plot_w + 10, height, label_w, plot_w, row_h, label_w + plot_w, zone, span,
                    grouped=total, group_seconds=step)
