"""Schedules and workload classes in the admin: saved, toggled, triggered and reset through the services."""
from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.core.validators import MinValueValidator
from django.forms.fields import InvalidJSONInput
from django.http import HttpResponse

from scheduler.admin.schedule_deletes import ScheduleDeletesMixin
from scheduler.admin.trigger_widget import TriggerConfigWidget
from scheduler.admin.common import MaskedChannelsMixin, ScopedChoicesMixin, allowed, permitted, refuse_unless, visible
from scheduler.core import ConfigError
from scheduler.core.userdata import check_surrogates, parse_json, storable
from scheduler.models import Schedule, TargetKind, Team, WorkloadClass
from scheduler.services.definitions import schedules as schedule_services
from scheduler.services.definitions.schedule_source import schedule_detach
from scheduler.services.access import teams as team_services
from scheduler.services.common.audit import audit_record
from scheduler.services.runs.breakers import breaker_reset
from scheduler.services.worker.commands import command_spec_shown
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.definitions.schedule_files import schedules_export


SCHEDULE_STATE_FIELDS = (
    "next_fire_at",
    "last_fire_at",
    "breaker_status",
    "breaker_failures",
    "breaker_opened_at",
    "breaker_current_cooldown_seconds",
    "breaker_trial_run",
    "freshness_breached_at",
    "runs_pruned_through",
    "created_at",
    "updated_at",
    # the file that manages it, and a delete waiting for its runs: changed by apply_schedules, detach, delete
    "source_file",
    "source_digest",
    "source_applied_at",
    "source_applied_by",
    "deleting_at",
    "deleting_by",
    "deleting_reason",
)


class BoundedJSONField(forms.JSONField):
    """JSON nested deeper than the parser goes, or with an oversized number, is a field error, not a 500."""

    def to_python(self, value):
        if isinstance(value, str) and value.strip():
            try:
                parse_json(value, field="value")
            except ConfigError as exc:
                where = exc.field.removeprefix("value").lstrip(".")
                raise forms.ValidationError(f"{where}: {exc.problem}" if where else exc.problem,
                                            code="invalid") from None
            except (ValueError, RecursionError):
                pass  # Django's own parse below says what is wrong
        try:
            return super().to_python(value)
        except RecursionError:
            raise forms.ValidationError("is nested too deeply", code="invalid") from None

    def bound_data(self, data, initial):
        try:
            bound = super().bound_data(data, initial)
        except (RecursionError, ValueError):  # ValueError: a number past Python's int-to-str limit

            return InvalidJSONInput(data)
        if isinstance(data, str) and not isinstance(bound, InvalidJSONInput):
            try:
                check_surrogates(bound, field="value")
            except ConfigError:  # shown again as typed ("\\ud800"), never as the lone surrogate it parses to
                return InvalidJSONInput(data)
        return bound

    def prepare_value(self, value):
        text = super().prepare_value(value)
        # a lone surrogate stored before issue 33 (SQLite kept it escaped) is shown escaped: it cannot be UTF-8
        return text if isinstance(text, InvalidJSONInput) or storable(text) else json.dumps(value, cls=self.encoder)


def _editable(cleaned: dict) -> dict:
    """The form's values as the schedule service takes them."""
    data = {k: v for k, v in cleaned.items() if k in schedule_services.EDITABLE and k != "depends_on"}
    data["depends_on"] = list(cleaned.get("depends_on") or [])
    return data


class ScheduleForm(MaskedChannelsMixin, forms.ModelForm):
    class Meta:
        model = Schedule
        exclude = ["webhook_secret", *SCHEDULE_STATE_FIELDS]
        widgets = {"trigger_config": TriggerConfigWidget(attrs={"rows": 3})}
        field_classes = {"params": BoundedJSONField, "trigger_config": BoundedJSONField,
                         "watermark_config": BoundedJSONField, "command": BoundedJSONField,
                         "dbt": BoundedJSONField}
        # what an author needs at the form, said here (the model's texts are the short reference)
        help_texts = {
            "owner": "The owning team (required).",
            "target_kind": "pipeline or workflow: a registered id in Target id. command: the Command below "
                           "(leave Target id empty). dbt: the Dbt definition below (leave Target id empty).",
            "target_id": "The registered pipeline or workflow id; empty for a command target.",
            "command": 'Only for a command target, a JSON object: {"argv": ["dbt", "build", "--select", '
                       '"tag:nightly"], "cwd": "/srv/dbt", "env": {"DBT_TARGET": "prod"}}. argv is a list run '
                       'without a shell; {"shell": "..."} instead of argv is the explicit opt-in to /bin/sh -c. '
                       "cwd must be absolute; env adds variables (ETL_* are the scheduler's; {\"secret\": \"...\"} "
                       'marks a value secret: encrypted, shown as "***", and "***" sent back keeps it). Run params '
                       "reach the command only as JSON in ETL_PARAMS, never in argv. Empty for other targets.",
            "dbt": 'Only for a dbt target, a JSON object: {"project_dir": "/srv/analytics", "profiles_dir": '
                   '"/srv/analytics", "target": "prod", "select": "tag:daily"}; also exclude, full_refresh (true), '
                   'threads and vars. Directories must be absolute. The run calls `dbt build`; the window and the '
                   "run's params reach dbt as --vars (docs/dbt.md). Empty for other targets.",
            "timeout_seconds": "Stop an attempt that runs longer than this; it ends FAILED \"timed out after N s\" "
                               "and is retried like any failure. Empty: no limit.",
            "deadline_seconds": "A live run not SUCCEEDED this many seconds after its logical time raises one "
                                "alert to the owning team and shows on the overview. Empty: no deadline.",
            "overlap_policy": "A cron or interval fire while a run is active: skip, buffer_one, buffer_all, "
                              "cancel_other (ask the active run to stop, start once it has), terminate_other "
                              "(kill it at once, no grace), allow_all. Empty: skip for watermarked schedules, "
                              "allow_all otherwise.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._mask_channels()
        if "command" in self.fields and self.instance.pk and not self.is_bound:  # env values marked secret
            self.initial["command"] = command_spec_shown(self.instance.command)
        if "owner" in self.fields:  # required: a schedule never lands in the default team unseen (issue 22)
            self.fields["owner"].required = True
        for name in ("timeout_seconds", "deadline_seconds", "retention_days"):  # the columns' minimum is 0; ours 1
            if name in self.fields:
                field = self.fields[name]
                field.min_value = 1
                field.validators = [v for v in field.validators if not isinstance(v, MinValueValidator)]
                field.validators.append(MinValueValidator(1))
                field.widget.attrs["min"] = 1

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        candidate = self.instance
        for key, value in cleaned.items():
            if key != "depends_on":
                setattr(candidate, key, value)
        try:
            if candidate.pk:  # a schedule a file manages: its fields change in the file only, until detached
                schedule_services.schedule_check_managed(schedule=candidate, data=_editable(cleaned))
            schedule_services.validate_schedule(candidate, depends_on=list(cleaned.get("depends_on") or []))
        except ServiceError as exc:
            for error in exc.errors:  # every problem under its own field, each said once
                field = (error.field or "").split(".")[0]
                if field in self.fields:
                    self.add_error(field, error.message_under(field))
                else:
                    self.add_error(None, str(error))
        return cleaned


@admin.register(Schedule)
class ScheduleAdmin(ScheduleDeletesMixin, ScopedChoicesMixin, admin.ModelAdmin):
    form = ScheduleForm
    list_display = (
        "name",
        "owner",
        "target",
        "trigger_kind",
        "enabled",
        "priority",
        "workload_class",
        "breaker_status",
        "next_fire_at",
        "managed",
    )
    # owners offered from the listed (visible) schedules only, never every team
    list_filter = (("owner", admin.RelatedOnlyFieldListFilter), "enabled", "trigger_kind", "workload_class",
                   "breaker_status")
    list_select_related = ("owner", "workload_class")
    search_fields = ("name", "target_id", "description")
    readonly_fields = ("managed", *SCHEDULE_STATE_FIELDS)
    filter_horizontal = ("depends_on",)
    actions = ["enable", "disable", "run_now", "reset_breaker", "export_yaml", "detach", "delete_stopping_runs"]

    @admin.display(description="managed by", ordering="source_file")
    def managed(self, obj):
        """"managed by schedules.yaml" for a schedule a file manages (edit it there, or detach it first)."""
        if obj.deleting_at:
            return f"being deleted (asked by {obj.deleting_by}): its runs are stopping"
        return f"managed by {obj.source_file}" if obj.source_file else "—"

    @admin.display(description="target", ordering="target_id")
    def target(self, obj):
        """The id it runs, or for a command target its program and arguments (argv[0] alone says little)."""
        if obj.target_kind == TargetKind.COMMAND:
            spec = obj.command or {}
            argv = spec.get("argv")
            text = " ".join(map(str, argv)) if isinstance(argv, list) else str(spec.get("shell", ""))
            return f"$ {text[:80]}{'…' if len(text) > 80 else ''}"
        if obj.target_kind == TargetKind.DBT:
            spec = obj.dbt or {}
            select = spec.get("select")
            select = " ".join(select) if isinstance(select, list) else select
            return f"dbt build {spec.get('project_dir', '')}" + (f" --select {select}" if select else "")
        return obj.target_id

    def get_queryset(self, request):
        """Other teams' schedules only while ETL_TEAMS_VIEW_ALL is on (then read-only: has_change_permission)."""
        return visible(super().get_queryset(request), request.user, "owner_id")

    def has_change_permission(self, request, obj=None):
        """Model permission, then the owning team's membership for one schedule."""
        return allowed(request, "scheduler.change_schedule", obj)

    def has_delete_permission(self, request, obj=None):
        """Model permission, then the owning team's membership for one schedule."""
        return allowed(request, "scheduler.delete_schedule", obj)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        """An operator gives a schedule only to a team of their own."""
        if db_field.name == "owner":
            teams = team_services.actable_team_ids(request.user)
            kwargs["queryset"] = Team.objects.all() if teams is None else Team.objects.filter(pk__in=teams)
            names = ", ".join(kwargs["queryset"].order_by("name").values_list("name", flat=True)[:50])
            kwargs["help_text"] = (f"The owning team (required). You may choose: {names}." if names else
                                   "The owning team (required). You belong to no team: ask an admin to add you.")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """A save refused for another team's schedule is audited and says why (the admin's own 403 does not)."""
        if request.method == "POST":
            obj = self.get_object(request, object_id)
            if obj is not None and request.user.has_perm("scheduler.change_schedule"):
                refuse_unless(request, "scheduler.change_schedule", obj)
        return super().change_view(request, object_id, form_url, extra_context)

    def delete_view(self, request, object_id, extra_context=None):
        obj = self.get_object(request, object_id)
        if obj is not None and request.user.has_perm("scheduler.delete_schedule"):
            refuse_unless(request, "scheduler.delete_schedule", obj)
        return super().delete_view(request, object_id, extra_context)

    def save_model(self, request, obj, form, change):
        """Save through the schedule service so the audit log and next fire time are kept."""
        data = _editable(form.cleaned_data)
        saved = schedule_services.schedule_save(data=data, actor=request.user, schedule=obj if change else None)
        obj.pk = saved.pk
        obj.refresh_from_db()

    def save_related(self, request, form, formsets, change):
        """depends_on was saved by the service."""
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)

    @admin.action(description="Detach selected schedules from their schedules file", permissions=["change"])
    def detach(self, request, queryset):
        done = 0
        for schedule in permitted(self, request, "scheduler.change_schedule", queryset):
            try:
                schedule_detach(schedule=schedule, actor=request.user, reason="admin action")
                done += 1
            except ServiceError as exc:
                self.message_user(request, str(exc), level=messages.ERROR)
        self.message_user(request, f"Detached {done} schedule(s): their fields may be edited here now.")

    @admin.action(description="Enable selected schedules", permissions=["toggle"])
    def enable(self, request, queryset):
        self._set_enabled(request, queryset, enabled=True)

    @admin.action(description="Disable selected schedules", permissions=["toggle"])
    def disable(self, request, queryset):
        self._set_enabled(request, queryset, enabled=False)

    def _set_enabled(self, request, queryset, *, enabled: bool) -> None:
        done = 0
        for schedule in permitted(self, request, "scheduler.toggle_schedule", queryset):
            try:  # a schedule being deleted is refused
                schedule_services.schedule_set_enabled(schedule=schedule, enabled=enabled, actor=request.user,
                                                       reason="admin action")
            except ServiceError as exc:
                self.message_user(request, str(exc), level=messages.ERROR)
                continue
            done += 1
        self.message_user(request, f"{'Enabled' if enabled else 'Disabled'} {done} schedule(s).")

    @admin.action(description="Run selected schedules now", permissions=["trigger"])
    def run_now(self, request, queryset):
        for schedule in permitted(self, request, "scheduler.trigger_schedule", queryset):
            try:
                run = run_trigger_manual(schedule=schedule, actor=request.user, reason="admin action")
                self.message_user(request, f"Queued run {run.pk} of {schedule.name}.")
            except ServiceError as exc:
                self.message_user(request, str(exc), level=messages.ERROR)

    @admin.action(description="Reset circuit breaker", permissions=["reset_breaker"])
    def reset_breaker(self, request, queryset):
        done = 0
        for schedule in permitted(self, request, "scheduler.reset_breaker", queryset):
            breaker_reset(schedule=schedule, actor=request.user, reason="admin action")
            done += 1
        self.message_user(request, f"Reset {done} breaker(s).")

    @admin.action(description="Export selected as a schedules file (YAML)", permissions=["view"])
    def export_yaml(self, request, queryset):
        """The file `manage.py apply_schedules` reads: move admin-made schedules into version control."""
        response = HttpResponse(schedules_export(list(queryset.values_list("name", flat=True))),
                                content_type="application/yaml; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="schedules.yaml"'
        return response

    def has_toggle_permission(self, request):
        return request.user.has_perm("scheduler.toggle_schedule")

    def has_trigger_permission(self, request):
        return request.user.has_perm("scheduler.trigger_schedule")

    def has_reset_breaker_permission(self, request):
        return request.user.has_perm("scheduler.reset_breaker")


@admin.register(WorkloadClass)
class WorkloadClassAdmin(admin.ModelAdmin):
    list_display = ("name", "concurrency_limit", "description")

    def save_model(self, request, obj, form, change):
        """Plain save, plus the audit entry the services would write (the admin runs this in a transaction)."""
        before = {k: form.initial.get(k) for k in form.changed_data} if change else None
        super().save_model(request, obj, form, change)
        audit_record(
            actor=request.user,
            action="workload_class.update" if change else "workload_class.create",
            target=obj,
            before=before,
            after={k: form.cleaned_data.get(k) for k in form.changed_data},
        )

    def delete_model(self, request, obj):
        audit_record(
            actor=request.user,
            action="workload_class.delete",
            target=obj,
            before={"name": obj.name, "concurrency_limit": obj.concurrency_limit},
        )
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self.delete_model(request, obj)


__all__ = ["SCHEDULE_STATE_FIELDS", "BoundedJSONField", "ScheduleAdmin", "ScheduleForm", "WorkloadClassAdmin"]
