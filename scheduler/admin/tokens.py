"""API and event tokens in the admin: staff list and revoke them; the hash is read-only, the secret never shown."""
from __future__ import annotations

from django.contrib import admin, messages
from django.utils import timezone

from scheduler.models import ApiToken, EventToken
from scheduler.services.access.event_tokens import event_token_revoke
from scheduler.services.access.teams import visible_team_ids
from scheduler.services.access.tokens import token_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("key_id", "name", "user", "created_at", "expires_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("key_id", "name", "user__username")
    readonly_fields = ("user", "name", "key_id", "secret_hash", "created_at", "expires_at", "revoked_at",
                       "last_used_at")
    actions = ["revoke"]

    def has_add_permission(self, request):
        """Tokens are made where they can be shown once: Preferences > API tokens, or manage.py api_token."""
        return False

    def has_delete_permission(self, request, obj=None):
        """Revoke instead: the row stays, so the audit log's key id keeps meaning something."""
        return False

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke(self, request, queryset):
        now = timezone.now()
        done = sum(token_revoke(token=t, actor=request.user, reason="revoked in the admin", now=now)
                   for t in queryset.select_related("user"))
        messages.success(request, f"{done} token(s) revoked.")


@admin.register(EventToken)
class EventTokenAdmin(admin.ModelAdmin):
    """Event tokens with their team; made with `manage.py event_token create` (shown once), revoked here."""

    list_display = ("key_id", "name", "team_or_all", "created_at", "last_used_at", "revoked_at")
    list_filter = ("all_teams", "revoked_at")
    search_fields = ("key_id", "name", "team__name")
    readonly_fields = ("name", "team", "all_teams", "key_id", "secret_hash", "created_at", "revoked_at",
                       "last_used_at")
    actions = ["revoke"]

    def get_queryset(self, request):
        """Viewing scoped: the tokens of the user's teams only."""
        teams = visible_team_ids(request.user)
        qs = super().get_queryset(request)
        return qs if teams is None else qs.filter(team_id__in=teams)

    @admin.display(description="team")
    def team_or_all(self, obj):
        return obj.team.name if obj.team_id else "(all teams)"

    def has_add_permission(self, request):
        """Tokens are made where they can be shown once: manage.py event_token create."""
        return False

    def has_delete_permission(self, request, obj=None):
        """Revoke instead: the row stays, so the audit log's key id keeps meaning something."""
        return False

    @admin.action(description="Revoke the selected event tokens", permissions=["change"])
    def revoke(self, request, queryset):
        done = sum(event_token_revoke(token=t, actor=request.user, reason="revoked in the admin")
                   for t in queryset.select_related("team"))
        messages.success(request, f"{done} event token(s) revoked.")
