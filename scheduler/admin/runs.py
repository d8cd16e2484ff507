"""Runs and backfills in the admin: read-only lists; cancel and re-run through the services."""
from __future__ import annotations

from django.contrib import admin, messages

from scheduler.admin.common import ReadOnlyAdmin, ScopedChoicesMixin, permitted, visible
from scheduler.models import Backfill, Run, RunStatus
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.stop import run_cancel
from scheduler.services.runs.rerun import run_rerun_from_failure
from scheduler.scoped_runs import HIDDEN_SCHEDULE, hide_other_teams
from scheduler.services.access.teams import visible_team_ids


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


class ScopedRunsMixin:
    """Runs and backfills of the teams a reader may see; with viewing scoped, a run that stands for another team's
    names neither that schedule nor its run (scheduler/scoped_runs.py): in the list, and on a run's own page."""

    def get_queryset(self, request):
        return visible(super().get_queryset(request), request.user, "schedule__owner_id")

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        changelist.result_list = hide_other_teams(changelist.result_list, visible_team_ids(request.user))
        return changelist

    def get_object(self, request, object_id, from_field=None):
        run = super().get_object(request, object_id, from_field)
        return None if run is None else hide_other_teams([run], visible_team_ids(request.user))[0]

    def get_fields(self, request, obj=None):
        return [("blocked_by_shown" if name == "blocked_by" else name) for name in super().get_fields(request, obj)
                if name != "blocked_by_shown"]

    def get_search_fields(self, request):
        # a search of reasons or trigger keys would tell whether another team's schedule or run id exists
        scoped = visible_team_ids(request.user) is not None
        return ("schedule__name",) if scoped else super().get_search_fields(request)

    @admin.display(description="blocked by", ordering="blocked_by")
    def blocked_by_shown(self, run):
        if getattr(run, "hidden_blocker", False):
            return HIDDEN_SCHEDULE
        return run.blocked_by or "-"


@admin.register(Run)
class RunAdmin(ScopedRunsMixin, ScopedChoicesMixin, ReadOnlyAdmin):
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
        "blocked_by_shown",
    )
    readonly_fields = ("blocked_by_shown",)
    list_filter = (AttentionFilter, "status", "trigger_kind", "workload_class")
    search_fields = ("schedule__name", "trigger_key", "reason")
    list_select_related = ("schedule", "workload_class", "blocked_by")
    # COUNT(*) over millions of rows is the slowest part of a change list
    show_full_result_count = False
    actions = ["cancel", "rerun_from_failure"]

    def has_cancel_permission(self, request):
        return request.user.has_perm("scheduler.cancel_run")

    def has_trigger_permission(self, request):
        return request.user.has_perm("scheduler.trigger_schedule")

    @admin.action(description="Re-run selected workflow runs from their failure", permissions=["trigger"])
    def rerun_from_failure(self, request, queryset):
        for run in permitted(self, request, "scheduler.trigger_schedule", queryset.select_related("schedule")):
            try:
                new = run_rerun_from_failure(run=run, actor=request.user, reason="admin action")
                self.message_user(request, f"Run {new.pk} re-runs run {run.pk} from its failure.")
            except ServiceError as exc:
                self.message_user(request, str(exc), level=messages.WARNING)

    @admin.action(description="Cancel selected runs", permissions=["cancel"])
    def cancel(self, request, queryset):
        done = 0
        for run in permitted(self, request, "scheduler.cancel_run", queryset.select_related("schedule")):
            try:
                done += bool(run_cancel(run=run, actor=request.user, reason="admin action"))
            except ServiceError as exc:
                self.message_user(request, str(exc), level=messages.WARNING)
        self.message_user(request, f"Cancelled {done} run(s).")


@admin.register(Backfill)
class BackfillAdmin(ScopedRunsMixin, ReadOnlyAdmin):
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


__all__ = ["AttentionFilter", "BackfillAdmin", "RunAdmin"]
