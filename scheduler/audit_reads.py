"""The audit report: the filtered log, what a scoped viewer may read of it, and its counts."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, timedelta
from datetime import timezone as dt_timezone
from functools import lru_cache, reduce
from operator import or_

from django.db import connection
from django.db.models import BigIntegerField, Count, F, Q, QuerySet, Sum, Value
from django.db.models.functions import TruncDate
from django.utils import timezone

from scheduler.core.userdata import shown_text
from scheduler.models import AuditCount, AuditEntry, Schedule, Team


def _scoped(qs: QuerySet, filters: dict, team_ids: frozenset[int] | None, own_actor: str | None) -> QuerySet:
    """The filters an entry and its hour's count (AuditCount) share: the reader's scope, team, actor, action."""
    if team_ids is not None:
        qs = qs.filter(Q(team_id__in=team_ids) | Q(team_id__isnull=True, actor=own_actor or ""))
    if filters.get("team"):
        qs = qs.filter(team_id=filters["team"].pk)
    if filters.get("actor"):
        qs = qs.filter(actor=filters["actor"])
    if filters.get("action"):
        qs = qs.filter(action__startswith=filters["action"])
    return qs


def audit_filtered(filters: dict, *, team_ids: frozenset[int] | None = None, own_actor: str | None = None):
    """Entries matching `filters`; with `team_ids` (viewing scoped) only those teams' entries and the reader's own."""
    qs = _scoped(AuditEntry.objects.all(), filters, team_ids, own_actor)
    if filters.get("target"):
        target = filters["target"]
        if ":" in target:
            kind, _, ident = target.partition(":")
            qs = qs.filter(target_type=kind, target_id=ident)
        else:
            qs = qs.filter(target_repr__icontains=target) | qs.filter(target_id=target)
    if filters.get("since"):
        qs = qs.filter(at__gte=filters["since"])
    if filters.get("until"):
        qs = qs.filter(at__lt=filters["until"])
    return qs


def audit_redactor(team_ids: frozenset[int] | None) -> Callable[[AuditEntry], AuditEntry]:
    """For a reader who may see only `team_ids`: hide other teams' schedule and team names inside an entry.

    An entry of one's own team may still name another team's schedule (an upstream in `depends_on`, a refusal's
    reason); with viewing scoped those names read "(another team's schedule)" / "(another team)". The entry is
    changed in memory only (the log is append-only). None for `team_ids`: every entry as it is.
    """
    if team_ids is None:
        return _shown
    names = {n: "(another team's schedule)" for n in
             Schedule.objects.exclude(owner_id__in=team_ids).values_list("name", flat=True)}
    names.update({n: "(another team)" for n in Team.objects.exclude(pk__in=team_ids).values_list("name", flat=True)})
    if not names:
        return _shown
    alternatives = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
    pattern = re.compile(r"(?<![\w-])(" + alternatives + r")(?![\w-])")

    def hide(value):
        if isinstance(value, str):
            return pattern.sub(lambda m: names[m.group(1)], value)
        if isinstance(value, list):
            return [hide(v) for v in value]
        if isinstance(value, dict):
            return {hide(k): hide(v) for k, v in value.items()}
        return value

    def redact(entry: AuditEntry) -> AuditEntry:
        for field in ("target_repr", "reason", "before", "after"):
            setattr(entry, field, hide(getattr(entry, field)))
        return _shown(entry)

    return redact


def _shown(entry: AuditEntry) -> AuditEntry:
    """The entry with any lone surrogate stored before issue 33 written as text, so that it can be shown."""
    for field in ("before", "after"):
        setattr(entry, field, shown_text(getattr(entry, field)))
    return entry


AUDIT_COUNT_DAYS = 31
TOP = 30
HOUR = timedelta(hours=1)


def audit_counts_raw(qs, *, now: datetime, until: datetime | None = None) -> dict:
    """Entries of `qs` by action, actor and day over the AUDIT_COUNT_DAYS up to `until` (else now), counted from
    the log itself: for a filter the hourly counts cannot answer (a target), and the tests' oracle."""
    end = min(until or now, now)
    since = end - timedelta(days=AUDIT_COUNT_DAYS)
    qs = qs.filter(at__gte=since).order_by()
    return {
        "since": since,
        "until": end,
        "days": AUDIT_COUNT_DAYS,
        "by_action": list(qs.values("action").annotate(n=Count("id")).order_by("-n", "action")[:TOP]),
        "by_actor": list(qs.values("actor").annotate(n=Count("id")).order_by("-n", "actor")[:TOP]),
        "by_day": list(qs.annotate(day=TruncDate("at")).values("day").annotate(n=Count("id")).order_by("-day")[:31]),
    }


def audit_counts(filters: dict, *, now: datetime, team_ids: frozenset[int] | None = None,
                 own_actor: str | None = None) -> dict:
    """Entries matching `filters` (as audit_filtered reads them) by action, actor and day over the AUDIT_COUNT_DAYS
    up to the filter's `until` (else now): exactly audit_counts_raw's answer, read in time that does not grow
    with the log's rate (issue 25).

    Every whole UTC hour of the range is read from the hourly counts (AuditCount: a few rows per hour), only the
    partial hours at its edges from the log. By day is per day of the display zone (TruncDate): an hour in which
    a local day begins (a zone whose offset is not whole hours: +5:30, +5:45, Lord Howe's half-hour DST) is
    counted from the log for the days (at most one such hour a day). A target filter reads the log (bounded to
    the same range), as the counts know no targets.
    """
    until = filters.get("until")
    if filters.get("target"):
        return audit_counts_raw(audit_filtered(filters, team_ids=team_ids, own_actor=own_actor), now=now,
                                until=until)
    end = min(until or now, now)
    since = end - timedelta(days=AUDIT_COUNT_DAYS)
    # the entries counted: at >= lo (the window's start, or the filter's later since) and at < until, if any
    # (with no until, the raw count has no upper bound: an entry stamped ahead of now still counts)
    lo = max(since, filters["since"]) if filters.get("since") else since
    first = _hour_ceil(lo)
    last = _hour_floor(now) + HOUR  # hours past now (an entry stamped ahead) come from the log, not the counts
    if until is not None:
        last = min(last, _hour_floor(until))
    if first >= last:
        raw, first, last = [(lo, until)], None, None  # no whole hour: the log alone
    else:
        raw = ([(lo, first)] if lo < first else []) + ([(last, until)] if until is None or last < until else [])
    entries = _scoped(AuditEntry.objects.all(), filters, team_ids, own_actor).order_by()
    counts = None
    if first is not None:
        counts = _scoped(AuditCount.objects.all(), filters, team_ids, own_actor).filter(
            hour__gte=first, hour__lt=last).order_by()
    by_action, by_actor = _by_action_and_actor(counts, _within(entries, raw))
    return {
        "since": since,
        "until": end,
        "days": AUDIT_COUNT_DAYS,
        "by_action": by_action,
        "by_actor": by_actor,
        "by_day": _by_day(counts, entries, raw, first, last),
    }


def _hour_floor(at: datetime) -> datetime:
    return at.astimezone(dt_timezone.utc).replace(minute=0, second=0, microsecond=0)


def _hour_ceil(at: datetime) -> datetime:
    floor = _hour_floor(at)
    return floor if floor == at else floor + HOUR


def _within(entries: QuerySet, ranges: list[tuple[datetime, datetime | None]]) -> QuerySet | None:
    """The entries with `at` in any of the [start, end) ranges (end None: no end); None for no range."""
    if not ranges:
        return None
    return entries.filter(reduce(or_, [Q(at__gte=a) if b is None else Q(at__gte=a, at__lt=b) for a, b in ranges]))


def _union(parts: list[QuerySet | tuple[str, list]]) -> tuple[str, list]:
    """The parts (querysets, or SQL with its parameters) as one UNION ALL, each part's columns in its order."""
    compiled = [part if isinstance(part, tuple) else part.query.sql_with_params() for part in parts]
    sql = " UNION ALL ".join(f"SELECT * FROM ({sql}) p{i}" for i, (sql, _) in enumerate(compiled))
    return sql, [p for _, params in compiled for p in params]


def _by_action_and_actor(counts: QuerySet | None, entries: QuerySet | None) -> tuple[list[dict], list[dict]]:
    """The TOP actions and the TOP actors by number of entries, then by name, from the hours' counts and the
    edges' entries in one statement.

    Equal counts are ordered by the database's own order of the names (its collation: DENSE_RANK over the
    names), as the raw count's ORDER BY n DESC, name orders them.
    """
    parts = []
    if counts is not None:
        parts.append(counts.values(a=F("action"), b=F("actor")).annotate(total=Sum("n")).order_by())
    if entries is not None:
        # the edges' rows one by one (the outer GROUP BY counts them): grouped here, SQLite read the whole log in
        # the order of the action index rather than the edges' few rows by the `at` index
        parts.append(entries.values(a=F("action"), b=F("actor"), total=Value(1, output_field=BigIntegerField())))
    union, params = _union(parts)
    n: dict[str, dict[str, int]] = {"action": {}, "actor": {}}
    rank: dict[str, dict[str, int]] = {"action": {}, "actor": {}}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT u.a, u.b, SUM(u.total), DENSE_RANK() OVER (ORDER BY u.a),"
                       f" DENSE_RANK() OVER (ORDER BY u.b) FROM ({union}) u GROUP BY u.a, u.b", params)
        for action, actor, total, action_rank, actor_rank in cursor.fetchall():
            for key, name, order in (("action", action, action_rank), ("actor", actor, actor_rank)):
                n[key][name] = n[key].get(name, 0) + int(total)
                rank[key][name] = order

    def top(key: str) -> list[dict]:
        names = sorted((name for name, total in n[key].items() if total > 0), key=lambda name: (-n[key][name],
                                                                                                 rank[key][name]))
        return [{key: name, "n": n[key][name]} for name in names[:TOP]]

    return top("action"), top("actor")


def _by_day(counts: QuerySet | None, entries: QuerySet, raw: list, first: datetime | None,
            last: datetime | None) -> list[dict]:
    """Entries per day of the display zone (TruncDate's), newest day first (31 days at most), in one statement."""
    parts: list = []
    if counts is not None:
        split = _hours_across_days(first, last, timezone.get_current_timezone())
        raw = raw + [(hour, hour + HOUR) for hour in split]
        whole = counts.exclude(hour__in=split) if split else counts
        # each hour's day once, not each row's: SQLite's TruncDate is a Python function called per row
        hours, params = whole.values("hour").annotate(total=Sum("n")).order_by().query.sql_with_params()
        day, day_params = connection.ops.datetime_cast_date_sql("h.hour", (), timezone.get_current_timezone_name())
        parts.append((f"SELECT {day} AS day, h.total AS total FROM ({hours}) h", [*day_params, *params]))
    edges = _within(entries, raw)
    if edges is not None:
        parts.append(edges.values(day=TruncDate("at"), total=Value(1, output_field=BigIntegerField())))
    union, params = _union(parts)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT u.day, SUM(u.total) AS n FROM ({union}) u GROUP BY u.day HAVING SUM(u.total) > 0"
                       f" ORDER BY u.day DESC LIMIT 31", params)
        # SQLite's TruncDate is text
        return [{"day": day if isinstance(day, date) else date.fromisoformat(day), "n": int(n)}
                for day, n in cursor.fetchall()]


@lru_cache(maxsize=64)
def _hours_across_days(first: datetime, last: datetime, zone) -> tuple[datetime, ...]:
    """The UTC hours in [first, last) whose entries do not all fall on one day of `zone` (a local midnight, or a
    change of offset, inside the hour). Remembered: a report asks again with the same hours until the next."""
    if str(zone) in ("UTC", "Etc/UTC"):
        return ()
    split = []
    hour = first
    while hour < last:
        start, end = hour.astimezone(zone), (hour + HOUR - timedelta(microseconds=1)).astimezone(zone)
        if start.date() != end.date() or start.utcoffset() != end.utcoffset():
            split.append(hour)
        hour += HOUR
    return tuple(split)
