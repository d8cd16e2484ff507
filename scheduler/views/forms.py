"""Forms for the pages: they parse and name the field at fault; services decide."""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta
from datetime import timezone as dt_timezone

from django import forms
from django.utils import timezone as django_timezone

from scheduler.core import ConfigError
from scheduler.core.userdata import parse_json
from scheduler.models import RunStatus, Schedule, Team, TriggerKind, WorkloadClass
from scheduler.services.access.teams import visible_team_ids

_ONE_DAY = timedelta(days=1)


def _day_start(day) -> datetime | None:
    return datetime.combine(day, time.min, tzinfo=dt_timezone.utc) if day else None


def scoped(form: forms.Form, user) -> forms.Form:
    """`form` with its schedule and team choices narrowed to the teams `user` may see (ETL_TEAMS_VIEW_ALL off)."""
    visible = visible_team_ids(user)
    if visible is None:
        return form
    for field in form.fields.values():
        if isinstance(field, forms.ModelChoiceField) and field.queryset.model is Schedule:
            field.queryset = field.queryset.filter(owner_id__in=visible)
        elif isinstance(field, forms.ModelChoiceField) and field.queryset.model is Team:
            field.queryset = field.queryset.filter(pk__in=visible)
    return form


class MomentField(forms.Field):
    """A moment in a URL (a timeline slice's bounds): ISO 8601, `2026-12-05T02:10:00Z` or with an offset; without
    one it is read in the viewer's zone. The error names the field."""

    def __init__(self, *, name: str, **kwargs):
        self.name = name
        super().__init__(required=False, widget=forms.TextInput(attrs={"size": 20, "placeholder": "2026-12-05T02:10Z"}),
                         **kwargs)

    def to_python(self, value):
        value = str(value or "").strip()
        if not value:
            return None
        try:
            if len(value) > 40:
                raise ValueError(value)
            moment = datetime.fromisoformat(value.replace(" ", "T", 1) if "T" not in value else value)
        except ValueError:
            raise forms.ValidationError(
                f"{self.name}: {value[:40]!r} is not a date and time; write it as 2026-12-05T02:10:00Z "
                f"(ISO 8601; without an offset it is read in your zone)") from None
        return moment if moment.tzinfo else django_timezone.make_aware(moment, django_timezone.get_current_timezone())

    def prepare_value(self, value):
        """The bound shown back as a person reads it: the viewer's wall clock, to the second (read back the same)."""
        try:
            moment = value if isinstance(value, datetime) else self.to_python(value)
        except forms.ValidationError:
            return value
        return "" if moment is None else django_timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S")


class RunFilterForm(forms.Form):
    status = forms.ChoiceField(choices=[("", "any")] + RunStatus.choices, required=False)
    schedule = forms.ModelChoiceField(
        queryset=Schedule.objects.only("id", "name"), required=False, empty_label="any", to_field_name="name"
    )
    workload_class = forms.ModelChoiceField(
        queryset=WorkloadClass.objects.all(), required=False, empty_label="any", to_field_name="name"
    )
    trigger_kind = forms.ChoiceField(choices=[("", "any")] + TriggerKind.choices, required=False)
    since = forms.DateField(required=False, label="From (UTC day)", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(
        required=False, label="To (UTC day, inclusive)", widget=forms.DateInput(attrs={"type": "date"})
    )

    hide_backfills = forms.BooleanField(required=False, label="Hide backfill windows")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # "from" is a Python keyword: declared here; runs that started (were queued, if never started) in [from, to)
        zone = django_timezone.localtime().tzname()
        self.fields["from"] = MomentField(name="from", label=f"Started from ({zone})")
        self.fields["to"] = MomentField(name="to", label=f"Started before ({zone})")

    def clean(self):
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and until < since:
            self.add_error("until", "must be on or after From")
        low, high = cleaned.get("from"), cleaned.get("to")
        if low and high and high <= low:
            self.add_error("to", "to: must be after from")
        return cleaned

    def filters(self) -> dict:
        """Cleaned values ready for run_reads.run_filters_apply; invalid fields are left out."""
        data = {
            k: v for k, v in getattr(self, "cleaned_data", {}).items()
            if v not in (None, "", False) and k not in self.errors
        }
        if "since" in data:
            data["since"] = _day_start(data["since"])
        if "until" in data:
            # the last day the date picker offers (9999-12-31) has no next day: it means "no upper bound"
            data["until"] = None if data["until"] == date.max else _day_start(data["until"]) + _ONE_DAY
        return {k: v for k, v in data.items() if v is not None}


class AuditFilterForm(forms.Form):
    actor = forms.CharField(required=False, max_length=150)
    action = forms.CharField(required=False, max_length=64, help_text="Prefix, e.g. breaker. or run.trigger")
    target = forms.CharField(required=False, max_length=200, help_text="type:id (schedule:3) or part of its name")
    team = forms.ModelChoiceField(
        queryset=Team.objects.order_by("name"), required=False, empty_label="any", to_field_name="name",
        help_text="The team that owned the target at the time",
    )
    since = forms.DateField(required=False, label="From (UTC day)", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(
        required=False, label="To (UTC day, inclusive)", widget=forms.DateInput(attrs={"type": "date"})
    )

    filters = RunFilterForm.filters


class JSONObjectField(forms.CharField):
    """A textarea holding a JSON object; the error names the field and the JSON problem."""

    widget = forms.Textarea(attrs={"rows": 3, "spellcheck": "false"})
    label_field = "params"

    def to_python(self, value):
        value = super().to_python(value)
        if not value or not value.strip():
            return {}
        try:
            parsed = parse_json(value, field=self.label_field)
        except ConfigError as exc:  # an oversized number: where it is, and the bound
            where = exc.field.removeprefix(self.label_field).lstrip(".")
            raise forms.ValidationError(f"{where}: {exc.problem}" if where else exc.problem) from None
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
        except RecursionError:  # "[[[[..." deeper than the parser goes: a field error, not a 500
            raise forms.ValidationError("is nested too deeply") from None
        if not isinstance(parsed, dict):
            raise forms.ValidationError('must be a JSON object such as {"day": "2026-03-01"}')
        return parsed


class RunNowForm(forms.Form):
    params = JSONObjectField(required=False, label="Override params (JSON object)")
    reason = forms.CharField(required=False, max_length=500)


class WatermarkForm(forms.Form):
    """A datetime mark is typed in the viewer's zone (a date-time picker, to the second) or with an offset."""

    value = forms.CharField(required=False, max_length=64, help_text="Empty resets the mark to its initial value.")
    reason = forms.CharField(max_length=500, help_text="Why: kept in the audit log.")
    force = forms.BooleanField(required=False, label="Allow a mark in the future")

    def __init__(self, *args, datetime_mark: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.datetime_mark = datetime_mark
        if datetime_mark:
            self.fields["value"].widget = forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"})
            self.fields["value"].help_text = ("In your display zone, to the second; empty resets the mark to its "
                                              "initial value.")

    def clean_value(self):
        value = self.cleaned_data["value"].strip()
        if not (self.datetime_mark and value):
            return value
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value  # the service names what is wrong with it
        if moment.tzinfo is None:  # the picker's value: a wall time in the zone the pages show
            try:
                moment = django_timezone.make_aware(moment, django_timezone.get_current_timezone())
            except (OverflowError, ValueError):
                return value
            return moment.isoformat()
        return value


class ReasonForm(forms.Form):
    reason = forms.CharField(required=False, max_length=500)


ORDERS = [("oldest", "oldest first"), ("newest", "newest first")]
REPROCESS_CHOICES = [("all", "all windows"), ("failed", "failed and missing only")]


class BackfillForm(forms.Form):
    schedule = forms.ModelChoiceField(queryset=Schedule.objects.order_by("name"), to_field_name="name")
    range_from = forms.CharField(
        max_length=64, label="From", help_text="ISO date-time (included) or integer (excluded)"
    )
    range_to = forms.CharField(max_length=64, label="To", help_text="ISO date-time (excluded) or integer (included)")
    window_size = forms.CharField(
        max_length=32, help_text="Seconds for datetime marks (86400 = a day), a count for integer marks"
    )
    max_parallel = forms.IntegerField(min_value=1, max_value=100, initial=1)
    order = forms.ChoiceField(choices=ORDERS, initial="oldest", required=False, label="Order")
    reprocess = forms.ChoiceField(choices=REPROCESS_CHOICES, initial="all", required=False, label="Reprocess",
                                  help_text="Failed and missing only: skip the windows that already have a "
                                            "succeeded run of this schedule.")
    params = JSONObjectField(required=False, label="Params (JSON object)",
                             help_text='Given to every window\'s run, e.g. {"table": "fact_orders_replay"}')
    reason = forms.CharField(max_length=500)

    # not required: a post without them queues every window oldest first, as before the options existed
    def clean_order(self) -> str:
        return self.cleaned_data.get("order") or "oldest"

    def clean_reprocess(self) -> str:
        return self.cleaned_data.get("reprocess") or "all"


class RerunForm(forms.Form):
    downstream = forms.BooleanField(required=False, label="and then its downstream")
    reset_breaker = forms.BooleanField(required=False, label="reset the breaker first")
    reason = forms.CharField(required=False, max_length=500, label="Reason")


# the timeline's ranges: the value in the URL, what the select says, the seconds drawn
TIMELINE_RANGES = [("15m", "15 minutes", 900), ("1h", "1 hour", 3600), ("3h", "3 hours", 3 * 3600),
                   ("6h", "6 hours", 6 * 3600), ("12h", "12 hours", 12 * 3600), ("24h", "24 hours", 24 * 3600),
                   ("48h", "48 hours", 48 * 3600), ("7d", "7 days", 7 * 86400)]


def timeline_ranges(default_hours: int) -> list[tuple[str, str, int]]:
    """The ranges offered: the fixed ones, and the configured default (ETL_TIMELINE_HOURS) when it is none of them."""
    ranges = list(TIMELINE_RANGES)
    if not any(seconds == default_hours * 3600 for _, _, seconds in ranges):
        ranges.append((f"{default_hours}h", f"{default_hours} hours", default_hours * 3600))
        ranges.sort(key=lambda r: r[2])
    return ranges


class TimelineForm(forms.Form):
    """The range the timeline draws. Unbound or invalid, the select shows the default: what is drawn then."""

    range = forms.ChoiceField(choices=[], required=False, label="Last")
    hide_backfills = forms.BooleanField(required=False, label="Hide backfill windows")

    def __init__(self, data=None, *, default_hours: int):
        self.ranges = timeline_ranges(default_hours)
        self.default = next(value for value, _, seconds in self.ranges if seconds == default_hours * 3600)
        if data is not None and "hours" in data and "range" not in data:  # links from before 15 minutes was a range
            data = data.copy()
            data["range"] = f"{data['hours']}h"
        super().__init__(data, initial={"range": self.default})
        self.fields["range"].choices = [(value, text) for value, text, _ in self.ranges]

    def chosen(self) -> tuple[str, str, int]:
        """(value, words, seconds) of the range to draw: the valid choice, else the default."""
        value = self.default
        if self.is_bound and self.is_valid() and self.cleaned_data["range"]:
            value = self.cleaned_data["range"]
        return next(r for r in self.ranges if r[0] == value)

    def hides_backfills(self) -> bool:
        """Whether the viewer asked to leave backfill windows' runs out (the switch; off by default)."""
        return bool(self.is_bound and self.is_valid() and self.cleaned_data.get("hide_backfills"))


WINDOW_UNITS = [("minutes", "minutes"), ("hours", "hours"), ("days", "days")]
UNIT_SECONDS = {"minutes": 60, "hours": 3600, "days": 86400}


class ScheduleBackfillForm(forms.Form):
    """A backfill of one schedule. A datetime mark: dates and times in the schedule's zone and a window of N
    minutes, hours or days. An integer mark: the values. `range()` gives what the service takes."""

    max_parallel = forms.IntegerField(min_value=1, max_value=100, initial=1, label="Windows at a time")
    order = forms.ChoiceField(choices=ORDERS, initial="oldest", label="Order",
                              help_text="Newest first brings the latest data back soonest.")
    # not required: a post without it reprocesses every window, as before the option existed
    reprocess = forms.ChoiceField(choices=REPROCESS_CHOICES, initial="all", required=False, label="Reprocess",
                                  help_text="Failed and missing only: skip the windows that already have a "
                                            "succeeded run of this schedule.")
    params = JSONObjectField(required=False, label="Params (JSON object)",
                             help_text='Given to every window\'s run, e.g. {"table": "fact_orders_replay"}')
    reason = forms.CharField(max_length=500, help_text="Why: kept in the audit log.")

    def clean_reprocess(self) -> str:
        return self.cleaned_data.get("reprocess") or "all"

    def __init__(self, *args, zone, datetime_mark: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.zone, self.datetime_mark = zone, datetime_mark
        if datetime_mark:
            day = {"input_formats": ["%Y-%m-%d"], "widget": forms.DateInput(attrs={"type": "date"})}
            clock = {"input_formats": ["%H:%M", "%H:%M:%S"], "required": False,
                     "widget": forms.TimeInput(attrs={"type": "time"}, format="%H:%M")}
            fields = {
                "from_date": forms.DateField(label="From (day)", **day),
                "from_time": forms.TimeField(label="at", help_text="included", **clock),
                "to_date": forms.DateField(label="To (day)", **day),
                "to_time": forms.TimeField(label="at", help_text="excluded", **clock),
                "window_count": forms.IntegerField(min_value=1, max_value=100_000, initial=1, label="Windows of"),
                "window_unit": forms.ChoiceField(choices=WINDOW_UNITS, initial="days", label="unit"),
            }
        else:
            fields = {
                "from_value": forms.IntegerField(label="From (excluded)"),
                "to_value": forms.IntegerField(label="To (included)"),
                "window_size": forms.IntegerField(min_value=1, label="Values per window"),
            }
        self.fields = {**fields, **self.fields}

    def clean(self):
        cleaned = super().clean()
        names = (("from_date", "to_date", "window_count", "window_unit") if self.datetime_mark
                 else ("from_value", "to_value", "window_size"))
        if all(cleaned.get(n) is not None for n in names):
            start, end, _ = self.range()
            if start >= end:  # said in the form's words, not in the UTC the service would quote
                raise forms.ValidationError("to: must be after from")
        return cleaned

    def _moment(self, day: str, clock: str):
        moment = datetime.combine(self.cleaned_data[day], self.cleaned_data.get(clock) or time.min)
        return moment.replace(tzinfo=self.zone)

    def range(self) -> tuple:
        """(start, end, window) for backfill_submit: aware datetimes and a timedelta, or integers."""
        data = self.cleaned_data
        if self.datetime_mark:
            size = timedelta(seconds=data["window_count"] * UNIT_SECONDS[data["window_unit"]])
            return self._moment("from_date", "from_time"), self._moment("to_date", "to_time"), size
        return data["from_value"], data["to_value"], data["window_size"]

    def window_words(self) -> str:
        data = self.cleaned_data
        if self.datetime_mark:
            count, unit = data["window_count"], data["window_unit"]
            return f"{count} {unit[:-1] if count == 1 else unit}"
        return f"{data['window_size']} value{'' if data['window_size'] == 1 else 's'}"

    # the service's names for its inputs -> this form's field
    def field_for(self, name: str) -> str | None:
        mapping = ({"from": "from_date", "to": "to_date", "window": "window_count"} if self.datetime_mark
                   else {"from": "from_value", "to": "to_value", "window": "window_size"})
        field = mapping.get(name, name)
        return field if field in self.fields else None


class AckForm(forms.Form):
    """Acknowledge a schedule's failures: why they are handled."""

    note = forms.CharField(max_length=500, strip=True, label="Note (required)",
                           widget=forms.Textarea(attrs={"rows": 3, "placeholder": "a ticket, a cause, a plan"}))
    up_to = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
