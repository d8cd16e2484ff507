"""Runs and backfills in the admin: read-only lists; cancel and re-run through the services."""
from __future__ import annotations

from django.contrib import admin, messages

from scheduler.admin.common import ReadOnlyAdmin, ScopedChoicesMixin, permitted, visible
from scheduler.models import Backfill, Run, RunStatus
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.end import run_cancel
from scheduler.services.runs.nodes import run_rerun_from_failure


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
class RunAdmin(ScopedChoicesMixin, ReadOnlyAdmin):
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

    def has_cancel_permission(self, request):
        return request.user.has_perm("scheduler.cancel_run")

    def get_queryset(self, request):
        return visible(super().get_queryset(request), request.user, "schedule__owner_id")

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
        return visible(super().get_queryset(request), request.user, "schedule__owner_id")


__all__ = ["AttentionFilter", "BackfillAdmin", "RunAdmin"]
