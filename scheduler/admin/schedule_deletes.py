"""Deleting schedules in the admin through the schedule service: unfinished runs refuse a delete, naming them;
an action stops them first (definitions/schedule_removal.py)."""
from __future__ import annotations

from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import reverse

from scheduler.admin.common import permitted, refuse_unless
from scheduler.models import Schedule
from scheduler.services.common.errors import ServiceError
from scheduler.services.definitions import schedule_removal


class ScheduleDeletesMixin:
    """The ScheduleAdmin's deletes: the single delete, Django's bulk action, and the one that stops runs first."""

    def get_deleted_objects(self, objs, request):
        """The bulk delete action: another team's schedule in the selection refuses it (audited, with the reason).

        A schedule's runs and their records go with it through the schedule service, which refuses unfinished
        runs: deleting the schedule needs no delete permission on each of them."""
        if request.user.has_perm("scheduler.delete_schedule"):
            for obj in objs:
                refuse_unless(request, "scheduler.delete_schedule", obj)
        deleted, counts, _perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, set(), protected

    def delete_model(self, request, obj):
        """Unfinished runs refuse it (the message names them); the action "Delete ... stopping their runs" stops
        them first."""
        self._delete(request, obj, stop_runs=False)

    def delete_queryset(self, request, queryset):
        for obj in permitted(self, request, "scheduler.delete_schedule", queryset):
            self.delete_model(request, obj)

    def _delete(self, request, obj, *, stop_runs: bool) -> None:
        try:
            status = schedule_removal.schedule_delete(schedule=obj, actor=request.user, reason="deleted in admin",
                                                      stop_runs=stop_runs)
        except ServiceError as exc:
            self.message_user(request, str(exc), level=messages.ERROR)
            return
        if status == schedule_removal.DELETING:
            self.message_user(request, f"Deleting {obj.name}: its runs are being stopped; it is deleted when they "
                                       "have ended.", level=messages.WARNING)

    def response_delete(self, request, obj_display, obj_id):
        """A delete refused (unfinished runs) does not say "deleted successfully"."""
        if Schedule.objects.filter(pk=obj_id).exists():
            return HttpResponseRedirect(reverse("admin:scheduler_schedule_change", args=[obj_id]))
        return super().response_delete(request, obj_display, obj_id)

    @admin.action(description="Delete selected schedules, stopping their unfinished runs first", permissions=["delete"])
    def delete_stopping_runs(self, request, queryset):
        for schedule in permitted(self, request, "scheduler.delete_schedule", queryset):
            self._delete(request, schedule, stop_runs=True)

    def get_actions(self, request):
        """Django's bulk delete refuses a selection with unfinished runs as a whole, naming them, before it says
        "Successfully deleted"."""
        actions = super().get_actions(request)
        if "delete_selected" in actions:
            func, name, description = actions["delete_selected"]
            actions["delete_selected"] = (_refusing_unfinished(func), name, description)
        return actions


def _refusing_unfinished(delete_selected):
    def action(modeladmin, request, queryset):
        if request.POST.get("post"):
            busy = [(s.name, runs) for s in queryset if (runs := schedule_removal.unfinished_runs(s.pk))]
            for name, runs in busy:
                modeladmin.message_user(request, str(schedule_removal.UnfinishedRuns(name, runs)),
                                        level=messages.ERROR)
            if busy:
                return None
        return delete_selected(modeladmin, request, queryset)

    return action


__all__ = ["ScheduleDeletesMixin"]
