"""Forms for the pages: they parse and name the field at fault; services decide."""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta
from datetime import timezone as dt_timezone

from django import forms

from scheduler.core import ConfigError
from scheduler.core.userdata import parse_json
from scheduler.models import RunStatus, Schedule, Team, TriggerKind, WorkloadClass
from scheduler.services.teams import visible_team_ids

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

    def clean(self):
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and until < since:
            self.add_error("until", "must be on or after From")
        return cleaned

    def filters(self) -> dict:
        """Cleaned values ready for selectors.run_filters_apply; invalid fields are left out."""
        data = {k: v for k, v in getattr(self, "cleaned_data", {}).items() if v not in (None, "") and k not in self.errors}
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
    value = forms.CharField(required=False, max_length=64, help_text="Empty resets the mark to its initial value.")
    reason = forms.CharField(max_length=500, help_text="Why: kept in the audit log.")
    force = forms.BooleanField(required=False, label="Allow a mark in the future")


class ReasonForm(forms.Form):
    reason = forms.CharField(required=False, max_length=500)


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
    params = JSONObjectField(required=False, label="Params (JSON object)",
                             help_text='Given to every window\'s run, e.g. {"table": "fact_orders_replay"}')
    reason = forms.CharField(max_length=500)


class RerunForm(forms.Form):
    downstream = forms.BooleanField(required=False, label="and then its downstream")
    reset_breaker = forms.BooleanField(required=False, label="reset the breaker first")
    reason = forms.CharField(required=False, max_length=500, label="Reason")


TIMELINE_HOURS = [(1, "1 hour"), (3, "3 hours"), (6, "6 hours"), (12, "12 hours"), (24, "24 hours"), (48, "48 hours")]


class TimelineForm(forms.Form):
    hours = forms.TypedChoiceField(choices=TIMELINE_HOURS, coerce=int, required=False, label="Last")


class AckForm(forms.Form):
    """Acknowledge a schedule's failures: why they are handled."""

    note = forms.CharField(max_length=500, strip=True, label="Note (required)",
                           widget=forms.Textarea(attrs={"rows": 3, "placeholder": "a ticket, a cause, a plan"}))
    up_to = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
