"""Connections in the admin: saved and deleted through the connection service; secrets write-only."""
from __future__ import annotations

from django import forms
from django.contrib import admin

from scheduler.admin.common import ScopedChoicesMixin, allowed, refuse_unless, visible
from scheduler.models import Connection, Team
from scheduler.services.access.connections import NAME_RE, connection_delete, connection_set, connection_shown
from scheduler.services.access.teams import actable_team_ids

EDITED = ("owner", "kind", "description", "scheme", "host", "port", "database", "login", "extra")


class ConnectionForm(forms.ModelForm):
    password = forms.CharField(
        required=False, strip=False, widget=forms.PasswordInput(render_value=False),
        help_text="Write-only: never shown again. Leave it empty to keep the stored one.")
    clear_password = forms.BooleanField(required=False, help_text="Remove the stored password.")

    class Meta:
        model = Connection
        fields = ("name", *EDITED)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["name"].disabled = True  # the name is what schedules and ETL_CONN_<NAME> use
            if connection_shown(self.instance)["password"]:
                self.fields["password"].help_text = "A password is set (***). " + self.fields["password"].help_text

    def clean_name(self):
        name = self.cleaned_data.get("name")
        if not self.instance.pk and (not isinstance(name, str) or not NAME_RE.match(name)):
            raise forms.ValidationError("lower-case letters, digits and _, starting with a letter")
        return name

    def clean_extra(self):
        extra = self.cleaned_data.get("extra")
        if extra in (None, ""):
            return {}
        if not isinstance(extra, dict) or not all(isinstance(v, (str, int, float, bool)) for v in extra.values()):
            raise forms.ValidationError("an object of name: text or number (secrets go in the password)")
        return extra


@admin.register(Connection)
class ConnectionAdmin(ScopedChoicesMixin, admin.ModelAdmin):
    form = ConnectionForm
    list_display = ("name", "owner", "kind", "host", "database")
    list_filter = (("owner", admin.RelatedOnlyFieldListFilter), "kind")
    search_fields = ("name", "host", "description")

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        """The owner offered: the teams the user may act for (the service refuses any other)."""
        if db_field.name == "owner":
            teams = actable_team_ids(request.user)
            if teams is not None:
                kwargs["queryset"] = Team.objects.filter(pk__in=teams)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_queryset(self, request):
        return visible(super().get_queryset(request).select_related("owner"), request.user, "owner_id")

    def has_change_permission(self, request, obj=None):
        return allowed(request, "scheduler.change_connection", obj)

    def has_delete_permission(self, request, obj=None):
        return allowed(request, "scheduler.delete_connection", obj)

    def save_model(self, request, obj, form, change):
        """Through the service: authorized, audited with the secrets masked, the password encrypted."""
        data = {key: form.cleaned_data.get(key) for key in EDITED}
        password = "" if form.cleaned_data.get("clear_password") else (form.cleaned_data.get("password") or None)
        saved = connection_set(name=obj.name if change else form.cleaned_data["name"], actor=request.user,
                               password=password, reason="admin", **data)
        obj.pk = saved.pk
        obj.refresh_from_db()

    def delete_model(self, request, obj):
        connection_delete(connection=obj, actor=request.user, reason="deleted in admin")

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            refuse_unless(request, "scheduler.delete_connection", obj)
            connection_delete(connection=obj, actor=request.user, reason="deleted in admin")
