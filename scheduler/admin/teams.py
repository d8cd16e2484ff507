"""Teams in the admin: members and alert channels saved through the team service (audited)."""
from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from scheduler.admin.common import MaskedChannelsMixin, visible
from scheduler.models import Team
from scheduler.services.access import teams as team_services
from scheduler.services.integrations.channels import mask_url, split_channels
from scheduler.services.common.errors import ServiceError


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
        return visible(super().get_queryset(request), request.user, "pk")
    list_display = ("name", "description", "member_names", "schedule_count", "channels")
    search_fields = ("name", "description", "members__username")
    filter_horizontal = ("members",)
    readonly_fields = ("webhook_secret_state", "channel_tests")

    def get_fields(self, request, obj=None):
        return ["name", "description", "members", "alert_channels", "channel_tests", "webhook_secret_state"]

    @admin.display(description="test the channels")
    def channel_tests(self, obj):
        """A test button per saved channel, right under the field (issue 37); it posts to the team's test view
        from inside this form (formaction) and comes back here with the answer."""
        if obj is None or not obj.pk:
            return "Save the team first: then each channel gets a test button here."
        rows = [format_html(
            '<li><code>{}</code> <button type="submit" class="button" formaction="{}" formmethod="post" '
            'formnovalidate name="back" value="admin" id="channel-test-{}">Send a test notification</button></li>',
            mask_url(url), reverse("scheduler:team_channel_test", args=[obj.pk, i]), i)
            for i, url in enumerate(split_channels(obj.alert_channels, field="alert_channels"))]
        if not rows:
            return "No channels saved yet."
        return format_html('<ul class="channel-tests">{}</ul><p class="help">Sends to the saved channel, not an '
                           "edited one: save your edits first (a test leaves this page unsaved).</p>",
                           format_html_join("", "{}", ((r,) for r in rows)))

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


__all__ = ["TeamAdmin", "TeamForm"]
