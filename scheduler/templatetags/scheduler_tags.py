"""Small display filters for the dashboard."""

from __future__ import annotations

import json
import signal
from datetime import datetime
from datetime import timezone as dt_timezone
from zoneinfo import ZoneInfo

from django import template
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince, timeuntil

from scheduler.backfill_report import status_words
from scheduler.core.errors import first_line as _first_line
from scheduler.permissions import VERBS, schedule_of
from scheduler.timefmt import moment_text, parse_moment, span_words, utc_iso
from scheduler.words import status_word

register = template.Library()


@register.simple_tag(takes_context=True)
def may(context, perm: str, obj=None) -> bool:
    """{% may "scheduler.trigger_schedule" schedule as can_trigger %}: the viewer's permission on this object
    (the group's model permission and, for a schedule and what belongs to it, membership of its team), so a
    page offers only the actions the viewer may take."""
    user = getattr(context.get("request"), "user", None) or context.get("user")
    if user is None or not user.is_authenticated:
        return False
    return user.has_perm(perm) and (obj is None or user.has_perm(perm, obj))


@register.simple_tag(takes_context=True)
def why_not(context, perm: str, obj=None) -> str:
    """{% why_not "scheduler.trigger_schedule" schedule as why %}: one line saying why a control the viewer
    may not use is hidden ("" when they may use it): their group lacks the permission, or the schedule belongs
    to a team they are not in."""
    user = getattr(context.get("request"), "user", None) or context.get("user")
    if user is None or not user.is_authenticated or may(context, perm, obj):
        return ""
    verb = VERBS.get(perm, "change")
    if not user.has_perm(perm):
        groups = getattr(user, "_etl_group_names", None)
        if groups is None:  # once per request, however many lines say it
            groups = user._etl_group_names = ", ".join(user.groups.values_list("name", flat=True)) or "no group"
        return (f"Your login ({groups}) may view but not {verb} schedules; an admin can add you to the "
                f"operator group.")
    schedule = schedule_of(obj)
    owner = schedule.owner.name if schedule is not None and schedule.owner_id else "another team"
    return f"Owned by {owner}; you can view it but not act on it."


@register.simple_tag
def run_pill(run) -> str:
    """A run's status pill as pages show it: STOPPING for a RUNNING run asked to stop (`Run.shown_status`)."""
    shown = status_word(getattr(run, "shown_status", None) or run.status)
    return format_html('<span class="status s-{}">{}</span>', shown.lower(), shown)


@register.simple_tag
def backfill_status(backfill, failed=0) -> str:
    """A backfill's status pill: "Completed with 1 failed window" in the failure colour, not a green success."""
    text, css = status_words(backfill.status, failed or 0)
    return format_html('<span class="status s-{}" data-status="{}">{}</span>', css, backfill.status, text)


@register.filter
def exit_code_text(code) -> str:
    """A command's exit status as the run page shows it: 0, 3, or -9 -> '-9 (killed by SIGKILL)'."""
    if code is None or code == "":
        return "—"
    code = int(code)
    if code >= 0:
        return str(code)
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"{code} (killed by {name})"


@register.filter
def first_line(value) -> str:
    """A reason's first line, for lists: a failure's cause (its detail and context are on the run's page)."""
    return _first_line(str(value or ""))


@register.filter
def seconds(value) -> str:
    """0.0042 -> '4 ms', 1.23 -> '1.2 s', 12.3 -> '12 s', 125 -> '2 min 5 s', 7300 -> '2 h 1 min'."""
    if value is None or value == "":
        return "—"
    value = float(value)
    if value < 0.95:
        return f"{value * 1000:.0f} ms"  # a quick run's duration, and a chart's scale of them, not "0.0 s"
    if value < 60:
        return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


@register.filter
def thousands(value) -> str:
    """1234567 -> '1,234,567' (the counts the bounded pages give of what they leave out)."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def pretty_json(value) -> str:
    if value in (None, "", {}):
        return "{}"
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.filter
def lower_status(value) -> str:
    return str(value or "none").lower()


@register.simple_tag(takes_context=True)
def when(context, value, relative: bool = True) -> str:
    """A moment in the viewer's zone, labelled with that zone, UTC on hover, and how long ago (or until).

    Never `|date` followed by a literal "UTC": that labels local time as UTC whenever TIME_ZONE is not UTC.
    """
    if not value:
        return "—"
    utc = value.astimezone(dt_timezone.utc)
    html = format_html('<time datetime="{}" title="{} UTC">{}</time>', utc_iso(value),
                       utc.strftime("%Y-%m-%d %H:%M:%S"), moment_text(value))
    if relative:
        html += format_html(' <span class="muted small rel">{}</span>', ago(value, _now(context)))
    return html


_parse_mark = parse_moment


def mark_text(value) -> str:
    """A watermark value as plain text: a datetime in the viewer's zone to the second, anything else as it is."""
    moment = parse_moment(value)
    if moment is None:
        return "" if value is None else str(value)
    return moment_text(moment)


@register.filter(name="moment")
def moment_filter(value, zone=None) -> str:
    """{{ value|moment }}: a datetime (or ISO text) as plain text in the viewer's zone (or `zone`), to the
    second, its zone named; the one format for times in titles and attributes, where a <time> cannot go."""
    moment = parse_moment(value)
    if moment is None:
        return "—" if value in (None, "") else str(value)
    return moment_text(moment, ZoneInfo(zone) if zone else None)


@register.simple_tag
def zoned(value, zone: str = "", also: str = "") -> str:
    """{% zoned moment "Europe/Berlin" %}: like `when` without the relative part, in a given zone (a schedule's
    own) when one is named, else in the viewer's; UTC on hover, and the zone `also` names (a schedule's own, in
    a narrow list) after it."""
    if not value:
        return "—"
    utc = value.astimezone(dt_timezone.utc)
    hover = f"{utc:%Y-%m-%d %H:%M:%S} UTC" + (f" · {moment_text(value, ZoneInfo(also))}" if also else "")
    return format_html('<time datetime="{}" title="{}">{}</time>', utc_iso(value), hover,
                       moment_text(value, ZoneInfo(zone) if zone else None))


@register.filter
def span(value) -> str:
    """{{ seconds|span }}: a window size as words, 86400 -> '1 day'."""
    return span_words(value)


@register.simple_tag
def mark(value, empty: str = "—") -> str:
    """A watermark value: a datetime (stored as UTC ISO text) in the viewer's zone to the second, UTC on hover."""
    if value in (None, ""):
        return empty
    moment = _parse_mark(value)
    if moment is None:
        return str(value)
    utc = moment.astimezone(dt_timezone.utc)
    return format_html('<time datetime="{}" title="{} UTC">{}</time>', utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       utc.strftime("%Y-%m-%d %H:%M:%S"), mark_text(moment))


def _now(context) -> datetime | None:
    now = context.get("now")
    return now if isinstance(now, datetime) else None


def ago(value: datetime, now: datetime | None = None) -> str:
    """'5 minutes ago', 'in 2 hours', 'just now': the largest unit only."""
    now = now or timezone.now()
    seconds = (now - value).total_seconds()
    if abs(seconds) < 60:
        return "just now"
    if seconds > 0:
        return f"{timesince(value, now, depth=1)} ago"
    return f"in {timeuntil(value, now, depth=1)}"


@register.filter(name="ago")
def ago_filter(value) -> str:
    return ago(value) if value else "—"


# Polled parts are morphed (idiomorph, vendored under static/scheduler/vendor/),
# not replaced: focus, scroll and a half-typed reason survive a refresh.
MORPH_SWAP = "morph:{morphStyle:'outerHTML',ignoreActiveValue:true}"


@register.simple_tag
def morph_swap() -> str:
    return MORPH_SWAP


# --- the audit log -----------------------------------------------------------

AUDIT_TARGET_PAGES = {
    "schedule": "scheduler:schedule_detail",
    "run": "scheduler:run_detail",
    "backfill": "scheduler:backfill_detail",
}
_MISSING = object()


def _flatten(value, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}; anything that is not a dict is one value under its prefix."""
    if isinstance(value, dict) and value:
        flat = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def _shown(value) -> str:
    if value is _MISSING:
        return ""
    if value == "" or value is None:
        return "(empty)" if value == "" else "null"
    moment = parse_moment(value) if isinstance(value, str) and value[10:11] == "T" else None
    if moment is not None:  # a time in an audit value: read like every other time, not as stored ISO
        return moment_text(moment)
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:119] + "…"


def audit_changes(before, after) -> list[dict]:
    """What an audit entry changed, key by key: [{"key", "old", "new", "kind": added|removed|changed|value}].

    Keys whose value did not change are left out; nested dicts are compared by dotted key.
    """
    if before in (None, {}) and after in (None, {}):
        return []
    if before in (None, {}) and not isinstance(after, dict):
        return [{"key": "", "old": "", "new": _shown(after), "kind": "value"}]
    old = _flatten(before) if before not in (None, {}) else {}
    new = _flatten(after) if after not in (None, {}) else {}
    rows = []
    for key in list(old) + [k for k in new if k not in old]:
        was, now = old.get(key, _MISSING), new.get(key, _MISSING)
        if was == now:
            continue
        kind = "added" if was is _MISSING else "removed" if now is _MISSING else "changed"
        if not before:  # a creation or a plain record: every value is simply what it is
            kind = "value"
        rows.append({"key": key, "old": _shown(was), "new": _shown(now), "kind": kind})
    return rows


@register.simple_tag
def audit_diff(entry):
    return audit_changes(entry.before, entry.after)


@register.simple_tag
def audit_target_url(entry) -> str:
    """The page of the entry's target, when it has one (a deleted object's id leads nowhere)."""
    name = AUDIT_TARGET_PAGES.get(entry.target_type)
    if not name or not str(entry.target_id).isdigit() or entry.action.endswith(".delete"):
        return ""
    return reverse(name, args=[int(entry.target_id)])


@register.filter
def breaker_state_then(reason: str) -> str:
    """The breaker's state when the run was blocked, read from the reason it was given then (never today's state)."""
    return "half-open" if str(reason or "").startswith("circuit half-open") else "open"


# Status is never colour alone (issue 37): a mark beside the colour, the same in the graph and its legend
STATUS_GLYPHS = {"succeeded": "✓", "failed": "✕", "running": "▶", "stopping": "■", "queued": "…", "waiting": "…",
                 "blocked": "⊘", "skipped": "↷", "cancelled": "–", "none": "○"}


@register.filter
def status_glyph(status) -> str:
    """'FAILED' -> '✕': the mark a picture draws beside a status's colour."""
    return STATUS_GLYPHS.get(str(status or "none").lower(), "")
@register.simple_tag
def status_pill(value, label: str = "") -> str:
    """Any status as a pill, in the one casing of every page (words.status_word): {% status_pill n.outcome %}."""
    word = status_word(value)
    css = "succeeded" if word == "SUCCEEDED" else str(value or "none").strip().lower().replace(" ", "_")
    return format_html('<span class="status s-{}">{}</span>', css, label or word)


register.filter("status_word", status_word)
