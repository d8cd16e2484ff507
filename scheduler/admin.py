"""Django admin: declarative; every save and action goes through the services."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.validators import MinValueValidator
from django.db import models, transaction
from django.forms.fields import InvalidJSONInput
from django.http import HttpResponse

from scheduler.core import ConfigError
from scheduler.core.userdata import parse_json
from scheduler.models import (
    AuditEntry,
    Backfill,
    GovernanceTick,
    RefusalCount,
    Run,
    RunStatus,
    Schedule,
    TargetKind,
    Team,
    WatermarkState,
    WebhookRefusal,
    WorkloadClass,
)
from scheduler.services import schedules as schedule_services
from scheduler.services import teams as team_services
from scheduler import admin_tokens  # noqa: F401  (registers ApiToken)
from scheduler import admin_users  # noqa: F401  (users and groups for the admin group)
from scheduler import selectors
from scheduler.services.audit import audit_record
from scheduler.services.breakers import breaker_reset
from scheduler.services.channels import channels_text, mask_url, split_channels, unmask_channels
from scheduler.services.errors import ServiceError
from scheduler.services.finish import run_cancel
from scheduler.services.nodes import run_rerun_from_failure
from scheduler.services.runs import run_trigger_manual
from scheduler.services.schedule_files import schedules_export
from scheduler.services.watermarks import watermark_set


def _visible(queryset, user, team_field: str):
    """Narrow a queryset to the teams `user` may see (every team while ETL_TEAMS_VIEW_ALL is on)."""
    teams = team_services.visible_team_ids(user)
    return queryset if teams is None else queryset.filter(**{f"{team_field}__in": teams})


def _scoped_choices(db_field, request, kwargs: dict) -> dict:
    """A schedule or team choice offers only what the user may see (ETL_TEAMS_VIEW_ALL off)."""
    teams = team_services.visible_team_ids(request.user)
    if teams is not None and db_field.related_model in (Schedule, Team) and "queryset" not in kwargs:
        field = "owner_id" if db_field.related_model is Schedule else "pk"
        kwargs["queryset"] = db_field.related_model.objects.filter(**{f"{field}__in": teams})
    return kwargs


class ScopedChoicesMixin:
    """Related-object choices (a schedule, a team, upstreams) narrowed to the teams the user may see."""

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        return super().formfield_for_foreignkey(db_field, request, **_scoped_choices(db_field, request, kwargs))

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        return super().formfield_for_manytomany(db_field, request, **_scoped_choices(db_field, request, kwargs))


def _allowed(request, perm: str, obj) -> bool:
    return request.user.has_perm(perm) and (obj is None or request.user.has_perm(perm, obj))


def _refuse_unless(request, perm: str, obj) -> None:
    try:
        team_services.authorize(actor=request.user, perm=perm, obj=obj)
    except team_services.PermissionRefused as exc:
        raise PermissionDenied(str(exc)) from None


def _permitted(model_admin, request, perm: str, queryset):
    """The objects of an action's selection the user may act on; each refusal is audited and shown."""
    for obj in queryset:
        try:
            team_services.authorize(actor=request.user, perm=perm, obj=obj)
        except team_services.PermissionRefused as exc:
            model_admin.message_user(request, str(exc), level=messages.ERROR)
            continue
        yield obj


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
            return super().bound_data(data, initial)
        except (RecursionError, ValueError):  # ValueError: a number past Python's int-to-str limit

            return InvalidJSONInput(data)


class MaskedChannelsMixin:
    """The alert_channels box shows every URL masked; a masked line saved back keeps the stored URL."""

    def _mask_channels(self) -> None:
        if "alert_channels" in self.fields and self.instance.pk and not self.is_bound:
            self.initial["alert_channels"] = channels_text(
                [mask_url(u) for u in split_channels(self.instance.alert_channels, field="alert_channels")])

    def clean_alert_channels(self):
        value = self.cleaned_data.get("alert_channels") or ""
        stored = split_channels(self.instance.alert_channels, field="alert_channels") if self.instance.pk else []
        try:
            return channels_text(unmask_channels(split_channels(value, field="alert_channels"), stored))
        except ServiceError as exc:
            raise forms.ValidationError(exc.problem) from None


class ScheduleForm(MaskedChannelsMixin, forms.ModelForm):
    class Meta:
        model = Schedule
        exclude = ["webhook_secret", *SCHEDULE_STATE_FIELDS]
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
                       "cwd must be absolute; env adds variables (ETL_* are the scheduler's). Run params reach "
                       "the command only as JSON in ETL_PARAMS, never in argv. Empty for other targets.",
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
class ScheduleAdmin(ScopedChoicesMixin, admin.ModelAdmin):
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
    )
    # owners offered from the listed (visible) schedules only, never every team
    list_filter = (("owner", admin.RelatedOnlyFieldListFilter), "enabled", "trigger_kind", "workload_class",
                   "breaker_status")
    list_select_related = ("owner", "workload_class")
    search_fields = ("name", "target_id", "description")
    readonly_fields = SCHEDULE_STATE_FIELDS
    filter_horizontal = ("depends_on",)
    actions = ["enable", "disable", "run_now", "reset_breaker", "export_yaml"]

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
        return _visible(super().get_queryset(request), request.user, "owner_id")

    def has_change_permission(self, request, obj=None):
        """Model permission, then the owning team's membership for one schedule."""
        return _allowed(request, "scheduler.change_schedule", obj)

    def has_delete_permission(self, request, obj=None):
        """Model permission, then the owning team's membership for one schedule."""
        return _allowed(request, "scheduler.delete_schedule", obj)

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
                _refuse_unless(request, "scheduler.change_schedule", obj)
        return super().change_view(request, object_id, form_url, extra_context)

    def delete_view(self, request, object_id, extra_context=None):
        obj = self.get_object(request, object_id)
        if obj is not None and request.user.has_perm("scheduler.delete_schedule"):
            _refuse_unless(request, "scheduler.delete_schedule", obj)
        return super().delete_view(request, object_id, extra_context)

    def get_deleted_objects(self, objs, request):
        """The bulk delete action: another team's schedule in the selection refuses it (audited, with the reason)."""
        if request.user.has_perm("scheduler.delete_schedule"):
            for obj in objs:
                _refuse_unless(request, "scheduler.delete_schedule", obj)
        return super().get_deleted_objects(objs, request)

    def save_model(self, request, obj, form, change):
        """Save through the schedule service so the audit log and next fire time are kept."""
        data = {k: v for k, v in form.cleaned_data.items() if k in schedule_services.EDITABLE and k != "depends_on"}
        data["depends_on"] = list(form.cleaned_data.get("depends_on") or [])
        saved = schedule_services.schedule_save(data=data, actor=request.user, schedule=obj if change else None)
        obj.pk = saved.pk
        obj.refresh_from_db()

    def save_related(self, request, form, formsets, change):
        """depends_on was saved by the service."""
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)

    def delete_model(self, request, obj):
        schedule_services.schedule_delete(schedule=obj, actor=request.user, reason="deleted in admin")

    def delete_queryset(self, request, queryset):
        for obj in _permitted(self, request, "scheduler.delete_schedule", queryset):
            self.delete_model(request, obj)

    @admin.action(description="Enable selected schedules", permissions=["toggle"])
    def enable(self, request, queryset):
        self._set_enabled(request, queryset, enabled=True)

    @admin.action(description="Disable selected schedules", permissions=["toggle"])
    def disable(self, request, queryset):
        self._set_enabled(request, queryset, enabled=False)

    def _set_enabled(self, request, queryset, *, enabled: bool) -> None:
        done = 0
        for schedule in _permitted(self, request, "scheduler.toggle_schedule", queryset):
            schedule_services.schedule_set_enabled(
                schedule=schedule, enabled=enabled, actor=request.user, reason="admin action"
            )
            done += 1
        self.message_user(request, f"{'Enabled' if enabled else 'Disabled'} {done} schedule(s).")

    @admin.action(description="Run selected schedules now", permissions=["trigger"])
    def run_now(self, request, queryset):
        for schedule in _permitted(self, request, "scheduler.trigger_schedule", queryset):
            try:
                run = run_trigger_manual(schedule=schedule, actor=request.user, reason="admin action")
                self.message_user(request, f"Queued run {run.pk} of {schedule.name}.")
            except ServiceError as exc:
                self.message_user(request, str(exc), level=messages.ERROR)

    @admin.action(description="Reset circuit breaker", permissions=["reset_breaker"])
    def reset_breaker(self, request, queryset):
        done = 0
        for schedule in _permitted(self, request, "scheduler.reset_breaker", queryset):
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


class AttentionFilter(admin.SimpleListFilter):
    """Presets for the runs an operator looks at first."""

    title = "needs attention"
    parameter_name = "attention"

    def lookups(self, request, model_admin):
        return [("failed", "Failed"), ("blocked", "Blocked"), ("stuck", "Failed or blocked")]

    def queryset(self, request, queryset):
        chosen = {
            "failed": [RunStatus.FAILED],
            "blocked": [RunStatus.BLOCKED],
            "stuck": [RunStatus.FAILED, RunStatus.BLOCKED],
        }.get(self.value())
        return queryset.filter(status__in=chosen) if chosen else queryset


@admin.register(Run)
class RunAdmin(ScopedChoicesMixin, admin.ModelAdmin):
    list_display = (
        "id",
        "schedule",
        "status",
        "trigger_kind",
        "priority",
        "workload_class",
        "queued_at",
        "finished_at",
        "reason",
        "blocked_by",
    )
    list_filter = (AttentionFilter, "status", "trigger_kind", "workload_class")
    search_fields = ("schedule__name", "trigger_key", "reason")
    list_select_related = ("schedule", "workload_class", "blocked_by")
    # COUNT(*) over millions of rows is the slowest part of a change list
    show_full_result_count = False
    actions = ["cancel", "rerun_from_failure"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_cancel_permission(self, request):
        return request.user.has_perm("scheduler.cancel_run")

    def get_queryset(self, request):
        return _visible(super().get_queryset(request), request.user, "schedule__owner_id")

    def has_trigger_permission(self, request):
        return request.user.has_perm("scheduler.trigger_schedule")

    @admin.action(description="Re-run selected workflow runs from their failure", permissions=["trigger"])
    def rerun_from_failure(self, request, queryset):
        for run in _permitted(self, request, "scheduler.trigger_schedule", queryset.select_related("schedule")):
            try:
                new = run_rerun_from_failure(run=run, actor=request.user, reason="admin action")
                self.message_user(request, f"Run {new.pk} re-runs run {run.pk} from its failure.")
            except ServiceError as exc:
                self.message_user(request, str(exc), level=messages.WARNING)

    @admin.action(description="Cancel selected runs", permissions=["cancel"])
    def cancel(self, request, queryset):
        done = 0
        for run in _permitted(self, request, "scheduler.cancel_run", queryset.select_related("schedule")):
            try:
                done += bool(run_cancel(run=run, actor=request.user, reason="admin action"))
            except ServiceError as exc:
                self.message_user(request, str(exc), level=messages.WARNING)
        self.message_user(request, f"Cancelled {done} run(s).")


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor", "via", "action", "target_type", "target_id", "reason")
    list_filter = ("action", "actor_kind")
    search_fields = ("actor", "action", "target_id", "target_repr", "reason")
    show_full_result_count = False

    def get_queryset(self, request):
        """Viewing scoped: the entries of the user's teams, and the user's own."""
        teams = team_services.visible_team_ids(request.user)
        qs = super().get_queryset(request)
        if teams is None:
            return qs
        return qs.filter(models.Q(team_id__in=teams) | models.Q(team_id__isnull=True,
                                                                actor=request.user.get_username()))

    def get_changelist_instance(self, request):
        """Names of other teams inside the listed entries are hidden (viewing scoped)."""
        changelist = super().get_changelist_instance(request)
        redact = selectors.audit_redactor(team_services.visible_team_ids(request.user))
        changelist.result_list = [redact(e) for e in changelist.result_list]
        return changelist

    def get_object(self, request, object_id, from_field=None):
        """One entry, with other teams' names hidden (viewing scoped)."""
        entry = super().get_object(request, object_id, from_field)
        return entry and selectors.audit_redactor(team_services.visible_team_ids(request.user))(entry)


@admin.register(Backfill)
class BackfillAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "schedule",
        "status",
        "range_from",
        "range_to",
        "window_size",
        "total_windows",
        "params",
        "requested_by",
    )
    list_filter = ("status",)

    def get_queryset(self, request):
        return _visible(super().get_queryset(request), request.user, "schedule__owner_id")


@admin.register(GovernanceTick)
class GovernanceTickAdmin(ReadOnlyAdmin):
    list_display = ("started_at", "finished_at", "holder", "error")
    show_full_result_count = False


@admin.register(RefusalCount)
class RefusalCountAdmin(ReadOnlyAdmin):
    """Permission refusals counted per actor, permission, object and window (the first is the audit entry)."""

    list_display = ("window_start", "actor", "permission", "target", "count", "last_at", "audit_entry_id")
    list_filter = ("permission",)
    search_fields = ("actor", "permission", "target")
    show_full_result_count = False

    def get_queryset(self, request):
        """Viewing scoped: the user's own refusals only (a row may name another team's object)."""
        qs = super().get_queryset(request)
        if team_services.visible_team_ids(request.user) is None:
            return qs
        return qs.filter(actor=request.user.get_username())


@admin.register(WebhookRefusal)
class WebhookRefusalAdmin(ReadOnlyAdmin):
    """Refused webhook requests, counted per schedule, reason and minute."""

    list_display = ("window_start", "target", "code", "count", "status", "last_remote", "sample")
    list_filter = ("code", "status")
    show_full_result_count = False

    def get_queryset(self, request):
        """Viewing scoped: refusals of the user's teams' schedules only (an unknown name may be another's)."""
        teams = team_services.visible_team_ids(request.user)
        qs = super().get_queryset(request)
        if teams is None:
            return qs
        ids = Schedule.objects.filter(owner_id__in=teams).values_list("pk", flat=True)
        return qs.filter(target__in=[f"schedule:{pk}" for pk in ids])


class TeamForm(MaskedChannelsMixin, forms.ModelForm):
    class Meta:
        model = Team
        fields = ["name", "description", "members", "alert_channels"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._mask_channels()

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        candidate = Team(pk=self.instance.pk, alert_webhook_secret=self.instance.alert_webhook_secret,
                         **{k: cleaned.get(k) or "" for k in team_services.EDITABLE})
        try:
            team_services.validate_team(candidate)
        except ServiceError as exc:
            field = (exc.field or "").split(".")[0]
            if field in self.fields:
                self.add_error(field, str(exc))
            else:
                raise forms.ValidationError(str(exc)) from None
        return cleaned


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    form = TeamForm

    def get_queryset(self, request):
        """Viewing scoped: the user's own teams only."""
        return _visible(super().get_queryset(request), request.user, "pk")
    list_display = ("name", "description", "member_names", "schedule_count", "channels")
    search_fields = ("name", "description", "members__username")
    filter_horizontal = ("members",)
    readonly_fields = ("webhook_secret_state",)

    def get_fields(self, request, obj=None):
        return ["name", "description", "members", "alert_channels", "webhook_secret_state"]

    @admin.display(description="alert channels")
    def channels(self, obj):
        """Masked: a channel URL may carry a token or a password."""
        return ", ".join(mask_url(u) for u in split_channels(obj.alert_channels, field="alert_channels")) or "-"

    @admin.display(description="members")
    def member_names(self, obj):
        return ", ".join(obj.members.order_by("username").values_list("username", flat=True)) or "-"

    @admin.display(description="schedules")
    def schedule_count(self, obj):
        return obj.schedules.count()

    @admin.display(description="webhook secret")
    def webhook_secret_state(self, obj):
        if obj is None or not obj.alert_webhook_secret:
            return "made when an etlhook(s):// channel is saved"
        return "set (show or rotate it with: manage.py team rotate-secret NAME)"

    def save_model(self, request, obj, form, change):
        """Save through the team service (validation, audit entry, the webhook secret)."""
        data = {k: form.cleaned_data.get(k) or "" for k in team_services.EDITABLE}
        saved = team_services.team_save(data=data, actor=request.user, team=obj if change else None)
        obj.pk = saved.pk
        obj.refresh_from_db()

    def save_related(self, request, form, formsets, change):
        """Members through the service too, so the change is audited."""
        wanted = set(form.cleaned_data.get("members") or [])
        current = set(form.instance.members.all())
        team_services.team_set_members(team=form.instance, add=wanted - current, remove=current - wanted,
                                       actor=request.user, reason="admin")
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)

    def delete_model(self, request, obj):
        try:
            team_services.team_delete(team=obj, actor=request.user, reason="deleted in admin")
        except ServiceError as exc:
            self.message_user(request, str(exc), level=messages.ERROR)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self.delete_model(request, obj)


class WatermarkForm(forms.ModelForm):
    """Set a mark through the audited service: a reason is required, a future datetime needs `force`."""

    reason = forms.CharField(max_length=500, help_text="Why: kept in the audit log and the mark's history.")
    force = forms.BooleanField(required=False, help_text="Allow a datetime mark in the future.")

    class Meta:
        model = WatermarkState
        fields = ["value"]

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        # validate and store in one go; save_model then has nothing left to write
        try:
            with transaction.atomic():
                watermark_set(schedule=self.instance.schedule, value=cleaned.get("value") or None,
                              actor=self.request_user, reason=cleaned.get("reason", ""),
                              force=cleaned.get("force", False))
        except ServiceError as exc:
            field = exc.field if exc.field in self.fields else None
            self.add_error(field, str(exc))
        return cleaned


@admin.register(WatermarkState)
class WatermarkStateAdmin(ScopedChoicesMixin, admin.ModelAdmin):
    form = WatermarkForm
    list_display = ("schedule", "value", "updated_at", "updated_by_run")
    readonly_fields = ("schedule", "updated_at", "updated_by_run")
    search_fields = ("schedule__name",)

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        form.request_user = request.user
        return form

    def save_model(self, request, obj, form, change):
        """Stored by watermark_set in the form's clean (audited, history kept)."""

    def has_add_permission(self, request):
        return False  # a mark comes into being with its schedule's first load

    def has_delete_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        return _visible(super().get_queryset(request), request.user, "schedule__owner_id")

    def has_change_permission(self, request, obj=None):
        """Model permission, then the owning team's membership for one mark."""
        return _allowed(request, "scheduler.manage_watermark", obj)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """A change refused for another team's schedule is audited and says why."""
        if request.method == "POST":
            obj = self.get_object(request, object_id)
            if obj is not None and request.user.has_perm("scheduler.manage_watermark"):
                _refuse_unless(request, "scheduler.manage_watermark", obj)
        return super().change_view(request, object_id, form_url, extra_context)
