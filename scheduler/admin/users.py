"""Users and groups in the admin, for the admin group (not only superusers): Django's own pages, with the
superuser powers kept for superusers. A non-superuser cannot make anyone a superuser, hand out single
permissions, or change a superuser's account; groups and team memberships are what they manage.

A user's page is the one place to manage them (issue 37): their teams are set there (through the team service,
audited, as on the team's page) and their API tokens are listed there, each linked to its revoke page."""
from __future__ import annotations

from django import forms
from django.contrib import admin
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import UserChangeForm
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from scheduler.admin.common import visible
from scheduler.models import Team
from scheduler.services.access import teams as team_services

SUPERUSER_ONLY = ("is_superuser", "user_permissions")
SHOWN_TOKENS = 20


class UserTeamsForm(UserChangeForm):
    """Django's user form and the teams the user belongs to (of those the editor may see)."""

    teams = forms.ModelMultipleChoiceField(
        queryset=Team.objects.none(), required=False, widget=FilteredSelectMultiple("teams", is_stacked=False),
        help_text="The teams whose schedules this user acts on (their groups still decide what they may do). "
                  "Saved through the team service: each change is in the audit log.")


class ScopedUserAdmin(UserAdmin):
    form = UserTeamsForm

    def get_form(self, request, obj=None, **kwargs):
        """The teams field offers the teams the editor may see, starting from the user's own."""
        form = super().get_form(request, obj, **kwargs)
        if "teams" in form.base_fields:
            field = form.base_fields["teams"]
            field.queryset = visible(Team.objects.order_by("name"), request.user, "pk")
            field.initial = list(obj.etl_teams.values_list("pk", flat=True)) if obj is not None else []
        return form

    def get_fieldsets(self, request, obj=None):
        """A user's teams and API tokens, under Django's own sections."""
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None:
            return fieldsets
        teams = ("teams",) if request.user.has_perm("scheduler.change_team") else ("team_links",)
        return (*fieldsets, ("Teams and API tokens", {"fields": (*teams, "api_tokens")}))

    def get_readonly_fields(self, request, obj=None):
        """Superuser status and single permissions are a superuser's to give."""
        fields = (*super().get_readonly_fields(request, obj), "team_links", "api_tokens")
        return fields if request.user.is_superuser else (*fields, *SUPERUSER_ONLY)

    @admin.display(description="teams")
    def team_links(self, obj):
        seen = getattr(obj, "editor_team_ids", frozenset())  # None: the editor sees every team
        teams = [t for t in obj.etl_teams.order_by("name") if seen is None or t.pk in seen] if obj else []
        links = format_html_join(", ", '<a href="{}">{}</a>', (
            (reverse("admin:scheduler_team_change", args=[t.pk]), t.name) for t in teams))
        return links or "none"

    @admin.display(description="API tokens")
    def api_tokens(self, obj):
        """Each token (never its secret): its state, and a link to its page (revoke is there)."""
        if obj is None:
            return "-"
        now = timezone.now()
        tokens = list(obj.api_tokens.order_by("-created_at")[:SHOWN_TOKENS + 1])
        rows = format_html_join("", '<li><a href="{}">{}</a> {} · {}</li>', (
            (reverse("admin:scheduler_apitoken_change", args=[t.pk]), t.key_id, t.name, _token_state(t, now))
            for t in tokens[:SHOWN_TOKENS]))
        listing = reverse("admin:scheduler_apitoken_changelist") + f"?user__id__exact={obj.pk}"
        more = "all of them" if len(tokens) > SHOWN_TOKENS else "as a list"
        if not tokens:
            return format_html("none (a user makes their own under {}, or <code>{}</code>)",
                               "Preferences > API tokens", "manage.py api_token")
        return format_html('<ul class="user-tokens">{}</ul><a href="{}">{} (revoke there)</a>', rows, listing, more)

    def get_object(self, request, object_id, from_field=None):
        """The user, carrying which teams the editor may see (team_links names no other)."""
        obj = super().get_object(request, object_id, from_field)
        if obj is not None:
            obj.editor_team_ids = team_services.visible_team_ids(request.user)
        return obj

    def save_related(self, request, form, formsets, change):
        """Teams through the team service, one audited change per team that gained or lost the user."""
        super().save_related(request, form, formsets, change)
        if "teams" not in form.cleaned_data or not change:
            return
        user = form.instance
        offered = set(form.fields["teams"].queryset)
        wanted = set(form.cleaned_data["teams"] or [])
        current = set(user.etl_teams.all()) & offered  # a team the editor cannot see is left as it is
        for team in sorted(wanted - current, key=lambda t: t.name):
            team_services.team_set_members(team=team, add=[user], actor=request.user, reason="admin: user page")
        for team in sorted(current - wanted, key=lambda t: t.name):
            team_services.team_set_members(team=team, remove=[user], actor=request.user, reason="admin: user page")

    def has_change_permission(self, request, obj=None):
        """A superuser's account is changed by a superuser only."""
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        """Likewise for deleting one."""
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_delete_permission(request, obj)


def _token_state(token, now) -> str:
    if token.revoked_at:
        return "revoked"
    if token.expires_at and token.expires_at <= now:
        return "expired"
    return "active" + (f", last used {token.last_used_at:%Y-%m-%d}" if token.last_used_at else ", never used")


admin.site.unregister(User)
admin.site.register(User, ScopedUserAdmin)
