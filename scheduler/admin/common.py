"""What the admin's pages share: viewing scoped to the user's teams, permission checks, masked channels."""
from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied

from scheduler.models import Schedule, Team
from scheduler.services.access import teams as team_services
from scheduler.services.integrations.channels import channels_text, mask_url, split_channels, unmask_channels
from scheduler.services.common.errors import ServiceError


def visible(queryset, user, team_field: str):
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


def allowed(request, perm: str, obj) -> bool:
    return request.user.has_perm(perm) and (obj is None or request.user.has_perm(perm, obj))


def refuse_unless(request, perm: str, obj) -> None:
    try:
        team_services.authorize(actor=request.user, perm=perm, obj=obj)
    except team_services.PermissionRefused as exc:
        raise PermissionDenied(str(exc)) from None


def permitted(model_admin, request, perm: str, queryset):
    """The objects of an action's selection the user may act on; each refusal is audited and shown."""
    for obj in queryset:
        try:
            team_services.authorize(actor=request.user, perm=perm, obj=obj)
        except team_services.PermissionRefused as exc:
            model_admin.message_user(request, str(exc), level=messages.ERROR)
            continue
        yield obj


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


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


__all__ = ["MaskedChannelsMixin", "ReadOnlyAdmin", "ScopedChoicesMixin", "allowed", "permitted", "refuse_unless",
           "visible"]
