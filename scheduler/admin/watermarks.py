"""Watermarks in the admin: a mark is set through the audited service, with a reason."""
from __future__ import annotations

from django import forms
from django.contrib import admin
from django.db import transaction

from scheduler.admin.common import ScopedChoicesMixin, allowed, refuse_unless, visible
from scheduler.models import WatermarkState
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.watermarks import watermark_set


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
        return visible(super().get_queryset(request), request.user, "schedule__owner_id")

    def has_change_permission(self, request, obj=None):
        """Model permission, then the owning team's membership for one mark."""
        return allowed(request, "scheduler.manage_watermark", obj)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """A change refused for another team's schedule is audited and says why."""
        if request.method == "POST":
            obj = self.get_object(request, object_id)
            if obj is not None and request.user.has_perm("scheduler.manage_watermark"):
                refuse_unless(request, "scheduler.manage_watermark", obj)
        return super().change_view(request, object_id, form_url, extra_context)


__all__ = ["WatermarkForm", "WatermarkStateAdmin"]
