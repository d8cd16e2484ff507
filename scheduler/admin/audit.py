"""The records in the admin, read-only: the audit log, governance ticks, permission and webhook refusals."""
from __future__ import annotations

from django.contrib import admin
from django.db import models

from scheduler import audit_reads
from scheduler.admin.common import ReadOnlyAdmin
from scheduler.models import AuditEntry, GovernanceTick, RefusalCount, Schedule, WebhookRefusal
from scheduler.services.access import teams as team_services


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
        redact = audit_reads.audit_redactor(team_services.visible_team_ids(request.user))
        changelist.result_list = [redact(e) for e in changelist.result_list]
        return changelist

    def get_object(self, request, object_id, from_field=None):
        """One entry, with other teams' names hidden (viewing scoped)."""
        entry = super().get_object(request, object_id, from_field)
        return entry and audit_reads.audit_redactor(team_services.visible_team_ids(request.user))(entry)


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


__all__ = ["AuditEntryAdmin", "GovernanceTickAdmin", "RefusalCountAdmin", "WebhookRefusalAdmin"]
